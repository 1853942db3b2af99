"""A hold delays others, never scatters them (issue 16 item 4; ``verdicts.PlanVerdicts.kept_off``),
over random small clusters, for gangs of one size and gangs whose quotas differ in size, with and
without a hard leaf limit.

A random cluster (1–3 leaves of 1–4 8-GPU nodes, one or two GPU models, whose nodes run one-pod
jobs of random size; or leaf s0 with exactly the gang's room, node by node, and s1 and s2 a part
each); one or two gangs that could never run (more whole-node workers than there are
nodes) hold random sets of nodes, which may overlap (as after the binder's failed writes). A gang
arrives — ``n`` workers of ``g`` GPUs, or an 8- or 4-GPU launcher beside them — and one cycle runs.
With ``F`` the fewest leaves of one GPU model whose free room holds it, holds aside, and ``A`` the
fewest whose free room *not held* holds it (both exact):

- placed, it spans exactly ``F`` leaves (never more: a hold makes it wait instead);
- when ``A == F`` (and ``F`` is 1 under a hard leaf limit) it is placed: what fits is not refused;
- when ``A > F`` it waits, told ``NodeHeldForGang`` naming gangs that hold nodes — never any other,
  and, when one leaf alone holds it, every gang holding a node of that leaf.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

from extender.cache.cache import ClusterCache
from extender.framework.status import Reason
from extender.plugins.topology.holds import Hold
from extender.scheduler import Scheduler
from tests import builders as b
from tests.core.props import PROPERTY
from tests.core.scenarios import policy_with_topology, quota_node
from tests.core.test_holds_property import packs
from tests.core.topo_cluster import NOW

HARD_LEAF = {"highestTierAllowed": "leaf", "mode": "hard"}


@st.composite
def worlds(draw: st.DrawFn) -> tuple[dict[str, Any], list[int], bool, bool]:
    size = draw(st.sampled_from([1, 2, 4, 8]))
    launcher = draw(st.sampled_from([0, 0, 4, 8]))
    requests = ([launcher] if launcher else []) + [size] * draw(st.integers(1, 5))
    models = ["A100", "H100"][: draw(st.integers(1, 2))]
    nodes: dict[str, tuple[str, str, int]] = {}
    aimed = draw(st.booleans())  # s0 has the gang's room, s1 and s2 a part each: holds in s0 matter
    split = draw(st.integers(1, len(requests)))
    parts = [requests, requests[:split], requests[split:]] if aimed else []
    for leaf in range(3 if aimed else draw(st.sampled_from([1, 2, 3, 3]))):
        model = "A100" if aimed else draw(st.sampled_from(models))
        busy = [8 - r for r in parts[leaf]] if aimed else []
        for k in range(len(busy) if aimed else draw(st.integers(1, 4))):
            nodes[f"n{len(nodes)}"] = (f"s{leaf}", model, busy[k] if aimed else draw(st.sampled_from([0, 0, 4, 8])))
    names = sorted(nodes, key=lambda n: int(n[1:]))
    by_leaf: dict[str, list[str]] = {}
    for n in names:
        by_leaf.setdefault(nodes[n][0], []).append(n)
    # each hold within one leaf, as a gang's hold mostly is: what keeps a gang out of the leaf it fits
    one_leaf = st.sampled_from(sorted(by_leaf)).flatmap(lambda x: st.sets(st.sampled_from(by_leaf[x]), min_size=1))
    holds = draw(st.lists(st.one_of(one_leaf, st.sets(st.sampled_from(names), min_size=1)), min_size=1, max_size=2))
    world = {"nodes": nodes, "holds": [tuple(sorted(h, key=lambda n: int(n[1:]))) for h in holds]}
    return world, requests, draw(st.booleans()), draw(st.booleans())


def fewest_leaves(nodes: dict[str, tuple[str, str, int]], requests: list[int], *, avoid: set[str]) -> int | None:
    """The fewest leaves of one model whose nodes' free GPUs (those not in ``avoid``) hold them."""
    leaves: dict[str, dict[str, list[int]]] = {}
    for name, (leaf, model, busy) in nodes.items():
        room = leaves.setdefault(model, {}).setdefault(leaf, [])
        if name not in avoid:
            room.append(8 - busy)
    best: int | None = None
    for by_leaf in leaves.values():
        for k in range(1, len(by_leaf) + 1):
            if best is not None and k >= best:
                break
            if any(
                packs(requests, [r for leaf in pick for r in by_leaf[leaf]])
                for pick in itertools.combinations(by_leaf, k)
            ):
                best = k
    return best


