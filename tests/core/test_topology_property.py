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
* among those, the best by rule 1 (``docs/placement.md``), whatever the GPU model: one zone — the
  one with the least room that holds it (after its affinity key's zones; ties: fewer nodes, lower
  index); several — the set that breaks the least room of untouched zones, then takes the least
  room, the fewest nodes; in each zone, distinct nodes while the zone has enough of them, else
  the fewest nodes that hold its share, best fit (the least room taken);
* a gang with ``minMember`` below its size that does not fit whole places as many of its quotas
  as fit (rank order first), never fewer than ``minMember``; a gang some of whose quotas were
  bound in an earlier cycle keeps their GPU model and, when it asks for strict order, the order
  around them;
* a gang that was not committed could not have fit (checked against the final state: the
  cluster only fills up during a cycle; for its ``minMember``, in rank order around its bound
  quotas when it asks for strict order), and its verdict says it is stuck.

Under the continuity algorithm (packed or not), whose zones are not the fewest, the validity
checks and liveness.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Collection
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
from tests.core.topo_cluster import (
    NOW,
    NodeSpec,
    check_ledgers,
    exists_in_rank_order,
    fewest_nodes,
    node_objects,
    used_before_each_gang,
)

POLICY = default_policy()
GPU = wellknown.RESOURCE_GPU
MODEL_LABEL = "nvidia.com/gpu.product"
STRICT = {wellknown.ANNO_ENABLE_TOPOLOGY: "true"}


Zone = tuple[str, int]  # (GPU model, leaf)


@dataclass
class Gang:
    name: str
    workers: int
    gpu: int
    strict: bool
    key: str = ""  # topology-affinity-key ("": none)
    min_member: int = 0  # 0: every worker
    bound: dict[int, str] = field(default_factory=dict)  # task index → its quota's node, bound in an earlier cycle
    quotas: list[str] = field(default_factory=list)

    @property
    def least(self) -> int:
        """How many of its quotas must be bound for the gang to run (its PodGroup's minMember)."""
        return self.min_member or self.workers


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
            objs.append(b.podgroup(g.name, min_member=g.least, topology=topology))
            g.quotas = []
            for i in range(g.workers):
                q = f"q-{g.name}-{i}"
                g.quotas.append(q)
                status = {"phase": "QuotaBound", "nodeName": g.bound[i]} if i in g.bound else None
                objs.append(b.quota(q, gpu=g.gpu, hca=1, status=status))
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

    def start(self) -> dict[str, int]:
        """GPUs each node's quotas hold before the cycle: its busy quota's, the gangs' bound ones'."""
        used = {n.name: n.busy for n in self.nodes}
        for g in self.gangs:
            for node in g.bound.values():
                used[node] += g.gpu
        return used


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
    used = {n.name: n.busy for n in nodes}
    gangs = []
    for j in range(draw(st.integers(1, max_gangs))):
        g = Gang(
            f"g{j}",
            draw(st.integers(1, 6)),
            draw(st.sampled_from([1, 2, 4, 8])),
            draw(st.booleans()),
            draw(st.sampled_from(["", "", "k1", "k2"])),  # zones of a key attract its gangs first
        )
        if g.workers > 1 and draw(st.integers(0, 3)) == 0:  # an elastic gang: minMember below its size
            g.min_member = draw(st.integers(1, g.workers - 1))
        if g.workers > 1 and draw(st.integers(0, 3)) == 0:
            draw_bound(draw, g, nodes, used)
        gangs.append(g)
    return Cluster(nodes, gangs)


def draw_bound(draw: st.DrawFn, g: Gang, nodes: list[NodeSpec], used: dict[str, int]) -> None:
    """Some quotas of ``g`` bound in an earlier cycle (their pods still pending), on usable nodes of
    one GPU model with room; a strict gang's in rank order."""
    tasks = sorted(draw(st.sets(st.integers(0, g.workers - 1), min_size=1, max_size=g.workers - 1)))
    model = ""
    for i in tasks:
        fits = [n for n in nodes if n.usable and used[n.name] + g.gpu <= 8 and model in ("", n.model)]
        if not fits:
            break
        node = draw(st.sampled_from(fits))
        model = node.model
        g.bound[i] = node.name
        used[node.name] += g.gpu
    if g.strict:
        index = {n.name: n.index for n in nodes}
        g.bound = dict(zip(sorted(g.bound), sorted(g.bound.values(), key=lambda n: index[n]), strict=True))


