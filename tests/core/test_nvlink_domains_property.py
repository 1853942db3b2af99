"""NVLink domains (tier 0) inside the chosen leaves, against an exhaustive oracle (issue 16 item 2:
distinct nodes by default; ``pack_workers`` packs NVLink first).

Small clusters of 1–2 leaves whose nodes name NVLink domains (``nvidia.com/gpu.clique``; a node
without one is a domain of its own), one RDMA gang, one cycle of the default policy with and
without ``pack_workers``. Every check of ``test_topology_property`` holds (by default, unless one
domain holds the gang — tier 0 comes before the leaves — its zone rules too: the fewest leaves,
rule 1's best fit, distinct nodes while a leaf has enough), and the gang takes the fewest NVLink domains that
hold it, the best fit among sets of that many (the least room) — one named domain if one holds
it (tier 0, over all leaves), else:

* by default in each chosen leaf, a domain's room being its nodes with room (when the leaf has
  fewer such nodes than the quotas it takes, every node takes some: nothing to choose);
* with ``pack_workers`` over its chosen leaves together, a domain's room being its slots.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from hypothesis import example, given
from hypothesis import strategies as st

from extender.cache.cache import ClusterCache
from extender.framework.status import Reason
from extender.scheduler import CycleResult, Scheduler
from tests import builders as b
from tests.core.props import PROPERTY
from tests.core.scenarios import policy_with_topology, quota_node
from tests.core.topo_cluster import NOW, NodeSpec, check_ledgers, held_to_nvlink
from tests.core.topo_gangs import (
    CONTINUITY,
    POLICY,
    Cluster,
    Gang,
    check_in_one_domain,
    domain_room,
    draw_bound,
    room,
    run,
)

PACKED = policy_with_topology({"pack_workers": True})


@st.composite
def domain_clusters(draw: st.DrawFn) -> Cluster:
    nodes: list[NodeSpec] = []
    for leaf in range(1, draw(st.integers(1, 2)) + 1):
        for _ in range(draw(st.integers(2, 6))):
            k = len(nodes)
            domain = draw(st.sampled_from(["", "a", "b", "b", "c"]))
            ready = draw(st.integers(0, 9)) > 0
            busy = draw(st.sampled_from([0, 0, 4, 6, 8]))
            nodes.append(
                NodeSpec(f"n{k}", k, leaf, "A100", ready, False, busy, domain=f"{leaf}{domain}" * bool(domain))
            )
    gang = Gang("g0", draw(st.integers(2, 8)), draw(st.sampled_from([1, 2, 4, 8])), False)
    return Cluster(nodes, [gang])


def unit(n: NodeSpec) -> str:
    return n.domain or f"node#{n.name}"


def fewest_and_best(rooms: dict[str, int], need: int) -> tuple[int, int] | None:
    """(the fewest domains whose ``rooms`` reach ``need``, the least room of such a set)."""
    for k in range(1, len(rooms) + 1):
        sums = [sum(c) for c in itertools.combinations(rooms.values(), k) if sum(c) >= need]
        if sums:
            return k, min(sums)
    return None


def check_domains(c: Cluster, where: Sequence[str], *, pack: bool) -> None:
    g = c.gangs[0]
    spec = {n.name: n for n in c.nodes}
    slots = room(c, c.start(), g.gpu)
    placed = [spec[n] for n in where if n]
    if not placed:
        return
    least = tier_0(c, pack=pack)
    if least is not None:
        (domain,) = {n.domain for n in placed}
        held = sum(slots.get(n.name, 0) if pack else 1 for n in c.nodes if n.domain == domain and slots.get(n.name))
        assert domain and held == least, (
            f"{g.name} in domain {domain!r} of room {held}, {least} holds it: {list(where)}"
        )
        return
    groups = [{n.zone for n in placed}] if pack else [{z} for z in {n.zone for n in placed}]
    for zones in groups:
        mine = [n for n in placed if n.zone in zones]
        open_nodes = [n for n in c.nodes if n.zone in zones and slots.get(n.name, 0) > 0]
        if not pack and len(open_nodes) < len(mine):
            continue
        rooms: dict[str, int] = {}
        for n in open_nodes:
            rooms[unit(n)] = rooms.get(unit(n), 0) + (slots[n.name] if pack else 1)
        used = {unit(n) for n in mine}
        got = (len(used), sum(rooms[u] for u in used))
        best = fewest_and_best(rooms, len(mine))
        assert got == best, f"{g.name} takes (domains, room) {got} in {sorted(zones)}, {best} would do: {list(where)}"


def _interleaved() -> Cluster:
    """One leaf, domains a, b, c, a, b by node index; three whole-node workers. No domain holds
    them; a and c (three nodes) do, leaving b whole — not n0, n1, n2 over three domains."""
    doms = ["1a", "1b", "1c", "1a", "1b"]
    nodes = [NodeSpec(f"n{i}", i, 1, "A100", True, False, 0, domain=d) for i, d in enumerate(doms)]
    return Cluster(nodes, [Gang("g0", 3, 8, False)])


def _half_nodes_in_a_domain() -> Cluster:
    """One leaf of four empty nodes, domains a (n0, n1) and b (n2, n3); four 4-GPU workers.
    Domain a holds them by slots (two per node) but the leaf has four nodes: by default distinct
    nodes; with ``pack_workers`` two nodes of one domain."""
    doms = ["1a", "1a", "1b", "1b"]
    nodes = [NodeSpec(f"n{i}", i, 1, "A100", True, False, 0, domain=d) for i, d in enumerate(doms)]
    return Cluster(nodes, [Gang("g0", 4, 4, False)])


def tier_0(c: Cluster, *, pack: bool) -> int | None:
    """The least room of a named domain that holds the whole gang (tier 0: it goes there, whatever
    the leaves' best fit), room counted as :func:`check_domains` does; None: none holds it."""
    g = c.gangs[0]
    slots = room(c, c.start(), g.gpu)
    rooms: dict[str, int] = {}
    for n in c.nodes:
        if n.domain and slots.get(n.name, 0) > 0:
            rooms[n.domain] = rooms.get(n.domain, 0) + (slots[n.name] if pack else 1)
    return min((r for r in rooms.values() if r >= g.workers), default=None)


def placed(c: Cluster, *, pack: bool) -> list[str]:
    zone_rules = not pack and tier_0(c, pack=pack) is None
    result = run(c, liveness=True, policy=PACKED if pack else POLICY, zone_rules=zone_rules)
    return [result.session.quota(q).node_name for q in c.gangs[0].quotas]  # type: ignore[union-attr]


@PROPERTY
@given(domain_clusters(), st.booleans())
@example(c=_interleaved(), pack=False)
@example(c=_interleaved(), pack=True)
@example(c=_half_nodes_in_a_domain(), pack=False)
def test_a_gang_takes_the_fewest_nvlink_domains_of_its_leaves(c: Cluster, pack: bool) -> None:
    check_domains(c, placed(c, pack=pack), pack=pack)


def test_three_whole_node_workers_fill_one_domain_before_another() -> None:
    assert placed(_interleaved(), pack=False) == ["n0", "n2", "n3"]


def test_by_default_a_domain_never_makes_ranks_share_a_node() -> None:
    assert placed(_half_nodes_in_a_domain(), pack=False) == ["n0", "n1", "n2", "n3"]
    assert placed(_half_nodes_in_a_domain(), pack=True) == ["n0", "n0", "n1", "n1"]


def _siblings_in_a() -> Cluster:
    """One leaf of six empty nodes, domains a, b, a, b, a, a by index; four whole-node workers, rank
    0 bound on n0 (domain a). Domain a has three more free nodes: ranks 1–3 go there (n2, n4, n5,
    one domain), not to the next indices n1, n2, n3 (two)."""
    doms = ["1a", "1b", "1a", "1b", "1a", "1a"]
    nodes = [NodeSpec(f"n{i}", i, 1, "A100", True, False, 0, domain=d) for i, d in enumerate(doms)]
    return Cluster(nodes, [Gang("g0", 4, 8, False, bound={0: "n0"})])


def _siblings_in_a_after_rank_0() -> Cluster:
    """One leaf, domains a, a, b, a, b, a, a, b by index; three whole-node workers, rank 0 bound on
    n3 (domain a). Domain a's free nodes n0, n1 lie below rank 0: the rest goes in rank order to
    a's n5, n6 (one domain), not to the next indices n4, n5 (two)."""
    doms = ["1a", "1a", "1b", "1a", "1b", "1a", "1a", "1b"]
    nodes = [NodeSpec(f"n{i}", i, 1, "A100", True, False, 0, domain=d) for i, d in enumerate(doms)]
    return Cluster(nodes, [Gang("g0", 3, 8, False, bound={0: "n3"})])


def _rank_1_bound_between() -> Cluster:
    """n0 and n2, n3 name no domain, n1 and n4 are domain a; four 1-GPU workers, rank 1 bound on
    n2. In rank order rank 0 takes n1 (a) and ranks 2, 3 take n3, n4 (a): three units, not n0."""
    doms = ["", "1a", "", "", "1a"]
    nodes = [NodeSpec(f"n{i}", i, 1, "A100", True, False, 0, domain=d) for i, d in enumerate(doms)]
    return Cluster(nodes, [Gang("g0", 4, 1, False, bound={1: "n2"})])


def _one_free_node_in_the_siblings_domain() -> Cluster:
    """n0 names no domain, n1 and n2 are domain a; two whole-node workers, rank 1 bound on n2.
    Rank 0 goes to n1 beside its sibling's domain, not to n0 (each free node is a domain of its
    own among the candidates, but a is the sibling's)."""
    doms = ["", "1a", "1a"]
    nodes = [NodeSpec(f"n{i}", i, 1, "A100", True, False, 0, domain=d) for i, d in enumerate(doms)]
    return Cluster(nodes, [Gang("g0", 2, 8, False, bound={1: "n2"})])


@st.composite
def partly_bound(draw: st.DrawFn) -> Cluster:
    """A cluster of :func:`domain_clusters` whose gang has some quotas bound already."""
    c = draw(domain_clusters())
    draw_bound(draw, c.gangs[0], c.nodes, {n.name: n.busy for n in c.nodes})
    c.gangs[0].strict = draw(st.booleans())
    return c


def fewest_in_order(c: Cluster, zone: tuple[str, int], *, pack: bool) -> int | None:
    """The exhaustive oracle around bound siblings: the fewest domains the whole gang (its bound
    quotas included) spans over placements of its other quotas on nodes of ``zone`` with room,
    node indices never descending as task indices ascend — by default on distinct nodes that
    hold none of the gang; None: no such placement."""
    g = c.gangs[0]
    slots = room(c, c.start(), g.gpu)
    nodes = sorted((n for n in c.nodes if n.zone == zone and slots.get(n.name, 0) > 0), key=lambda n: n.index)
    index = {n.name: n.index for n in c.nodes}
    spec = {n.name: n for n in c.nodes}
    held = frozenset(unit(spec[n]) for n in g.bound.values())
    left = {n.name: (0 if n.name in g.bound.values() else 1) if not pack else slots[n.name] for n in nodes}
    best: int | None = None

    def go(i: int, low: int, units: frozenset[str]) -> None:
        nonlocal best
        if best is not None and len(units) >= best:
            return
        if i == g.workers:
            best = len(units)
            return
        if i in g.bound:
            if index[g.bound[i]] >= low:
                go(i + 1, index[g.bound[i]], units)
            return
        for n in nodes:
            if n.index >= low and left[n.name] > 0:
                left[n.name] -= 1
                go(i + 1, n.index, units | {unit(n)})
                left[n.name] += 1

    go(0, -1, held)
    return best


def check_around_siblings(c: Cluster, where: Sequence[str], *, pack: bool) -> None:
    """A partly bound gang placed whole in its siblings' one zone, in rank order (by default on
    distinct nodes free of the gang) spans the fewest domains such a placement can."""
    g = c.gangs[0]
    spec = {n.name: n for n in c.nodes}
    if not g.bound or not all(where):
        return
    placed_nodes = [spec[n] for n in where]
    zones = {n.zone for n in placed_nodes}
    at = [n.index for n in placed_nodes]
    new = [where[i] for i in range(g.workers) if i not in g.bound]
    if len(zones) != 1 or at != sorted(at):
        return
    if not pack and (len(set(new)) < len(new) or set(new) & set(g.bound.values())):
        return
    got = len({unit(n) for n in placed_nodes})
    best = fewest_in_order(c, next(iter(zones)), pack=pack)
    assert best is not None and got == best, f"{g.name} spans {got} domains, {best} would do: {list(where)}"


@PROPERTY
@given(partly_bound(), st.booleans())
@example(c=_siblings_in_a(), pack=False)
@example(c=_siblings_in_a(), pack=True)
@example(c=_siblings_in_a_after_rank_0(), pack=False)
@example(c=_siblings_in_a_after_rank_0(), pack=True)
@example(c=_rank_1_bound_between(), pack=False)
@example(c=_one_free_node_in_the_siblings_domain(), pack=False)
def test_a_partly_bound_gang_takes_the_fewest_nvlink_domains_beside_its_siblings(c: Cluster, pack: bool) -> None:
    result = run(c, liveness=True, policy=PACKED if pack else POLICY, zone_rules=False)
    check_around_siblings(c, [quota_node(result.session, q) for q in c.gangs[0].quotas], pack=pack)


def test_the_rest_of_a_partly_bound_gang_fills_its_siblings_domain_first() -> None:
    assert placed(_siblings_in_a(), pack=False) == ["n0", "n2", "n4", "n5"]
    assert placed(_siblings_in_a(), pack=True) == ["n0", "n2", "n4", "n5"]


def test_in_rank_order_the_rest_of_a_partly_bound_gang_still_fills_its_siblings_domain() -> None:
    assert placed(_siblings_in_a_after_rank_0(), pack=False) == ["n3", "n5", "n6"]
    assert placed(_siblings_in_a_after_rank_0(), pack=True) == ["n3", "n5", "n6"]
    assert placed(_rank_1_bound_between(), pack=False) == ["n1", "n2", "n3", "n4"]
    assert placed(_one_free_node_in_the_siblings_domain(), pack=False) == ["n1", "n2"]


def shortest_runs(c: Cluster) -> list[list[NodeSpec]]:
    """The continuity oracle: every shortest run of consecutive node indices whose nodes all have
    room for the gang and together hold it (one GPU model here; a full or unusable node breaks a
    run)."""
    g = c.gangs[0]
    slots = room(c, c.start(), g.gpu)
    nodes = sorted(c.nodes, key=lambda n: n.index)
    runs = [
        nodes[i:j]
        for i in range(len(nodes))
        for j in range(i + 1, len(nodes) + 1)
        if all(slots.get(n.name, 0) > 0 for n in nodes[i:j]) and sum(slots[n.name] for n in nodes[i:j]) >= g.workers
    ]
    least = min((len(r) for r in runs), default=0)
    return [r for r in runs if len(r) == least]


def _runs_of_two() -> Cluster:
    """One leaf, domains a, b, b by index; two whole-node workers under continuity. n0–n1 and
    n1–n2 are both shortest runs: n1–n2 is one NVLink domain, n0–n1 two."""
    nodes = [NodeSpec(f"n{i}", i, 1, "A100", True, False, 0, domain=d) for i, d in enumerate(["1a", "1b", "1b"])]
    return Cluster(nodes, [Gang("g0", 2, 8, False)])


def _runs_across_leaves() -> Cluster:
    """Leaf 1: n0, n1 (n0 half used); leaf 2: n2, n3; two whole-node workers under continuity.
    n1–n2 (two leaves) and n2–n3 (one) are both shortest runs: n2–n3."""
    nodes = [NodeSpec("n0", 0, 1, "A100", True, False, 4), NodeSpec("n1", 1, 1, "A100", True, False, 0)]
    nodes += [NodeSpec(f"n{i}", i, 2, "A100", True, False, 0) for i in (2, 3)]
    return Cluster(nodes, [Gang("g0", 2, 8, False)])


def _run_with_a_half_node() -> Cluster:
    """n0, n1 (half used), n2 in one leaf; four 4-GPU workers under continuity. The shortest run
    is n0–n2 and ranks must share: n0 and n2 alone hold them, but skipping n1 leaves a gap in
    the run; every node of it takes one, the fourth shares n0."""
    nodes = [NodeSpec(f"n{i}", i, 1, "A100", True, False, busy) for i, busy in enumerate((0, 4, 0))]
    return Cluster(nodes, [Gang("g0", 4, 4, False)])


@PROPERTY
@given(domain_clusters())
@example(c=_runs_of_two())
@example(c=_runs_across_leaves())
@example(c=_run_with_a_half_node())
def test_under_continuity_the_shortest_run_in_the_fewest_leaves_and_domains(c: Cluster) -> None:
    """By default the gang takes every node of its run; among the shortest runs, the one in the
    fewest leaves, then the fewest NVLink domains (the tiers' rule as a tie-break: a run stays
    the shortest)."""
    result = run(c, liveness=True, policy=CONTINUITY, zone_rules=False)
    spec = {n.name: n for n in c.nodes}
    where = [result.session.quota(q).node_name for q in c.gangs[0].quotas]  # type: ignore[union-attr]
    runs = shortest_runs(c)
    if not all(where) or not runs:
        return
    used = [spec[n] for n in sorted(set(where), key=lambda n: spec[n].index)]
    assert [n.index for n in used] == list(range(used[0].index, used[-1].index + 1))
    assert len(used) == len(runs[0]), f"run {[n.name for n in used]}, a shorter one holds the gang"

    def cost(r: Sequence[NodeSpec]) -> tuple[int, int]:
        return len({n.leaf for n in r}), len({unit(n) for n in r})

    assert cost(used) == min(map(cost, runs)), f"run {[n.name for n in used]} of (leaves, domains) {cost(used)}"


def test_under_continuity_equally_short_runs_go_to_the_fewest_leaves_then_domains() -> None:
    for c, want in (
        (_runs_of_two(), ["n1", "n2"]),
        (_runs_across_leaves(), ["n2", "n3"]),
        (_run_with_a_half_node(), ["n0", "n0", "n1", "n2"]),
    ):
        result = run(c, liveness=True, policy=CONTINUITY, zone_rules=False)
        assert [result.session.quota(q).node_name for q in c.gangs[0].quotas] == want  # type: ignore[union-attr]


def run_within_nvlink(c: Cluster, *, pack: bool) -> CycleResult:
    """One cycle when the gangs' PodGroups set ``highestTierAllowed: nvlink``, ``mode: hard``."""
    objs = c.objects()
    held_to_nvlink(objs)
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, objs)
    result = Scheduler(PACKED if pack else POLICY).run_once(cache.snapshot(NOW))
    check_ledgers(result.session)
    return result


