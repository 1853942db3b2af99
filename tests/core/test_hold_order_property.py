"""Hold order over random busy clusters (issue 16 item 4: "at most ``max_holds`` holds at once,
ordered by queue priority, then age"; ``extender/plugins/topology/holds.py``).

A random cluster (1–3 leaves of 2–4 8-GPU nodes) whose every node runs a one-pod job of random
size that never ends; gangs of random size and priority arrive over a few cycles, in random order.
One hold is allowed (``max_holds: 1``). Once every gang has waited long enough, and a few cycles
more, the one hold must belong to a gang of the highest priority among the gangs still waiting
that could ever be held (they fit the cluster once empty) and are not only kept off the held
nodes (``NodeHeldForGang``: such a gang waits for the holder, by rule). Gangs of equal priority
are equally old here: whichever held first keeps the hold. Every cycle's writes are applied as the
binder plans them.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from bench.cache_writes import apply_plan
from extender.binder.plan import plan_writes
from extender.cache.cache import ClusterCache
from extender.framework.status import Reason
from extender.scheduler import CycleResult, Scheduler
from tests import builders as b
from tests.core.props import PROPERTY
from tests.core.scenarios import NOW, policy_with_topology
from tests.core.test_gang_sequences_property import placed, start_bound_pods

Gang = tuple[int, int, int, int]  # (arrives after this many cycles, workers, GPUs each, priority)
World = tuple[list[int], list[Gang], int]  # (nodes per leaf, gangs, reserve_after_cycles)
SETTLE_CYCLES = 6  # after the last gang has waited reserve_after_cycles: displacement takes one


@st.composite
def worlds(draw: st.DrawFn) -> World:
    leaves = draw(st.lists(st.integers(2, 4), min_size=1, max_size=3))
    gang = st.tuples(st.integers(0, 4), st.integers(1, 6), st.sampled_from([1, 2, 4, 8]), st.sampled_from([0, 5, 10]))
    return leaves, draw(st.lists(gang, min_size=2, max_size=5)), draw(st.sampled_from([1, 2]))


def build(leaves: list[int], fill: list[int]) -> ClusterCache:
    """The cluster, node ``n<i>`` running a one-pod job of ``fill[i]`` GPUs (0: none)."""
    cache = ClusterCache(clock=lambda: NOW)
    objs: list[dict[str, Any]] = []
    for leaf, count in enumerate(leaves):
        for _ in range(count):
            i = len(objs) // 2
            objs += [b.node(f"n{i}", index=i), b.topology(f"n{i}", [f"s{leaf}"])]
    for i, gpu in enumerate(fill):
        if gpu:
            bound = {"phase": "QuotaBound", "nodeName": f"n{i}"}
            objs.append(b.quota(f"q-fill-{i}", gpu=gpu, hca=None, status=bound))
            objs.append(b.pod(f"fill-{i}", quota=f"q-fill-{i}", gpu=gpu, hca=None, node=f"n{i}", phase="Running"))
    b.feed(cache, objs)
    return cache


def submit(cache: ClusterCache, name: str, workers: int, gpu: int, priority: int) -> None:
    objs = b.training_job(name, workers, gpu=gpu, hca=1)
    for o in objs:
        if o["kind"] == "Pod":
            o["spec"]["priority"] = priority
    b.feed(cache, objs)


def cycle(cache: ClusterCache, sched: Scheduler) -> CycleResult:
    result = sched.run_once(cache.snapshot(NOW))
    apply_plan(cache, plan_writes(cache, result, extra_quotas=cache.take_dirty_quotas()))
    start_bound_pods(cache)
    return result


def fits_empty(nodes: int, workers: int, gpu: int) -> bool:
    return nodes * (8 // gpu) >= workers


def check_order(cache: ClusterCache, sched: Scheduler, result: CycleResult, gangs: dict[str, Gang], nodes: int) -> None:
    holds = sorted(sched.memory.holds)
    # a gang kept off the held nodes waits for a holder of its priority or higher, by rule (with no
    # hold left at the end of the cycle, for the one that kept it off in the cycle)
    holder = gangs[holds[0].removeprefix("default/")][3] if holds else max(spec[3] for spec in gangs.values())
    waiting = {
        g: spec
        for g, spec in gangs.items()
        if not placed(cache, g, spec[1])
        and fits_empty(nodes, spec[1], spec[2])
        and not (result.verdicts[f"default/{g}"].status.reason is Reason.NODE_HELD_FOR_GANG and spec[3] <= holder)
    }
    if not waiting:
        return
    top = max(spec[3] for spec in waiting.values())
    assert len(holds) == 1, f"no hold while {sorted(waiting)} wait"
    holding = gangs[holds[0].removeprefix("default/")]
    assert holding[3] == top, (
        f"{holds[0]} (priority {holding[3]}) holds while a gang of priority {top} waits: {waiting}"
    )


def play(
    world: World, data: st.DataObject, *, max_holds: int
) -> tuple[ClusterCache, Scheduler, CycleResult, dict[str, Gang]]:
    """Play ``world``: its leaves filled as drawn, its gangs submitted at their steps, cycles
    until every hold had time to settle (holds never expire); the last cycle's result."""
    leaves, arrivals, reserve = world
    nodes = sum(leaves)
    fill = data.draw(st.lists(st.sampled_from([0, 1, 4, 8]), min_size=nodes, max_size=nodes), label="fill")
    cache = build(leaves, fill)
    policy = policy_with_topology({"reserve_after_cycles": reserve, "max_holds": max_holds, "hold_seconds": 1e9})
    sched = Scheduler(policy)
    gangs = {f"g{k}": spec for k, spec in enumerate(arrivals)}
    last = max(spec[0] for spec in arrivals)
    result = None
    for step in range(last + reserve + SETTLE_CYCLES):
        for name, (at, workers, gpu, priority) in gangs.items():
            if at == step:
                submit(cache, name, workers, gpu, priority)
        result = cycle(cache, sched)
    assert result is not None
    return cache, sched, result, gangs