def room(c: Cluster, used_gpu: dict[str, int], gpu: int) -> dict[str, int]:
    """How many quotas of ``gpu`` GPUs + 1 HCA each usable node could still take."""
    return {n.name: (8 - used_gpu[n.name]) // gpu for n in c.nodes if n.ready and not n.tainted}


def zone_room(c: Cluster, slots: dict[str, int]) -> dict[Zone, int]:
    """Each zone's room for the gang: the sum of its nodes' slots."""
    zones: dict[Zone, int] = {}
    for n in c.nodes:
        zones[n.zone] = zones.get(n.zone, 0) + slots.get(n.name, 0)
    return zones


def fewest_zones(c: Cluster, slots: dict[str, int], need: int, *, among: Collection[Zone] | None = None) -> int | None:
    """The exhaustive oracle: the fewest (model, leaf) zones of ONE model (``among`` them, if
    given) whose nodes together hold ``need`` quotas, found by trying every set of zones; None
    if no set does."""
    zones = {z: cap for z, cap in zone_room(c, slots).items() if among is None or z in among}
    best: int | None = None
    for model in {m for m, _ in zones}:
        mine = [cap for (m, _), cap in zones.items() if m == model]
        for k in range(1, len(mine) + 1):
            if any(sum(combo) >= need for combo in itertools.combinations(mine, k)):
                best = k if best is None else min(best, k)
                break
    return best


def zone_cost(
    c: Cluster, zones: Collection[Zone], slots: dict[str, int], used: dict[str, int], affinity: Counter[Zone]
) -> tuple[int, ...]:
    """Rule 1's cost of a set of zones (the least is best): one zone — more affinity, less room,
    fewer nodes, lower first index; several — more affinity, less room of untouched zones
    broken, less room taken, fewer nodes."""
    room_of = zone_room(c, slots)
    members = [n for n in c.nodes if n.zone in zones]
    aff = -sum(affinity[z] for z in zones)
    taken = sum(room_of[z] for z in zones)
    if len(zones) == 1:
        return (aff, taken, len(members), min(n.index for n in members))
    untouched = [z for z in zones if all(used[n.name] == 0 for n in c.nodes if n.zone == z)]
    return (aff, sum(room_of[z] for z in untouched), taken, len(members))


def best_cost(
    c: Cluster, slots: dict[str, int], need: int, count: int, used: dict[str, int], affinity: Counter[Zone]
) -> tuple[int, ...]:
    """The least :func:`zone_cost` of the sets of ``count`` zones of one model that hold ``need``."""
    room_of = zone_room(c, slots)
    costs = []
    for model in {m for m, _ in room_of}:
        for combo in itertools.combinations([z for z in room_of if z[0] == model], count):
            if sum(room_of[z] for z in combo) >= need:
                costs.append(zone_cost(c, combo, slots, used, affinity))
    return min(costs)


def fits_in_order(
    c: Cluster,
    g: Gang,
    used: dict[str, int],
    count: int,
    *,
    among: Collection[Zone] | None = None,
    away: int | None = None,
) -> bool:
    """Whether the first ``count`` unbound quotas of ``g`` fit its model's usable nodes (in the
    zones ``among``, if given; at most ``away`` of them outside its bound quotas' zones, if given)
    with node indices that never descend as task indices ascend, around its bound quotas
    (exhaustive)."""
    spec = {n.name: n for n in c.nodes}
    model = spec[next(iter(g.bound.values()))].model
    slots = {
        n: k
        for n, k in room(c, used, g.gpu).items()
        if spec[n].model == model and (among is None or spec[n].zone in among)
    }
    todo = [i for i in range(g.workers) if i not in g.bound][:count]

    home = {spec[n].zone for n in g.bound.values()}
    left = [len(todo) if away is None else away]  # quotas it may still put outside home

    def take(_: int, node: str) -> bool:
        outside = spec[node].zone not in home
        if slots[node] == 0 or (outside and left[0] == 0):
            return False
        slots[node] -= 1
        left[0] -= outside
        return True

    def give(_: int, node: str) -> None:
        slots[node] += 1
        left[0] += spec[node].zone not in home

    bound = {i: spec[n].index for i, n in g.bound.items()}
    nodes = sorted((spec[n].index, n) for n in slots)
    return exists_in_rank_order(todo, bound, nodes, take, give)


def run(
    c: Cluster, *, liveness: bool = True, policy: Policy = POLICY, zone_rules: bool = True, pack: bool = False
) -> CycleResult:
    """One cycle and the checks of the module docstring (``zone_rules``: also fewest zones, rule 1's
    costs and distinct nodes, the default policy's rules; without: validity only; ``pack``: the
    policy sets ``pack_workers``, so the fewest nodes of the chosen zones instead of distinct ones)."""
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, c.objects())
    assert not cache.conversion_errors
    result = Scheduler(policy).run_once(cache.snapshot(NOW))
    ssn = result.session
    check_ledgers(ssn)

    # replay the cycle's bindings in commit order to know each gang's situation when it was placed
    gang_of = {q: g.name for g in c.gangs for i, q in enumerate(g.quotas) if i not in g.bound}
    need_of = {q: {"gpu": g.gpu} for g in c.gangs for q in g.quotas}
    replayed, end = used_before_each_gang(result, {n: {"gpu": v} for n, v in c.start().items()}, need_of, gang_of)
    before = {g: {n: v["gpu"] for n, v in used.items()} for g, used in replayed.items()}
    used = {n: v["gpu"] for n, v in end.items()}
    where = {g.name: [ssn.quota(q).node_name for q in g.quotas] for g in c.gangs}  # type: ignore[union-attr]

    for g in c.gangs:
        new = [i for i, n in enumerate(where[g.name]) if n and i not in g.bound]
        if new:  # committed
            assert g.name in before
            affinity = key_zones(c, g, where, list(before))
            check_placed(c, g, where[g.name], new, before[g.name], affinity, zone_rules=zone_rules, pack=pack)
        else:
            assert g.name not in before
            if liveness:
                assert not placeable(c, g, used), f"{g.name} fits but was not placed"
            verdict = result.verdicts.get(f"default/{g.name}")
            assert verdict is not None and not verdict.status.ok
    return result