def placed_within_nvlink(c: Cluster, *, pack: bool) -> list[str]:
    """The gang's nodes after one cycle under the hard NVLink limit ("" for a quota left unbound)."""
    result = run_within_nvlink(c, pack=pack)
    return [result.session.quota(q).node_name or "" for q in c.gangs[0].quotas]  # type: ignore[union-attr]


def _two_nodes_a_domain() -> Cluster:
    """Domains a (n0, n1) and b (n2, n3), all empty; four 4-GPU workers that may not leave one
    NVLink domain. No domain has four nodes, but a holds them two to a node: they run there."""
    doms = ["1a", "1a", "1b", "1b"]
    nodes = [NodeSpec(f"n{i}", i, 1, "A100", True, False, 0, domain=d) for i, d in enumerate(doms)]
    return Cluster(nodes, [Gang("g0", 4, 4, False)])


@PROPERTY
@given(domain_clusters(), st.booleans())
@example(c=_two_nodes_a_domain(), pack=False)
def test_a_gang_held_to_one_nvlink_domain_runs_whenever_one_holds_it(c: Cluster, pack: bool) -> None:
    """A hard NVLink limit is a rule of its own: the gang runs in one named domain whenever one
    has room for all its quotas, sharing nodes if it must (by default distinct nodes only come
    first), and otherwise waits."""
    g = c.gangs[0]
    slots = room(c, c.start(), g.gpu)
    rooms = domain_room(c, slots)
    where = placed_within_nvlink(c, pack=pack)
    check_in_one_domain(c, where, rooms)
    assert all(where.count(n) <= slots[n] for n in set(where) if n), where