def build(world: dict[str, Any], requests: list[int], hard: bool) -> ClusterCache:
    cache = ClusterCache(clock=lambda: NOW)
    objs: list[dict[str, Any]] = [b.queue("research")]
    for name, (leaf, model, busy) in world["nodes"].items():
        i = int(name[1:])
        objs += [b.node(name, index=i, gpu_model=model), b.topology(name, [leaf])]
        if busy:
            bound = {"phase": "QuotaBound", "nodeName": name}
            objs.append(b.quota(f"q-fill-{i}", gpu=busy, hca=None, status=bound))
            objs.append(b.pod(f"fill-{i}", quota=f"q-fill-{i}", gpu=busy, hca=None, node=name, phase="Running"))
    for k in range(len(world["holds"])):  # gangs that never fit: more whole nodes than exist
        objs += b.training_job(f"h{k}", len(world["nodes"]) + 1, gpu=8, hca=1)
    objs.append(b.podgroup("g", min_member=len(requests), topology=HARD_LEAF if hard else None))
    for k, gpu in enumerate(requests):
        objs += [b.quota(f"q-g-{k}", gpu=gpu), b.pod(f"g-worker-{k}", group="g", quota=f"q-g-{k}", gpu=gpu, index=k)]
    b.feed(cache, objs)
    return cache


@PROPERTY
@given(worlds())
def test_a_hold_makes_a_gang_wait_never_span_more_leaves(drawn: tuple[dict[str, Any], list[int], bool, bool]) -> None:
    world, requests, hard, pack = drawn
    nodes: dict[str, tuple[str, str, int]] = world["nodes"]
    cache = build(world, requests, hard)
    sched = Scheduler(policy_with_topology({"reserve_after_cycles": 100, "max_holds": 3, "pack_workers": pack}))
    sched.memory.holds.update({f"default/h{k}": Hold(h, NOW) for k, h in enumerate(world["holds"])})
    result = sched.run_once(cache.snapshot(NOW))
    held = {n for h in world["holds"] for n in h}
    free = fewest_leaves(nodes, requests, avoid=set())
    unheld = fewest_leaves(nodes, requests, avoid=held)
    where = [quota_node(result.session, f"q-g-{k}") for k in range(len(requests))]
    leaves = {nodes[n][0] for n in where if n}
    event(f"{'hard, ' if hard else ''}{'mixed, ' if len(set(requests)) > 1 else ''}{free=}, {unheld=}")
    status = result.verdicts["default/g"].status if "default/g" in result.verdicts else None
    told = status.message() if status is not None else ""
    if all(where):
        assert len(leaves) == free, f"g ({requests}) spans {sorted(leaves)}; {free} leaves hold it: {where}"
        assert not hard or free == 1, f"g, kept to one leaf, spans {sorted(leaves)}"
        return
    assert not any(where), f"g bound in part: {where}"
    if free is None or (hard and free > 1):
        return
    assert unheld != free, f"g ({requests}) waits though {free} leaves not held hold it: {told}"
    assert status is not None and status.reason is Reason.NODE_HELD_FOR_GANG, told
    named = set(re.findall(r"default/h\d", told.split("held for ", 1)[1]))
    assert named and named <= {f"default/h{k}" for k in range(len(world["holds"]))}, told
    homes = {nodes[n][:2] for n in nodes if fewest_leaves(only(nodes, nodes[n][:2]), requests, avoid=set()) == 1}
    if len(homes) == 1:  # the one leaf that holds it: it is told every gang holding a node there
        home = next(iter(homes))
        holders = {f"default/h{k}" for k, h in enumerate(world["holds"]) if any(nodes[n][:2] == home for n in h)}
        assert named == holders, told


def only(nodes: dict[str, tuple[str, str, int]], unit: tuple[str, str]) -> dict[str, tuple[str, str, int]]:
    """The nodes of one leaf (and GPU model)."""
    return {n: v for n, v in nodes.items() if v[:2] == unit}
