"""Holds over random histories (issue 16 item 4, ``extender/plugins/topology/holds.py``).

Random small clusters (1–3 leaves of 2–4 nodes, one or two GPU models) live through random steps:
gangs (some of priority 10, some of one 8-GPU launcher beside smaller workers, some kept hard to
one leaf) and one-pod jobs arrive, running jobs finish or are evicted (their
places kept for ``reservation_ttl``), waiting jobs are deleted with their PodGroup, nodes go (their
jobs fail as a whole) or flip Ready, the clock jumps, and the scheduler restarts (a new process
taking over the holds the PodGroups' ``status.hold`` recorded). Every cycle runs the real scheduler on a real
cache, its writes applied as the binder plans them, and checks:

- what every cycle must keep (``check_cycle``: invariant 1, whole gangs, one GPU model, no more
  leaves than needed — for gangs whose quotas differ in size too, :func:`check_spread`: a hold may
  make a gang wait, never span more leaves; a gang kept hard to one leaf never spans two);
- at most ``max_holds`` holds, none older than ``hold_seconds``, none of a job that is gone or
  whose quotas are all bound;
- no quota of another job is bound to a node held for a job at the start and at the end of the
  cycle (a hold may move or end within the cycle; then its old nodes are free again);
- hold order: a gang that qualified for a hold in the cycle (its plan failed again after
  ``reserve_after_cycles`` failed cycles, not because of another's hold, and no hold of its ended
  in the cycle) and holds nothing at its end, while it fits the empty cluster, leaves no hold to a
  gang of lower priority.

At the end everything running finishes, cycle after cycle, and every gang that fits the empty
cluster must have been placed: holds never keep a gang (or another) waiting forever.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from bench.cache_writes import apply_plan
from extender import wellknown
from extender.binder.plan import plan_writes
from extender.cache.cache import ClusterCache
from extender.framework.intents import BindQuota
from extender.framework.status import Reason
from extender.plugins.topology.holds import EXPIRED_NOTE, FAILED_NOTE
from extender.plugins.topology.holds import recorded as recorded_holds
from extender.scheduler import CycleResult, Scheduler
from tests import builders as b
from tests.core.props import PROPERTY
from tests.core.scenarios import NOW, bumped, policy_with_topology
from tests.core.test_gang_sequences_property import (
    Node,
    check_cycle,
    placed,
    released_late,
    set_ready,
    start_bound_pods,
)

Step = tuple[str, int, int]  # (kind, count | index | seconds, GPUs per worker)
Holds = dict[str, tuple[tuple[str, ...], float]]  # job → (held nodes, since)
Gangs = dict[str, tuple[int, int]]  # job name → (quotas, GPUs each of all but an 8-GPU launcher's)
LAUNCHER = 8  # GPUs of a mixed gang's first quota (its launcher)
World = tuple[list[dict[str, Any]], dict[str, Node], list[Step], dict[str, Any]]
DRAIN_CYCLES = 80
HARD_LEAF = {"highestTierAllowed": "leaf", "mode": "hard"}
GPU = wellknown.RESOURCE_GPU


def node_objects(nodes: dict[str, Node]) -> list[dict[str, Any]]:
    """Each node (GPU model, leaf) as a Node and its Topology, its index its place in ``nodes``."""
    objs: list[dict[str, Any]] = []
    for i, (name, (model, leaf, _)) in enumerate(nodes.items()):
        objs += [b.node(name, gpu_model=model, index=i), b.topology(name, [leaf])]
    return objs


@st.composite
def worlds(draw: st.DrawFn) -> World:
    nodes: dict[str, Node] = {}
    models = ["A100", "H100"][: draw(st.integers(1, 2))]
    for leaf in range(draw(st.integers(1, 3))):
        for _ in range(draw(st.integers(2, 4))):
            nodes[f"n{len(nodes)}"] = (draw(st.sampled_from(models)), f"s{leaf}", True)
    objs = node_objects(nodes)
    arrive = st.tuples(
        st.sampled_from(["arrive", "urgent", "mixed", "hard", "mixed-hard"]),
        st.integers(1, 6),
        st.sampled_from([1, 2, 4, 8]),
    )
    trickle = st.tuples(st.just("trickle"), st.integers(2, 6), st.sampled_from([1, 4, 8]))
    step = st.one_of(  # gangs and trickles twice over: what makes holds and tests them
        arrive,
        arrive,
        trickle,
        trickle,
        st.tuples(st.just("single"), st.just(1), st.sampled_from([1, 4, 8])),
        st.tuples(st.just("finish"), st.integers(0, 9), st.just(0)),
        st.tuples(st.just("evict"), st.integers(0, 9), st.just(0)),
        st.tuples(st.just("delete"), st.integers(0, 9), st.just(0)),
        st.tuples(st.just("cycles"), st.integers(1, 5), st.just(0)),
        st.tuples(st.just("cycles"), st.integers(1, 5), st.just(0)),
        st.tuples(st.just("advance"), st.sampled_from([1, 30, 700]), st.just(0)),
        st.tuples(st.just("lose"), st.integers(0, 11), st.just(0)),
        st.tuples(st.just("flip"), st.integers(0, 11), st.just(0)),
        st.tuples(st.just("restart"), st.just(0), st.just(0)),
    )
    topology = {
        "reserve_after_cycles": draw(st.sampled_from([1, 2])),
        "max_holds": draw(st.sampled_from([1, 2, 3])),
        "hold_seconds": draw(st.sampled_from([3.0, 20.0, 600.0])),
        "pack_workers": draw(st.booleans()),
    }
    return objs, nodes, draw(st.lists(step, min_size=4, max_size=16)), topology


def holds_of(sched: Scheduler) -> Holds:
    return {job: (h.nodes, h.since) for job, h in sched.memory.holds.items()}


def check_holds(
    cache: ClusterCache,
    result: CycleResult,
    start: Holds,
    end: Holds,
    gangs: Gangs,
    topology: dict[str, Any],
    now: float,
) -> None:
    """The hold properties of the module docstring for one cycle (AssertionError names the break)."""
    assert len(end) <= topology["max_holds"], f"{len(end)} holds, at most {topology['max_holds']}: {end}"
    for job, (_, since) in end.items():
        assert now - since < topology["hold_seconds"], f"hold of {job} since {since} outlived its time at {now}"
        assert job in cache.jobs, f"hold of a gone job {job}"
        gang = job.split("/", 1)[1]
        assert gang not in gangs or not placed(cache, gang, gangs[gang][0]), f"placed job {job} still holds"
    check_hold_order(cache, result, end, topology)
    for intent in result.intents:
        if not isinstance(intent, BindQuota):
            continue
        owner = "default/" + intent.quota.removeprefix("q-").rsplit("-", 1)[0]
        for job, (held, _) in start.items():
            kept = job in end and intent.node in held and intent.node in end[job][0]
            assert job == owner or not kept, f"{intent.quota} bound to {intent.node}, held for {job} all cycle"


def check_hold_order(cache: ClusterCache, result: CycleResult, end: Holds, topology: dict[str, Any]) -> None:
    """No gang that qualified for a hold in the cycle and holds nothing ranks before a holder; one
    kept off held nodes (``NodeHeldForGang``) ranks before none of the holders that keep it off."""
    waited = result.session.snap.gang_waits
    ended = result.notes.get(EXPIRED_NOTE, ())
    for key in result.notes.get(FAILED_NOTE, ()):
        verdict = result.verdicts.get(key)
        if (
            key in end
            or key in ended
            or waited.get(key, 0) < topology["reserve_after_cycles"]
            or verdict is None
            or not fits_empty_cluster(cache, key)
        ):
            continue
        mine = cache.jobs[key].priority
        if verdict.status.reason is Reason.NODE_HELD_FOR_GANG:
            holders = re.findall(r"default/[\w-]+", verdict.status.message().split("held for ", 1)[1])
            lower = holders if all(cache.jobs[h].priority < mine for h in holders) else []
        else:
            lower = [h for h in end if cache.jobs[h].priority < mine]
        assert not lower, f"{key} (priority {mine}) qualified and holds nothing; lower-priority {lower} hold"


def fits_empty_cluster(cache: ClusterCache, key: str) -> bool:
    """The job's unbound quotas fit the cluster's Ready nodes of one GPU model once empty (of one
    leaf, for a gang kept hard to one)."""
    job = cache.jobs[key]
    quotas = [cache.quotas[t.quota] for t in job.tasks.values() if t.quota in cache.quotas]
    unbound = [q for q in quotas if not q.node_name]
    if not unbound or any(q.node_name for q in quotas):
        return False  # a partly bound gang may use one model only: not judged here
    units: dict[tuple[str, str], list[int]] = {}
    for node in cache.nodes.values():
        if node.ready:
            unit = (node.spec, node.zone if job.hard_tier == 1 else "")
            units.setdefault(unit, []).append(node.allocatable.get(GPU))
    return any(packs([q.request.get(GPU) for q in unbound], rooms) for rooms in units.values())


def packs(requests: list[int], rooms: list[int]) -> bool:
    """Whether quotas of these GPUs fit nodes with these GPUs free, each quota on one node
    (exhaustive: a handful of quotas and nodes)."""
    need, free = sorted(requests, reverse=True), list(rooms)

    def go(i: int) -> bool:
        if i == len(need):
            return True
        tried: set[int] = set()
        for k, room in enumerate(free):
            if room >= need[i] and room not in tried:
                tried.add(room)
                free[k] -= need[i]
                if go(i + 1):
                    return True
                free[k] += need[i]
        return False

    return go(0)


def check_spread(cache: ClusterCache, result: CycleResult, nodes: dict[str, Node], gangs: Gangs) -> None:
    """A gang the cycle bound spans one leaf if it is kept hard to one, and more than one only
    when no leaf of one GPU model could hold all its quotas beside the others' (a hold makes a
    gang wait, never spread) — counted exactly, for gangs whose quotas differ in size too."""
    bound = {i.quota for i in result.intents if isinstance(i, BindQuota)}
    late = released_late(result)
    for gang, (count, _) in gangs.items():
        mine = [f"q-{gang}-{k}" for k in range(count)]
        if not bound & set(mine) or not all(cache.quotas[m].node_name for m in mine):
            continue  # check_cycle says why a gang bound in part is wrong
        leaves = {nodes[cache.quotas[m].node_name][1] for m in mine}
        job = cache.jobs[f"default/{gang}"]
        assert job.hard_tier != 1 or len(leaves) == 1, f"{gang}, kept to one leaf, spans {sorted(leaves)}"
        if len(leaves) == 1:
            continue
        used: defaultdict[str, int] = defaultdict(int)
        for q in [*cache.quotas.values(), *late]:
            if q.node_name and q.name not in mine:
                used[q.node_name] += q.request.get(GPU)
        units: dict[tuple[str, str], list[int]] = {}
        for name, (model, leaf, ready) in nodes.items():
            if ready and name in cache.nodes:
                units.setdefault((model, leaf), []).append(cache.nodes[name].allocatable.get(GPU) - used[name])
        requests = [cache.quotas[m].request.get(GPU) for m in mine]
        holding = [unit for unit, rooms in units.items() if packs(requests, rooms)]
        assert not holding, f"{gang} ({requests} GPUs) spans {sorted(leaves)} though {holding} holds it"


class History:
    """One random history: the cache, the scheduler (replaced on restart) and the jobs alive."""

    def __init__(self, objs: list[dict[str, Any]], nodes: dict[str, Node], topology: dict[str, Any]) -> None:
        self.now = NOW
        self.cache = ClusterCache(clock=lambda: self.now)
        b.feed(self.cache, objs)
        self.nodes = dict(nodes)  # as nodes go or flip
        self.topology = topology
        self.policy = policy_with_topology(topology)
        self.sched = Scheduler(self.policy)
        self.gangs: Gangs = {}

    def cycle(self) -> None:
        start = holds_of(self.sched)
        result = self.sched.run_once(self.cache.snapshot(self.now))
        apply_plan(self.cache, plan_writes(self.cache, result, extra_quotas=self.cache.take_dirty_quotas()))
        start_bound_pods(self.cache)
        check_cycle(self.cache, result, self.nodes, {g: w for g, (w, _) in self.gangs.items()})
        check_spread(self.cache, result, self.nodes, self.gangs)
        check_holds(self.cache, result, start, holds_of(self.sched), self.gangs, self.topology, self.now)
        self.now += 1.0

    def end_job(self, gang: str, *, succeeded: bool = False, with_podgroup: bool = False) -> None:
        """The job's pods go: finished (``succeeded``: they turned Succeeded, which the pod watch
        sees as a delete) or not (deleted or failed while running: their places are kept)."""
        key = f"default/{gang}"
        for pod in [self.cache.pod(uid) for uid in list(self.cache.jobs[key].tasks)]:
            if pod is not None:
                gone = bumped(dict(pod))
                if succeeded:
                    gone["status"] = {**(gone.get("status") or {}), "phase": "Succeeded"}
                self.cache.on_pod_delete(gone)
        podgroup = self.cache.podgroup_object(key) if with_podgroup else None
        if podgroup is not None:
            self.cache.on_podgroup_delete(podgroup)
        del self.gangs[gang]

    def running(self) -> list[str]:
        return [g for g, (w, _) in self.gangs.items() if placed(self.cache, g, w)]

    def lose(self, name: str) -> None:
        """The node goes; every job with a pod there fails as a whole (a gang cannot run in part)."""
        obj = self.cache.node_object(name)
        if obj is None:
            return
        for job in list(self.cache.jobs.values()):
            gang = job.key.split("/", 1)[1]
            if gang in self.gangs and any(t.node == name for t in job.tasks.values()):
                self.end_job(gang)
        self.cache.on_node_delete(obj)
        self.nodes[name] = (*self.nodes[name][:2], False)

    def flip(self, name: str) -> None:
        obj = self.cache.node_object(name)
        if obj is None:
            return
        ready = not self.nodes[name][2]
        set_ready(self.cache, obj, ready)
        self.nodes[name] = (*self.nodes[name][:2], ready)

    def play(self, n: int, step: Step) -> None:
        kind, x, gpu = step
        if kind in ("arrive", "urgent", "single", "hard"):
            objs = b.training_job(f"j{n}", x, gpu=gpu, hca=None if kind == "single" else 1)
            for pod in (o for o in objs if kind == "urgent" and o["kind"] == "Pod"):
                pod["spec"]["priority"] = 10
            if kind == "hard":
                objs[0]["spec"]["topology"] = HARD_LEAF
            b.feed(self.cache, objs)
            self.gangs[f"j{n}"] = (x, gpu)
        elif kind in ("mixed", "mixed-hard"):
            self.arrive_mixed(f"j{n}", x, gpu, hard=kind == "mixed-hard")
        elif kind == "trickle":  # one-pod jobs arriving one a cycle: what a waiting gang starves of
            for k in range(x):
                b.feed(self.cache, b.training_job(f"j{n}t{k}", 1, gpu=gpu, hca=None))
                self.gangs[f"j{n}t{k}"] = (1, gpu)
                self.cycle()
            return
        elif kind in ("finish", "evict", "delete"):
            running = self.running()
            pick = [g for g in self.gangs if (g in running) == (kind != "delete")]
            if pick:
                self.end_job(pick[x % len(pick)], succeeded=kind == "finish", with_podgroup=kind == "delete")
        elif kind in ("lose", "flip"):
            (self.lose if kind == "lose" else self.flip)(f"n{x}")
        elif kind == "advance":
            self.now += x
        elif kind == "restart":
            self.sched = Scheduler(self.policy)
            self.sched.take_over(recorded_holds(self.cache.recorded_holds))
        for _ in range(x if kind == "cycles" else 1):
            self.cycle()

    def arrive_mixed(self, gang: str, workers: int, gpu: int, *, hard: bool) -> None:
        """A gang of an 8-GPU launcher (rank 0) and ``workers`` workers of ``gpu`` GPUs."""
        objs = [b.podgroup(gang, min_member=workers + 1, topology=HARD_LEAF if hard else None)]
        for k in range(workers + 1):
            size = LAUNCHER if k == 0 else gpu
            quota = f"q-{gang}-{k}"
            objs += [b.quota(quota, gpu=size), b.pod(f"{gang}-worker-{k}", group=gang, quota=quota, gpu=size, index=k)]
        b.feed(self.cache, objs)
        self.gangs[gang] = (workers + 1, gpu)

    def drain(self) -> Gangs:
        """Everything running finishes, cycle after cycle; returns the gangs that fit the empty
        cluster and still wait."""
        for _ in range(DRAIN_CYCLES):
            if not self.gangs:
                break
            for gang in self.running():
                self.end_job(gang, succeeded=True)
            self.now += 50
            self.cycle()
        return {g: v for g, v in self.gangs.items() if self.fits_empty(g)}

    def fits_empty(self, gang: str) -> bool:
        """The gang's quotas fit the Ready nodes of one GPU model once empty (one leaf's, for a
        gang kept hard to one)."""
        job = self.cache.jobs[f"default/{gang}"]
        count = self.gangs[gang][0]
        requests = [self.cache.quotas[f"q-{gang}-{k}"].request.get(GPU) for k in range(count)]
        units: dict[tuple[str, str], list[int]] = {}
        for name, (model, leaf, ready) in self.nodes.items():
            if ready and name in self.cache.nodes:
                units.setdefault((model, leaf if job.hard_tier == 1 else ""), []).append(8)
        return any(packs(requests, rooms) for rooms in units.values())


def run(world: World) -> History:
    objs, nodes, steps, topology = world
    history = History(objs, nodes, topology)
    for n, step in enumerate(steps):
        history.play(n, step)
    left = history.drain()
    assert not left, f"never placed though they fit the empty cluster: {left}; holds {holds_of(history.sched)}"
    return history


def _urgent_gang_on_a_free_node_with_a_full_book() -> World:
    """Found by a soak run. One hold allowed; a mixed H100 gang (j4) holds n1–n2; an urgent 1-GPU
    gang (j5, before it in hold order) may hold and chooses the A100 node n0, which no one held.
    It took no node of j4's hold, so j4's hold was left as it was: two holds where one is allowed.
    Now j5 takes j4's place in the count: j4's hold ends (displaced), j5 holds n0."""
    nodes: dict[str, Node] = {"n0": ("A100", "s0", True), "n1": ("H100", "s0", True), "n2": ("H100", "s0", True)}
    objs = node_objects(nodes)
    steps: list[Step] = [
        ("arrive", 1, 2),
        ("arrive", 1, 2),
        ("single", 1, 4),
        ("trickle", 2, 8),
        ("mixed", 1, 1),
        ("urgent", 1, 1),
        ("single", 1, 1),
    ]
    return objs, nodes, steps, {"reserve_after_cycles": 1, "max_holds": 1, "hold_seconds": 3.0, "pack_workers": False}


@PROPERTY
@given(worlds())
@example(world=_urgent_gang_on_a_free_node_with_a_full_book())
def test_holds_keep_their_nodes_end_in_time_and_starve_no_gang(world: World) -> None:
    run(world)


def test_the_checker_catches_a_bind_to_a_held_node_a_stale_hold_and_a_hold_of_a_placed_job() -> None:
    """The hold checks can fail: the same cycle's facts, each with one fact changed."""
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, [b.node("n0"), b.topology("n0", ["s0"]), *b.training_job("big", 2, gpu=8)])
    b.feed(cache, b.training_job("small", 1, gpu=1, hca=None))
    topology = {"max_holds": 1, "hold_seconds": 20.0}
    result = Scheduler(policy_with_topology({})).run_once(cache.snapshot(NOW))
    assert [(i.quota, i.node) for i in result.intents if isinstance(i, BindQuota)] == [("q-small-0", "n0")]
    apply_plan(cache, plan_writes(cache, result, extra_quotas=cache.take_dirty_quotas()))
    gangs: Gangs = {"big": (2, 8), "small": (1, 1)}
    held: Holds = {"default/big": (("n0",), NOW - 5)}
    check_holds(cache, result, {}, held, gangs, topology, NOW)  # the hold began this cycle: fine
    breaks: dict[str, tuple[Holds, Holds, float]] = {
        "bound to n0, held for default/big": (held, held, NOW),
        "outlived its time": ({}, held, NOW + 30),
        "placed job default/small still holds": ({}, {"default/small": (("n0",), NOW)}, NOW),
        "2 holds, at most 1": ({}, {**held, "default/small": (("n0",), NOW)}, NOW),
    }
    for message, (start, end, now) in breaks.items():
        with pytest.raises(AssertionError, match=re.escape(message)):
            check_holds(cache, result, start, end, gangs, topology, now)


def test_a_gang_running_on_a_quota_another_job_left_bound_counts_as_placed() -> None:
    """Found by the soak profile: after j0 (2 × 8 GPU) finishes, j3's pod (1 × 8 GPU) claims
    j0's quota still bound on n0 — hop ① gives a pending pod an idle bound quota first — and
    runs there with its own quota unbound. It is placed, not starving; the drain must see that."""
    nodes: dict[str, Node] = {f"n{i}": ("A100", "s0", True) for i in range(4)}
    objs = node_objects(nodes)
    steps: list[Step] = [
        ("arrive", 2, 8),
        ("flip", 2, 0),
        ("single", 1, 1),
        ("arrive", 1, 8),
        ("single", 1, 1),
        ("cycles", 10, 0),
        ("trickle", 6, 1),
        ("trickle", 6, 1),
        ("trickle", 6, 1),
    ]
    topology = {"reserve_after_cycles": 1, "max_holds": 1, "hold_seconds": 3.0, "pack_workers": True}
    run((objs, nodes, steps, topology))  # drains, and asserts no gang that fits still waits