def test_four_workers_held_to_one_domain_share_its_two_nodes() -> None:
    assert placed_within_nvlink(_two_nodes_a_domain(), pack=False) == ["n0", "n0", "n1", "n1"]


def in_siblings_domain(c: Cluster) -> bool:
    """The exhaustive oracle for a partly bound gang held to one NVLink domain: its bound siblings
    sit in one named domain whose slots take the rest of it — a strict-order one in rank order
    (task *i* on a node index ≥ task *i−1*'s, around the bound ones)."""
    g = c.gangs[0]
    spec = {n.name: n for n in c.nodes}
    domains = {spec[n].domain for n in g.bound.values()}
    if len(domains) != 1 or not next(iter(domains)):
        return False
    slots = room(c, c.start(), g.gpu)
    nodes = sorted((n for n in c.nodes if n.domain in domains and slots.get(n.name, 0) > 0), key=lambda n: n.index)
    if not g.strict:
        return sum(slots[n.name] for n in nodes) >= g.workers - len(g.bound)
    left = {n.name: slots[n.name] for n in nodes}

    def go(i: int, low: int) -> bool:
        if i == g.workers:
            return True
        if i in g.bound:
            return spec[g.bound[i]].index >= low and go(i + 1, spec[g.bound[i]].index)
        for n in nodes:
            if n.index >= low and left[n.name] > 0:
                left[n.name] -= 1
                found = go(i + 1, n.index)
                left[n.name] += 1
                if found:
                    return True
        return False

    return go(0, -1)


