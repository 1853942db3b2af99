"""Random clusters and gangs of RDMA jobs for the topology properties, one cycle of the binder
on them (:func:`run`), and the oracles that judge its placements (the rules are stated in
``test_topology_property``'s docstring, which these check)."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from extender import wellknown
from extender.cache.cache import ClusterCache
from extender.conf import default_policy
from extender.framework.policy import Policy
from extender.scheduler import CycleResult, Scheduler
from tests import builders as b
from tests.core.scenarios import policy_with_topology, quota_node
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
CONTINUITY = policy_with_topology({"continuity_weight": 200.0})
CONTINUITY_PACKED = policy_with_topology({"continuity_weight": 200.0, "pack_workers": True})
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


def domain_room(c: Cluster, slots: dict[str, int]) -> dict[str, int]:
    """Each named NVLink domain's room for the gang: the sum of its nodes' slots."""
    rooms: dict[str, int] = {}
    for n in c.nodes:
        if n.domain:
            rooms[n.domain] = rooms.get(n.domain, 0) + slots.get(n.name, 0)
    return rooms


def check_in_one_domain(c: Cluster, where: Sequence[str], rooms: Mapping[str, int]) -> None:
    """A gang held hard to one NVLink domain (``where``: its quotas' nodes, "" for one left
    unbound; ``rooms``: each named domain's slots for it) runs in one named domain whenever one
    holds all its quotas, and otherwise waits, every quota of it."""
    g = c.gangs[0]
    spec = {n.name: n for n in c.nodes}
    if max(rooms.values(), default=0) < g.workers:
        assert not any(where), f"{g.name} placed beyond one NVLink domain: {where}"
        return
    assert all(where), f"{g.name} waits while one NVLink domain holds it: {rooms}"
    assert len({spec[n].domain for n in where}) == 1 and spec[where[0]].domain, where


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
    where = {g.name: [quota_node(ssn, q) for q in g.quotas] for g in c.gangs}

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
            check_near_siblings(c, g, chosen, slots, pack=pack)
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


def outside_siblings_bounds(
    c: Cluster, g: Gang, chosen: list[NodeSpec], slots: dict[str, int], *, pack: bool = False
) -> tuple[int, int]:
    """(least, most) new quotas a partly bound gang may put outside its siblings' zones, ``chosen``
    the nodes of its new quotas (:func:`check_near_siblings`' rule): at least what those zones
    cannot hold; by default, while the zones it spans have a node free of it per new quota, at
    most as many as those zones lack such nodes; else exactly the least."""
    spec = {n.name: n for n in c.nodes}
    home = {spec[n].zone for n in g.bound.values()}
    inside = sum(zone_room(c, slots)[z] for z in home)
    held = set(g.bound.values())
    spans = home | {n.zone for n in chosen}
    free = [n for n in c.nodes if n.zone in spans and slots.get(n.name, 0) > 0 and n.name not in held]
    least = max(0, len(chosen) - inside)
    apart = not pack and len(free) >= len(chosen)
    most = max(least, len(chosen) - sum(1 for n in free if n.zone in home)) if apart else least
    return least, most


def check_near_siblings(
    c: Cluster, g: Gang, chosen: list[NodeSpec], slots: dict[str, int], *, pack: bool = False
) -> None:
    """A partly bound gang takes its bound quotas' zones first, then the fewest further zones for
    what they cannot hold; beyond that, by default, while the zones it spans have a node free of
    it per new quota, no more quotas leave its siblings' zones than those zones lack such nodes
    (distinct nodes: a further zone it takes anyway may spare a rank a sibling's node, never take
    a rank a free node of its siblings' zones holds); else, and with ``pack_workers``, none (ranks
    share anyway: the siblings' zones are filled first)."""
    spec = {n.name: n for n in c.nodes}
    home = {spec[n].zone for n in g.bound.values()}
    model = next(iter(home))[0]
    room_of = zone_room(c, slots)
    outside = [n for n in chosen if n.zone not in home]
    least, most = outside_siblings_bounds(c, g, chosen, slots, pack=pack)
    assert least <= len(outside) <= most, (
        f"{g.name} puts {len(outside)} quotas outside its siblings' zones {home}: {chosen}"
    )
    if outside:
        others = [z for z in room_of if z[0] == model and z not in home]
        fewest = fewest_zones(c, slots, least, among=others)  # for what its siblings' zones cannot hold
        assert len({n.zone for n in outside}) == fewest, f"{g.name} takes more further zones than {fewest}"
