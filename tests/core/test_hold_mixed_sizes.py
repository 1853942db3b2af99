"""Where a gang whose quotas differ in size holds when nodes differ in size (issue 16 item 4, "a
hold on the zone(s) that would fit it soonest"; ``holds.choose_hold``): a node too small for the
gang's largest quota may still take its smaller ones (a launcher, a 4-GPU worker), so the hold
covers it when the gang needs it. Before, only nodes with room for the largest quota counted: a
gang that needs a small node was never held, and small jobs kept taking that node.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from hypothesis import assume, given
from hypothesis import strategies as st

from extender.cache.cache import ClusterCache
from extender.framework.intents import BindQuota
from extender.scheduler import Scheduler
from tests import builders as b
from tests.core.props import PROPERTY
from tests.core.scenarios import policy_with_topology
from tests.core.test_holds_property import HARD_LEAF, packs
from tests.core.topo_cluster import NOW


@dataclass(frozen=True)
class Box:
    """A node: its leaf, its GPUs, how many of them a one-pod job of another queue runs on, Ready."""

    leaf: int
    gpu: int
    busy: int
    ready: bool = True


def _objects(boxes: list[Box], gang: list[int], *, hard: bool) -> list[dict[str, Any]]:
    """Nodes ``n<i>`` as ``boxes`` say, and ``mix``: one quota (and pod) per entry of ``gang``
    (its GPUs, in rank order), every one needed (minMember), kept to one leaf if ``hard``."""
    objs: list[dict[str, Any]] = [b.queue("research")]
    for i, box in enumerate(boxes):
        n = f"n{i}"
        objs += [b.node(n, gpu=box.gpu, index=i, ready=box.ready), b.topology(n, [f"s{box.leaf}"])]
        if box.busy:
            bound = {"phase": "QuotaBound", "nodeName": n}
            objs.append(b.quota(f"q-fill-{n}", gpu=box.busy, hca=None, status=bound))
            objs.append(b.pod(f"fill-{n}", quota=f"q-fill-{n}", gpu=box.busy, hca=None, node=n, phase="Running"))
    objs.append(b.podgroup("mix", min_member=len(gang), topology=HARD_LEAF if hard else None))
    for i, gpu in enumerate(gang):
        q = f"q-mix-{i}"
        objs += [b.quota(q, gpu=gpu), b.pod(f"mix-worker-{i}", group="mix", quota=q, gpu=gpu, index=i)]
    return objs


def _cycle(boxes: list[Box], gang: list[int], *, hard: bool = False) -> tuple[bool, Scheduler]:
    """One cycle, ``mix`` having waited as long as a gang waits for a hold: whether it bound any of
    its quotas, and the scheduler."""
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, _objects(boxes, gang, hard=hard))
    sched = Scheduler(policy_with_topology({"reserve_after_cycles": 1, "max_holds": 1}))
    sched.memory.gang_waits["default/mix"] = 1
    result = sched.run_once(cache.snapshot(NOW))
    bound = any(isinstance(i, BindQuota) and i.quota.startswith("q-mix-") for i in result.intents)
    return bound, sched


def test_a_mixed_gang_holds_the_small_node_its_launcher_needs() -> None:
    """Leaf s0: n0 and n1 of 8 GPUs, n2 of 4. ``mix`` is two 8-GPU workers and a 2-GPU launcher:
    it fits only on all three (n2 takes the launcher), and waits — n1 runs an 8-GPU job, n2 a
    3-GPU one. It holds n0–n2: before, it held nothing (n2 has no room for an 8-GPU quota, and
    n0, n1 alone never hold the launcher too), and one-pod jobs kept taking n2."""
    boxes = [Box(0, 8, 0), Box(0, 8, 8), Box(0, 4, 3)]
    bound, sched = _cycle(boxes, [2, 8, 8])
    assert not bound
    hold = sched.memory.holds.get("default/mix")
    assert hold is not None and hold.nodes == ("n0", "n1", "n2"), sched.memory.holds


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[Box], list[int], bool]:
    """1–2 leaves of 2–3 nodes of 2, 4 or 8 GPUs, some running a one-pod job or NotReady, and a
    gang of a launcher and 1–3 workers of other sizes (kept to one leaf, or not)."""
    boxes = []
    for leaf in range(draw(st.integers(1, 2))):
        for _ in range(draw(st.integers(2, 3))):
            gpu = draw(st.sampled_from([2, 4, 8]))
            boxes.append(Box(leaf, gpu, draw(st.integers(0, gpu)), draw(st.booleans() | st.just(True))))
    launcher = draw(st.sampled_from([1, 2, 4, 8]))
    workers = draw(st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=3))
    return boxes, [launcher, *workers], draw(st.booleans())


@PROPERTY
@given(clusters())
def test_a_waiting_gang_that_fits_once_nodes_empty_holds_nodes_that_hold_it(
    world: tuple[list[Box], list[int], bool],
) -> None:
    """Whenever the gang waits while the Ready nodes of one leaf (or, not kept to one leaf, of the
    cluster) would hold every one of its quotas once empty (exhaustive packing), it holds nodes
    that would — within one leaf when a leaf would."""
    boxes, gang, hard = world
    bound, sched = _cycle(boxes, gang, hard=hard)
    if bound:
        return
    leaves = {box.leaf for box in boxes}
    by_leaf = {leaf: [box.gpu for box in boxes if box.leaf == leaf and box.ready] for leaf in leaves}
    one_leaf = any(packs(gang, rooms) for rooms in by_leaf.values())
    if not one_leaf and (hard or not packs(gang, [box.gpu for box in boxes if box.ready])):
        return
    hold = sched.memory.holds.get("default/mix")
    assert hold is not None, f"{gang} fits {boxes} once empty, yet holds nothing"
    held = [boxes[int(n[1:])] for n in hold.nodes]
    assert packs(gang, [box.gpu for box in held]), f"{gang} held {hold.nodes}, which never hold it"
    assert not one_leaf or len({box.leaf for box in held}) == 1, f"{gang} held {hold.nodes} across leaves"


def test_a_mixed_gang_holds_one_node_when_one_node_would_hold_it() -> None:
    """Leaf s0: n0 of 4 GPUs, n1 of 8, both fully busy. ``mix`` (a 2-GPU launcher and a 4-GPU
    worker) fits n1 alone once empty: it holds n1, not n0 too. Before, the hold took the nodes in
    index order while none had room now — n0 for the worker, then n1 for the launcher — and kept
    others off a node the gang never needed (with the node order swapped it held one)."""
    bound, sched = _cycle([Box(0, 4, 4), Box(0, 8, 8)], [2, 4])
    assert not bound
    hold = sched.memory.holds.get("default/mix")
    assert hold is not None and hold.nodes == ("n1",), sched.memory.holds


def _fit_now(gpus: list[int], free: int) -> int:
    """How many of these quotas (GPUs each, smallest first) fit ``free`` GPUs together."""
    return sum(1 for total in itertools.accumulate(sorted(gpus)) if total <= free)


def _most_now(gang: list[int], boxes: list[Box]) -> int:
    """The most of ``gang``'s quotas (GPUs each) a packing of all of them on ``boxes`` once empty
    places on GPUs free now; -1 when no packing holds them all (exhaustive: each quota on each node)."""
    best = -1
    for where in itertools.product(range(len(boxes)), repeat=len(gang)):
        on = [sorted(g for g, k in zip(gang, where, strict=True) if k == i) for i in range(len(boxes))]
        if all(sum(gs) <= box.gpu for gs, box in zip(on, boxes, strict=True)):
            now = sum(_fit_now(gs, box.gpu - box.busy) for gs, box in zip(on, boxes, strict=True))
            best = max(best, now)
    return best


def _fewest_nodes(boxes: list[Box], gang: list[int]) -> tuple[str, ...] | None:
    """The oracle of rule "what it holds" within one leaf, for a gang of several sizes: among the
    sets of Ready nodes that hold every quota once empty, the fewest nodes, then the most quotas
    a packing there places on GPUs free now, then the lowest indices (None: no set does)."""
    ready = [i for i, box in enumerate(boxes) if box.ready]
    for k in range(1, len(ready) + 1):
        sets = [s for s in itertools.combinations(ready, k) if packs(gang, [boxes[i].gpu for i in s])]
        if sets:
            best = min(sets, key=lambda s: (-_most_now(gang, [boxes[i] for i in s]), s))
            return tuple(f"n{i}" for i in best)
    return None


@st.composite
def leaves(draw: st.DrawFn) -> tuple[list[Box], list[int]]:
    """One leaf of 2–5 nodes of 2, 4 or 8 GPUs, some running a one-pod job or NotReady, and a gang
    of a launcher and 1–3 workers, of at least two sizes."""
    boxes = []
    for _ in range(draw(st.integers(2, 5))):
        gpu = draw(st.sampled_from([2, 4, 8]))
        boxes.append(Box(0, gpu, draw(st.integers(0, gpu)), draw(st.booleans() | st.just(True))))
    launcher = draw(st.sampled_from([1, 2, 4, 8]))
    workers = draw(st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=3))
    assume(any(w != launcher for w in workers))
    return boxes, [launcher, *workers]


@PROPERTY
@given(leaves())
def test_a_waiting_mixed_gang_holds_the_fewest_nodes_that_hold_it(world: tuple[list[Box], list[int]]) -> None:
    """Whenever the gang waits and its leaf could hold it once empty, it holds what the exhaustive
    oracle holds (:func:`_fewest_nodes`): never a node more than it needs."""
    boxes, gang = world
    bound, sched = _cycle(boxes, gang)
    want = _fewest_nodes(boxes, gang)
    if bound or want is None:
        return
    hold = sched.memory.holds.get("default/mix")
    assert hold is not None and hold.nodes == want, f"{gang} on {boxes}: held {hold}, want {want}"