def _rank_0_bound_beside_a_free_node() -> Cluster:
    """One leaf, domains a (n0, n1) and b (n2, n3), all empty; two whole-node workers, rank 0 bound
    on n0. n1 holds rank 1 within a: it runs there (it was refused as a leaf-wide span)."""
    doms = ["1a", "1a", "1b", "1b"]
    nodes = [NodeSpec(f"n{i}", i, 1, "A100", True, False, 0, domain=d) for i, d in enumerate(doms)]
    return Cluster(nodes, [Gang("g0", 2, 8, False, bound={0: "n0"})])


def _rank_1_bound_above_its_domain() -> Cluster:
    """Domains b (n0, n1) and a (n2, n3), all empty; three 4-GPU workers, rank 1 bound on n2. Rank
    order puts rank 0 below n2, in b (n0, n1): in a it shares n2 or takes n3 out of order."""
    doms = ["1b", "1b", "1a", "1a"]
    nodes = [NodeSpec(f"n{i}", i, 1, "A100", True, False, 0, domain=d) for i, d in enumerate(doms)]
    return Cluster(nodes, [Gang("g0", 3, 4, False, bound={1: "n2"})])


@PROPERTY
@given(partly_bound(), st.booleans())
@example(c=_rank_0_bound_beside_a_free_node(), pack=False)
@example(c=_rank_0_bound_beside_a_free_node(), pack=True)
@example(c=_rank_1_bound_above_its_domain(), pack=False)
def test_a_partly_bound_gang_held_to_one_nvlink_domain_runs_whenever_its_siblings_domain_holds_it(
    c: Cluster, pack: bool
) -> None:
    """Issue 16 item 2 under a hard NVLink limit: the rest of a partly bound gang runs whenever its
    siblings' one domain holds it (sharing nodes if it must), never outside that domain; else it
    waits."""
    g = c.gangs[0]
    spec = {n.name: n for n in c.nodes}
    slots = room(c, c.start(), g.gpu)
    where = placed_within_nvlink(c, pack=pack)
    new = [where[i] for i in range(g.workers) if i not in g.bound]
    if not in_siblings_domain(c):
        assert not any(new), f"{g.name} placed beyond its siblings' NVLink domain: {where}"
        return
    assert all(new), f"{g.name} waits while its siblings' NVLink domain holds the rest: {where}"
    assert {spec[n].domain for n in where} == {spec[n].domain for n in g.bound.values()}, where
    assert all(new.count(n) <= slots[n] for n in set(new)), where


