"""Topology placement of RDMA gangs as a hypothesis property, through ``run_once`` (seed 三 3.4, 2.6).

Random clusters — 1–4 leaves of 2–6 nodes, 1–2 GPU models (possibly mixed on one leaf), some
nodes NotReady or tainted, some already holding quotas — and random gangs of RDMA jobs (every
worker asks for ``rdma/hca``, so topology scheduling is on; some also set
``enable-topology-scheduling: "true"`` for strict rank order, some name a
``topology-affinity-key`` shared with other gangs). After one cycle, on the session's
final state:

* invariant 1 on every node, invariant 3 on every quota, every ledger recomputes exactly;
* every committed gang (all its quotas bound) sits on nodes of ONE GPU model, one quota per
  node, only on Ready untainted nodes, with node index strictly ascending with task index when
  the job asks for strict order;
* it uses the fewest zones possible at the time it was placed (in particular exactly one when a
  single zone could hold it) — the time being reconstructed from the order of the intents;
* a gang that was not committed could not have fit (checked against the final state: the
  cluster only fills up during a cycle), and its verdict says it is stuck.

Under the continuity algorithm (packed or not), whose zones are not the fewest, the validity
checks and liveness.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from extender import wellknown
from extender.cache.cache import ClusterCache
from extender.conf import default_policy
from extender.framework.policy import Policy
from extender.scheduler import CycleResult, Scheduler
from tests import builders as b
from tests.core.props import PROPERTY
from tests.core.scenarios import policy_with_topology
from tests.core.topo_cluster import NOW, NodeSpec, check_ledgers, node_objects, used_before_each_gang

POLICY = default_policy()
GPU = wellknown.RESOURCE_GPU
MODEL_LABEL = "nvidia.com/gpu.product"
STRICT = {wellknown.ANNO_ENABLE_TOPOLOGY: "true"}


@dataclass
class Gang:
    name: str
    workers: int
    gpu: int
    strict: bool
    key: str = ""  # topology-affinity-key ("": none)
    quotas: list[str] = field(default_factory=list)


@dataclass
class Cluster:
    nodes: list[NodeSpec]
    gangs: list[Gang]
    # busy node → the gang quotas its busy quota repels by name (quota anti-affinity)
    repel: dict[str, list[str]] = field(default_factory=dict)

    def objects(self) -> list[dict[str, Any]]:
        objs = node_objects(self.nodes, self.repel)
        for g in self.gangs:
            topology = {"affinityKey": g.key} if g.key else None
            objs.append(b.podgroup(g.name, min_member=g.workers, topology=topology))
            for i in range(g.workers):
                q = f"q-{g.name}-{i}"
                g.quotas.append(q)
                objs.append(b.quota(q, gpu=g.gpu, hca=1))
                objs.append(
                    b.pod(
                        f"{g.name}-{i}",
                        group=g.name,
                        quota=q,
                        gpu=g.gpu,
                        hca=1,
                        index=i,
                        annotations=STRICT if g.strict else None,
                    )
                )
        return objs


@st.composite
def clusters(draw: st.DrawFn, max_gangs: int = 3) -> Cluster:
    models = draw(st.sampled_from([["A100"], ["A100", "H100"]]))
    mixed_leaves = draw(st.booleans())
    nodes: list[NodeSpec] = []
    k = 0
    for leaf in range(1, draw(st.integers(1, 4)) + 1):
        leaf_model = draw(st.sampled_from(models))
        for _ in range(draw(st.integers(2, 6))):
            nodes.append(
                NodeSpec(
                    name=f"n{k}",
                    index=k,
                    leaf=leaf,
                    model=draw(st.sampled_from(models)) if mixed_leaves else leaf_model,
                    ready=draw(st.integers(0, 9)) > 0,
                    tainted=draw(st.integers(0, 9)) == 0,
                    busy=draw(st.sampled_from([0, 0, 0, 4, 8])),
                )
            )
            k += 1
    gangs = [
        Gang(
            f"g{j}",
            draw(st.integers(1, 6)),
            draw(st.sampled_from([1, 2, 4, 8])),
            draw(st.booleans()),
            draw(st.sampled_from(["", "", "k1", "k2"])),  # zones of a key attract its gangs first
        )
        for j in range(draw(st.integers(1, max_gangs)))
    ]
    return Cluster(nodes, gangs)


def room(c: Cluster, used_gpu: dict[str, int], gpu: int) -> dict[str, int]:
    """How many quotas of ``gpu`` GPUs + 1 HCA each usable node could still take."""
    return {n.name: (8 - used_gpu[n.name]) // gpu for n in c.nodes if n.ready and not n.tainted}


def fewest_zones(c: Cluster, slots: dict[str, int], need: int) -> int | None:
    """The exhaustive oracle: the fewest (model, leaf) zones of ONE model whose nodes together hold
    ``need`` quotas, found by trying every set of zones; None if no set does."""
    zones: dict[tuple[str, int], int] = {}
    for n in c.nodes:
        zones[(n.model, n.leaf)] = zones.get((n.model, n.leaf), 0) + slots.get(n.name, 0)
    best: int | None = None
    for model in {m for m, _ in zones}:
        mine = [cap for (m, _), cap in zones.items() if m == model]
        for k in range(1, len(mine) + 1):
            if any(sum(combo) >= need for combo in itertools.combinations(mine, k)):
                best = k if best is None else min(best, k)
                break
    return best


def run(c: Cluster, *, liveness: bool = True, policy: Policy = POLICY, zone_rules: bool = True) -> CycleResult:
    """One cycle and the checks of the module docstring (``zone_rules``: also fewest zones and
    distinct nodes, the default policy's rules; without: validity only)."""
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, c.objects())
    assert not cache.conversion_errors
    result = Scheduler(policy).run_once(cache.snapshot(NOW))
    ssn = result.session
    spec = {n.name: n for n in c.nodes}

    check_ledgers(ssn)

    # replay the cycle's bindings in commit order to know each gang's situation when it was placed
    gang_of = {q: g.name for g in c.gangs for q in g.quotas}
    need_of = {q: {"gpu": g.gpu} for g in c.gangs for q in g.quotas}
    replayed, end = used_before_each_gang(result, {n.name: {"gpu": n.busy} for n in c.nodes}, need_of, gang_of)
    before = {g: {n: v["gpu"] for n, v in used.items()} for g, used in replayed.items()}
    used = {n: v["gpu"] for n, v in end.items()}

    for g in c.gangs:
        placed = [(i, ssn.quota(q).node_name) for i, q in enumerate(g.quotas)]  # type: ignore[union-attr]
        nodes = [n for _, n in placed if n]
        if len(nodes) == g.workers:  # committed
            assert g.name in before
            chosen = [spec[n] for n in nodes]
            assert len({n.model for n in chosen}) == 1, f"{g.name} mixes GPU models: {nodes}"
            assert all(n.ready and not n.tainted for n in chosen), f"{g.name} on an unusable node: {nodes}"
            indices = [spec[n].index for _, n in placed]
            assert indices == sorted(indices), f"{g.name} breaks rank order: {indices}"
            if not zone_rules:
                continue
            slots = room(c, before[g.name], g.gpu)
            minimal = fewest_zones(c, slots, g.workers)
            zones_used = {(n.model, n.leaf) for n in chosen}
            assert minimal is not None
            assert len(zones_used) == minimal, f"{g.name} uses {len(zones_used)} zones, {minimal} would do: {nodes}"
            # distinct nodes while the chosen zones have enough of them
            open_nodes = [n for n in c.nodes if (n.model, n.leaf) in zones_used and slots.get(n.name, 0) > 0]
            if len(open_nodes) >= g.workers and minimal == 1:
                assert len(set(nodes)) == g.workers, f"{g.name} shares a node while others are free: {nodes}"
        else:
            assert not nodes, f"{g.name} is half bound: {placed}"  # gang: all or nothing
            assert g.name not in before
            if liveness:
                assert fewest_zones(c, room(c, used, g.gpu), g.workers) is None, f"{g.name} fits but was not placed"
            verdict = result.verdicts.get(f"default/{g.name}")
            assert verdict is not None and not verdict.status.ok
    return result