def key_zones(c: Cluster, g: Gang, where: dict[str, list[str]], order: list[str]) -> Counter[Zone]:
    """The quotas per zone of the gangs sharing ``g``'s affinity key when ``g`` was placed
    (``order``: the gangs in the order they were placed)."""
    out: Counter[Zone] = Counter()
    if not g.key:
        return out
    spec = {n.name: n for n in c.nodes}
    earlier = set(order[: order.index(g.name)])
    for h in c.gangs:
        if h.key == g.key:
            for i, n in enumerate(where[h.name]):
                if n and (i in h.bound or h.name in earlier):
                    out[spec[n].zone] += 1
    return out


def placeable(c: Cluster, g: Gang, used: dict[str, int]) -> bool:
    """Whether ``g`` could run on ``used``: its minMember of quotas bound, on one GPU model (its
    bound quotas'), around its bound quotas in rank order when it asks for strict order."""
    least = max(1, g.least - len(g.bound))
    if g.bound and g.strict:
        return fits_in_order(c, g, used, least)
    return most_that_fit(c, g, used) >= least


def most_that_fit(c: Cluster, g: Gang, used: dict[str, int]) -> int:
    """How many quotas of ``g``'s size one GPU model (its bound quotas', if any) still takes."""
    spec = {n.name: n for n in c.nodes}
    models = {spec[n].model for n in g.bound.values()} or {n.model for n in c.nodes}
    slots = room(c, used, g.gpu)
    return max(sum(k for n, k in slots.items() if spec[n].model == m) for m in models)