@PROPERTY
@given(partly_bound(), st.booleans())
def test_a_bound_gang_over_its_nvlink_limit_is_told_its_siblings_domains_room(c: Cluster, pack: bool) -> None:
    """When such a gang waits with ``FitsOnlyAboveAllowedTier``, the refusal names the room of the
    one domain it may use — its siblings' (the only one when they share one), in slots of its
    usable nodes of the siblings' GPU model — never a domain it can never run in."""
    g = c.gangs[0]
    result = run_within_nvlink(c, pack=pack)
    spec = {n.name: n for n in c.nodes}
    statuses = [v.status for v in result.verdicts.values() if v.status.reason == Reason.FITS_ONLY_ABOVE_ALLOWED_TIER]
    domains = {spec[n].domain for n in g.bound.values()}
    if not statuses or len(domains) != 1 or not next(iter(domains)):
        return
    (domain,) = domains
    model = spec[next(iter(g.bound.values()))].model
    slots = room(c, c.start(), g.gpu)
    mine = sum(slots.get(n.name, 0) for n in c.nodes if n.domain == domain and n.model == model)
    need = g.workers - len(g.bound)
    for status in statuses:
        assert status.message().endswith(f"its siblings' NVLink domain, {domain}, takes {mine} of {need})"), (
            status.message()
        )