@PROPERTY
@given(clusters())
def test_rdma_gangs_are_placed_in_one_model_fewest_zones_rank_order(c: Cluster) -> None:
    run(c, liveness=False)


def _counterexample() -> Cluster:
    """Found by the property below: g0 and g1 take n1 and n4; g2 (2×4 GPU) then fits only on n5
    (leaf 1) and n7 (leaf 2)."""

    def ok(i: int, leaf: int) -> NodeSpec:
        return NodeSpec(f"n{i}", i, leaf, "A100", True, False, 0)

    def bad(i: int, leaf: int) -> NodeSpec:
        return NodeSpec(f"n{i}", i, leaf, "A100", False, True, 0)

    return Cluster(
        [bad(0, 1), ok(1, 1), bad(2, 1), bad(3, 1), ok(4, 1), ok(5, 1), bad(6, 2), ok(7, 2)],
        [Gang("g0", 2, 1, False), Gang("g1", 2, 4, False), Gang("g2", 2, 4, False)],
    )


@PROPERTY
@given(clusters())
@example(c=_counterexample())  # a counterexample once found: always tried
def test_a_gang_that_fits_is_placed_even_after_other_gangs_of_its_shape(c: Cluster) -> None:
    """Liveness: a gang left unplaced must not fit the final (fullest) state of the cycle."""
    run(c, liveness=True)