@PROPERTY
@given(worlds(), st.data())
def test_the_one_hold_goes_to_a_waiting_gang_of_the_highest_priority(world: World, data: st.DataObject) -> None:
    cache, sched, result, gangs = play(world, data, max_holds=1)
    check_order(cache, sched, result, gangs, sum(world[0]))


def check_places(
    cache: ClusterCache, sched: Scheduler, result: CycleResult, gangs: dict[str, Gang], limit: int
) -> None:
    """No waiting gang holds nothing while it could hold in a free place (fewer than ``limit``
    holds) or in the places of holders of lower priority (their nodes, and every node no other
    gang holds, once empty, take the gang: one such holder's, or all of theirs together) — unless
    kept off by a holder of its priority or higher."""
    held = {job.removeprefix("default/"): h.nodes for job, h in sched.memory.holds.items()}
    names = list(cache.nodes)
    for g, (_, workers, gpu, priority) in gangs.items():
        if g in held or placed(cache, g, workers):
            continue
        status = result.verdicts[f"default/{g}"].status
        if status.reason is Reason.NODE_HELD_FOR_GANG and any(gangs[h][3] >= priority for h in held):
            continue
        places = [held] if len(held) < limit else []
        places += [{h: n for h, n in held.items() if h != lower} for lower in held if gangs[lower][3] < priority]
        if any(gangs[h][3] < priority for h in held):  # every lower one's place at once
            places.append({h: n for h, n in held.items() if gangs[h][3] >= priority})
        for others in places:
            taken = {n for nodes in others.values() for n in nodes}
            room = sum(8 // gpu for n in names if n not in taken)
            assert room < workers, f"{g} (priority {priority}) holds nothing; it could hold beside {sorted(others)}"


@PROPERTY
@given(worlds(), st.sampled_from([1, 2, 3]), st.data())
def test_a_waiting_gang_holds_where_it_could_unless_a_gang_before_it_holds_there(
    world: World, limit: int, data: st.DataObject
) -> None:
    """Several holds (``max_holds`` 1 to 3): a gang that has waited long enough holds in a free
    place while one is left, else in the places of gangs after it in hold order — as many of
    them as it needs."""
    cache, sched, result, gangs = play(world, data, max_holds=limit)
    check_places(cache, sched, result, gangs, limit)