def test_the_rest_of_a_bound_gang_held_to_nvlink_joins_its_siblings_domain() -> None:
    assert placed_within_nvlink(_rank_0_bound_beside_a_free_node(), pack=False) == ["n0", "n1"]
    assert placed_within_nvlink(_rank_1_bound_above_its_domain(), pack=False) == ["n2", "n2", "n3"]


def test_a_bound_gang_whose_siblings_domain_is_full_waits_told_in_nvlink_domains() -> None:
    """Rank 0 bound on n0 of domain a, whose n1 is full; domain b has two empty nodes. Rank 1 may
    not leave a: it waits, and the refusal names the NVLink limit and the room of a, the one
    domain it may use (before it named the roomiest domain overall, b, "takes 2 of 1": a domain
    that would hold it, and which it may never use)."""
    doms = ["1a", "1a", "1b", "1b"]
    nodes = [NodeSpec(f"n{i}", i, 1, "A100", True, False, 8 if i == 1 else 0, domain=d) for i, d in enumerate(doms)]
    c = Cluster(nodes, [Gang("g0", 2, 8, False, bound={0: "n0"})])
    result = run_within_nvlink(c, pack=False)
    assert not result.session.quota(c.gangs[0].quotas[1]).node_name  # type: ignore[union-attr]
    (status,) = (v.status for v in result.verdicts.values())
    assert status.message() == (
        "FitsOnlyAboveAllowedTier(1×8 GPU fits only across a leaf (tier 1); highestTierAllowed is nvlink "
        "(tier 0), and its siblings' NVLink domain, 1a, takes 0 of 1)"
    )