CONTINUITY = policy_with_topology({"continuity_weight": 200.0})
CONTINUITY_PACKED = policy_with_topology({"continuity_weight": 200.0, "pack_workers": True})


@PROPERTY
@given(clusters(), st.booleans())
def test_under_continuity_every_placement_stays_valid_and_a_gang_that_fits_runs(c: Cluster, pack: bool) -> None:
    """The continuity algorithm (runs of consecutive node indices), packed or not: one GPU model,
    usable nodes, rank order, whole gangs, exact ledgers (its zones are not the fewest); and a
    gang that fits is placed, in a run if one holds it, else by the zone rules."""
    run(c, liveness=True, policy=CONTINUITY_PACKED if pack else CONTINUITY, zone_rules=False)


@PROPERTY
@given(clusters(max_gangs=1))
def test_a_single_rdma_gang_uses_one_zone_whenever_one_zone_can_hold_it(c: Cluster) -> None:
    result = run(c)
    (g,) = c.gangs
    fits_now = fewest_zones(c, room(c, {n.name: n.busy for n in c.nodes}, g.gpu), g.workers)
    nodes = [result.session.quota(q).node_name for q in g.quotas]  # type: ignore[union-attr]
    spec = {n.name: n for n in c.nodes}
    if fits_now is None:
        assert not any(nodes)
    else:
        assert all(nodes), f"{g.name} fits in {fits_now} zone(s) but was not placed"
        zones = {(spec[n].model, spec[n].leaf) for n in nodes}
        assert len(zones) == fits_now
        if fits_now == 1:
            (zone,) = zones
            assert all((spec[n].model, spec[n].leaf) == zone for n in nodes)


def test_gangs_fill_the_fullest_zone_that_holds_them_and_share_nodes_only_when_needed() -> None:
    """The counterexample as a plain regression. g0 (2×1 GPU) fits leaf 2 (one node, 8 free GPUs)
    and leaf 1 (three nodes): best fit takes leaf 2, both ranks on n7. g1 and g2 (2×4 each) then
    fill leaf 1: g1 on n1, n4 (distinct nodes, lowest index), g2 on the same two nodes, which
    binpack prefers to the empty n5 (so n5 stays whole)."""
    c = _counterexample()
    result = run(c, liveness=True)
    where = {q: result.session.quota(q).node_name for g in c.gangs for q in g.quotas}  # type: ignore[union-attr]
    assert where == {
        "q-g0-0": "n7",
        "q-g0-1": "n7",
        "q-g1-0": "n1",
        "q-g1-1": "n4",
        "q-g2-0": "n1",
        "q-g2-1": "n4",
    }