def check_placed(
    c: Cluster,
    g: Gang,
    nodes: list[str],
    new: list[int],
    used: dict[str, int],
    affinity: Counter[Zone],
    *,
    zone_rules: bool,
    pack: bool = False,
) -> None:
    """The checks of a gang bound in the cycle (``new``: its quotas bound now; ``used``: the GPUs
    each node held when it was placed)."""
    spec = {n.name: n for n in c.nodes}
    placed = [spec[n] for n in nodes if n]  # in task order
    chosen = [spec[nodes[i]] for i in new]
    assert len({n.model for n in placed}) == 1, f"{g.name} mixes GPU models: {nodes}"
    assert all(n.usable for n in chosen), f"{g.name} on an unusable node: {nodes}"
    assert len(placed) >= g.least, f"{g.name} runs {len(placed)} quotas, below its minMember {g.least}: {nodes}"
    unbound = [i for i in range(g.workers) if i not in g.bound]
    assert new == unbound[: len(new)], f"{g.name} binds {new}, not its first quotas in rank order"
    indices = [n.index for n in placed]
    if g.strict or not g.bound:
        assert indices == sorted(indices), f"{g.name} breaks rank order: {indices}"
    elif indices != sorted(indices):  # a preference, kept whenever it costs nothing: no zone more
        spans = {n.zone for n in placed}  # and no quota more outside its siblings' zones
        home = {spec[n].zone for n in g.bound.values()}
        away = sum(1 for i in new if spec[nodes[i]].zone not in home)
        assert not fits_in_order(c, g, used, len(new), among=spans, away=away), (
            f"{g.name} breaks rank order {indices} while its zones {sorted(spans)} allow it"
        )
    if not (g.strict and g.bound):
        most = most_that_fit(c, g, used)
        assert len(new) == min(len(unbound), most), f"{g.name} binds {len(new)}, {most} fit: {nodes}"
    if not zone_rules:
        return
    slots = room(c, used, g.gpu)
    if g.bound:
        if g.strict:
            check_fewest_in_order(c, g, placed, len(new), used)
        else:
            check_near_siblings(c, g, chosen, slots)
        return
    need = len(new)
    minimal = fewest_zones(c, slots, need)
    zones = {n.zone for n in chosen}
    assert minimal is not None
    assert len(zones) == minimal, f"{g.name} uses {len(zones)} zones, {minimal} would do: {nodes}"
    cost, best = zone_cost(c, zones, slots, used, affinity), best_cost(c, slots, need, minimal, used, affinity)
    assert cost == best, f"{g.name} takes zones {sorted(zones)} of cost {cost}, the best costs {best}: {nodes}"
    if pack:  # the fewest nodes of the chosen zones, then the least room taken
        mine = {n.name for n in chosen}
        got = (len(mine), sum(slots[n] for n in mine))
        least = fewest_nodes([slots.get(n.name, 0) for n in c.nodes if n.zone in zones], need)
        assert got == least, f"{g.name} takes (nodes, room) {got} in {sorted(zones)}, {least} would do: {nodes}"
        return
    for z in zones:  # distinct nodes while the zone has enough of them
        here = [n.name for n in chosen if n.zone == z]
        open_nodes = [n for n in c.nodes if n.zone == z and slots.get(n.name, 0) > 0]
        if len(open_nodes) >= len(here):
            assert len(set(here)) == len(here), f"{g.name} shares a node in {z} while others are free: {nodes}"
        else:  # too few: ranks share, on the fewest nodes that hold them, best fit
            got = (len(set(here)), sum(slots[n] for n in set(here)))
            least = fewest_nodes([slots[n.name] for n in open_nodes], len(here))
            assert got == least, f"{g.name} takes (nodes, room) {got} in {z}, {least} would do: {nodes}"
    if sum(1 for n in c.nodes if n.zone in zones and slots.get(n.name, 0) > 0) >= need:  # and while they have
        assert len({n.name for n in chosen}) == need, f"{g.name} shares a node while its zones have free ones: {nodes}"


def fewest_zones_in_order(c: Cluster, g: Gang, used: dict[str, int], count: int) -> int | None:
    """The fewest zones, its bound quotas' among them, in which the first ``count`` unbound quotas
    of strict ``g`` fit in rank order around its bound quotas (exhaustive over sets of zones)."""
    spec = {n.name: n for n in c.nodes}
    home = {spec[n].zone for n in g.bound.values()}
    model = next(iter(home))[0]
    others = sorted({n.zone for n in c.nodes if n.model == model} - home)
    for k in range(len(others) + 1):
        for more in itertools.combinations(others, k):
            if fits_in_order(c, g, used, count, among=home | set(more)):
                return len(home) + k
    return None


def check_fewest_in_order(c: Cluster, g: Gang, placed: list[NodeSpec], count: int, used: dict[str, int]) -> None:
    """A strict-order gang partly bound (``placed``: its nodes, bound ones included, in task order;
    ``count``: its quotas bound now) spans the fewest zones in which rank order around its bound
    quotas can be kept."""
    fewest = fewest_zones_in_order(c, g, used, count)
    zones = {n.zone for n in placed}
    assert len(zones) == fewest, f"{g.name} spans {len(zones)} zones in rank order, {fewest} would do: {placed}"


def check_near_siblings(c: Cluster, g: Gang, chosen: list[NodeSpec], slots: dict[str, int]) -> None:
    """A partly bound gang fills its bound quotas' zones first, then the fewest further zones."""
    spec = {n.name: n for n in c.nodes}
    home = {spec[n].zone for n in g.bound.values()}
    model = next(iter(home))[0]
    room_of = zone_room(c, slots)
    inside = sum(room_of[z] for z in home)
    outside = [n for n in chosen if n.zone not in home]
    assert len(outside) == max(0, len(chosen) - inside), f"{g.name} leaves room in its siblings' zones {home}"
    if outside:
        others = [z for z in room_of if z[0] == model and z not in home]
        fewest = fewest_zones(c, slots, len(outside), among=others)
        assert len({n.zone for n in outside}) == fewest, f"{g.name} takes more further zones than {fewest}"


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


def _in_order_beyond_best_fit() -> Cluster:
    """A strict gang of four whole-node workers whose rank 3 is bound on n6 (leaf 3): ranks 0–2
    must sit on nodes n0–n6. Best fit by room alone would add leaf 4 (n8, n9: after n6); the
    lowest indices in order take n0, n3, n4 over three leaves; leaf 2 (n3–n5) alone keeps the
    order beside leaf 3."""

    def node(i: int, leaf: int, busy: int = 0) -> NodeSpec:
        return NodeSpec(f"n{i}", i, leaf, "A100", True, False, busy)

    nodes = [node(0, 1), node(1, 1, 8), node(2, 1, 8), node(3, 2), node(4, 2), node(5, 2)]
    nodes += [node(6, 3), node(7, 3), node(8, 4), node(9, 4)]
    return Cluster(nodes, [Gang("g0", 4, 8, True, bound={3: "n6"})])


def _loose_rank_0_bound() -> Cluster:
    """A gang (no strict order) of three 1-GPU workers whose rank 0 is bound on n4: distinct nodes
    first would put rank 2 on n3, below rank 0, while n4 takes ranks 1 and 2 in order."""
    nodes = [NodeSpec(f"n{i}", i, 1, "A100", True, False, 0) for i in (3, 4)]
    return Cluster(nodes, [Gang("g0", 3, 1, False, bound={0: "n4"})])


def _order_only_outside_home() -> Cluster:
    """Rank 1 of four 4-GPU workers is bound on n1 (leaf 1, full now); n0 (leaf 1) has room for
    two, n7 (leaf 4) for two. Siblings' zone first puts ranks 0 and 3 on n0 and rank 2 on n7;
    rank order would put ranks 2 and 3 on n7, one quota more outside leaf 1: for a gang that does
    not ask for strict order, locality wins."""

    def node(i: int, leaf: int, busy: int = 0) -> NodeSpec:
        return NodeSpec(f"n{i}", i, leaf, "A100", True, False, busy)

    return Cluster([node(0, 1), node(1, 1, 4), node(7, 4)], [Gang("g0", 4, 4, False, bound={1: "n1"})])


@PROPERTY
@given(clusters())
@example(c=_counterexample())  # a counterexample once found: always tried
@example(c=_order_only_outside_home())
@example(c=_in_order_beyond_best_fit())
@example(c=_loose_rank_0_bound())
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
    if g.bound or g.min_member:
        return  # run() checked what such a gang gets
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


def test_a_strict_gang_that_must_leave_its_zones_takes_the_fewest_that_keep_rank_order() -> None:
    """Ranks 0–2 of the strict gang go to leaf 2 (n3–n5), beside their bound rank 3 in leaf 3:
    two zones, not n0, n3, n4 over three."""
    c = _in_order_beyond_best_fit()
    result = run(c, liveness=True)
    where = [result.session.quota(q).node_name for q in c.gangs[0].quotas]  # type: ignore[union-attr]
    assert where == ["n3", "n4", "n5", "n6"]


def test_a_partly_bound_gang_keeps_rank_order_when_its_zones_allow_it() -> None:
    """Order is a preference for a gang that does not ask for strict order, and one it keeps when
    its zones allow: ranks 1 and 2 join rank 0 on n4 rather than rank 2 taking n3 below it."""
    c = _loose_rank_0_bound()
    result = run(c, liveness=True)
    where = [result.session.quota(q).node_name for q in c.gangs[0].quotas]  # type: ignore[union-attr]
    assert where == ["n4", "n4", "n4"]


def test_a_partly_bound_gang_keeps_to_its_siblings_zone_before_rank_order() -> None:
    c = _order_only_outside_home()
    result = run(c, liveness=True)
    where = [result.session.quota(q).node_name for q in c.gangs[0].quotas]  # type: ignore[union-attr]
    assert where == ["n0", "n1", "n7", "n0"]
