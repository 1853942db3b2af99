"""A gang whose quotas differ in size (a launcher beside its workers) held to one NVLink domain
(PodGroup ``highestTierAllowed: nvlink``, ``mode: hard``), against an exhaustive oracle (issue 16
item 2: a gang that fits under the rules is never refused; ``docs/placement.md`` rule 1):

* nothing bound yet: it runs whenever one named domain's nodes hold all its quotas — sharing
  nodes if it must, as a gang of one size does (``GangPlanner._plan_domain``) — and never spans
  more than one domain;
* bound siblings: it runs whenever their one named domain holds the rest (a strict-order gang in
  rank order around them), as a gang of one size does (``GangPlanner._plan_siblings_domain``),
  and never leaves that domain.

Before, by default such a gang counted a domain's room in nodes only and waited for ever with
``FitsOnlyAboveAllowedTier`` when a domain held it only by sharing a node; around bound siblings
it never made a tier-0 plan at all.
"""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from extender.cache.cache import ClusterCache
from extender.framework.status import Reason
from extender.scheduler import CycleResult, Scheduler
from tests import builders as b
from tests.core.mixed_gangs import (
    PACKING,
    POLICY,
    Member,
    MixedCluster,
    MixedGang,
    fits_around,
    mixed_clusters,
)
from tests.core.mixed_oracle import fewest_zones
from tests.core.props import PROPERTY
from tests.core.topo_cluster import NOW, NodeSpec, check_ledgers, free_room, held_to_nvlink

LAUNCHER, WORKER, HALF = Member(0, 2), Member(8, 8), Member(4, 8)


def within_nvlink(c: MixedCluster) -> tuple[list[str], CycleResult]:
    """One cycle with the gang's PodGroup held hard to one NVLink domain: its quotas' nodes ("" for
    one left unbound) and the cycle."""
    objs = c.objects()
    held_to_nvlink(objs)
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, objs)
    result = Scheduler(PACKING if c.pack else POLICY).run_once(cache.snapshot(NOW))
    check_ledgers(result.session)
    g = c.gangs[0]
    return [result.session.quota(q).node_name or "" for q in g.quotas], result  # type: ignore[union-attr]


def _leaf(domains: str, busy: dict[int, int] | None = None) -> list[NodeSpec]:
    """One leaf of A100 nodes, node *i* in NVLink domain ``domains[i]`` ("-": none)."""
    return [
        NodeSpec(f"n{i}", i, 1, "A100", True, False, (busy or {}).get(i, 0), domain="" if d == "-" else f"1{d}")
        for i, d in enumerate(domains)
    ]


def _launcher_and_two_workers() -> MixedCluster:
    """Domains a (n0, n1) and b (n2, n3), all empty; a launcher and two whole-node workers. No
    domain has a node per quota, but a holds them with the launcher beside worker 0."""
    return MixedCluster(_leaf("aabb"), [MixedGang("g0", [LAUNCHER, WORKER, WORKER])])


def _launcher_and_four_halves() -> MixedCluster:
    """Domains a (n0, n1) and b (n2, n3), all empty; a launcher and four 4-GPU workers."""
    return MixedCluster(_leaf("aabb"), [MixedGang("g0", [LAUNCHER, HALF, HALF, HALF, HALF])])


def _worker_1_bound() -> MixedCluster:
    """Domains a (n0, n1) and b (n2, n3), all empty; a launcher and two whole-node workers, worker 1
    bound on n0 (a). The launcher (rank 0, at most n0) and worker 2 (n1) hold the rest in a."""
    return MixedCluster(_leaf("aabb"), [MixedGang("g0", [LAUNCHER, WORKER, WORKER], bound={1: "n0"})])


def _strict_worker_bound_above() -> MixedCluster:
    """Domains b (n0, n1) and a (n2, n3), all empty; a strict-order launcher, a worker bound on n2
    (a) and a 4-GPU worker: in rank order the launcher shares n2 (its fence ends there) and the
    last worker takes n3 — inside a, never b's n0, n1."""
    gang = MixedGang("g0", [LAUNCHER, WORKER, HALF], strict=True, bound={1: "n2"})
    return MixedCluster(_leaf("bbaa"), [gang])


def test_a_mixed_gang_held_to_one_domain_shares_its_nodes_rather_than_wait() -> None:
    assert within_nvlink(_launcher_and_two_workers())[0] == ["n0", "n0", "n1"]
    assert within_nvlink(_launcher_and_four_halves())[0] == ["n0", "n0", "n0", "n1", "n1"]


def test_the_rest_of_a_bound_mixed_gang_held_to_one_domain_joins_its_siblings_domain() -> None:
    assert within_nvlink(_worker_1_bound())[0] == ["n0", "n0", "n1"]
    assert within_nvlink(_strict_worker_bound_above())[0] == ["n2", "n2", "n3"]


@st.composite
def domain_mixed(draw: st.DrawFn) -> MixedCluster:
    """One gang of :func:`mixed_clusters` (whole: no ``minMember`` below its size), its nodes in
    NVLink domains of their leaf (some in none)."""
    c = draw(mixed_clusters(max_gangs=1))
    for n in c.nodes:
        d = draw(st.sampled_from(["", "a", "b", "b"]))
        n.domain = f"{n.leaf}{d}" if d else ""
    c.gangs[0].min_member = 0
    return c


def fits_in_domain(c: MixedCluster) -> str | None:
    """The exhaustive oracle: a named domain whose usable nodes hold the gang's unbound quotas
    (nothing bound: any domain; else its bound siblings' one domain, around them), for a
    strict-order gang in rank order; None: none does."""
    g = c.gangs[0]
    spec = {n.name: n for n in c.nodes}
    room = free_room(c.nodes, c.start())
    if g.bound:
        (domain, *others) = {spec[n].domain for n in g.bound.values()}
        inside = {k: v for k, v in room.items() if spec[k].domain == domain}
        if others or not domain or not fits_around(g, len(g.unbound), c.nodes, inside, ordered=g.strict):
            return None
        return domain
    needs = [m.need() for m in g.members]
    for domain in sorted({n.domain for n in c.nodes if n.domain}):
        inside = {k: v for k, v in room.items() if spec[k].domain == domain}
        if fewest_zones(c.nodes, inside, needs, ordered=g.strict) is not None:
            return domain
    return None


@PROPERTY
@given(domain_mixed())
@example(c=_launcher_and_two_workers())
@example(c=_launcher_and_four_halves())
@example(c=_worker_1_bound())
@example(c=_strict_worker_bound_above())
def test_a_mixed_gang_held_to_one_nvlink_domain_runs_whenever_one_holds_it(c: MixedCluster) -> None:
    g = c.gangs[0]
    spec = {n.name: n for n in c.nodes}
    where, result = within_nvlink(c)
    new = [where[i] for i in g.unbound]
    domain = fits_in_domain(c)
    if domain is None:
        assert not any(new), f"{g.name} placed beyond one NVLink domain: {where}"
        return
    assert all(new), f"{g.name} waits while domain {domain} holds it: {where} {result.verdicts}"
    assert len({spec[n].domain for n in where}) == 1, f"{g.name} spans NVLink domains: {where}"
    if g.bound:
        assert spec[where[0]].domain == domain, f"{g.name} left its siblings' domain {domain}: {where}"
    if g.strict:
        indices = [spec[n].index for n in where]
        assert indices == sorted(indices), f"{g.name} breaks strict rank order: {where}"


def test_a_strict_mixed_gang_its_siblings_domain_holds_only_out_of_order_is_told_so() -> None:
    """Domains b (n0, n1) and a (n2, n3); a strict-order 4-GPU worker, a whole-node worker bound on
    n2 (a) and a launcher. In a, worker 0 fits only on n3, above its sibling: it waits, told of
    rank order (as a gang of one size is), not that it fits only above its NVLink limit."""
    gang = MixedGang("g0", [HALF, WORKER, LAUNCHER], strict=True, bound={1: "n2"})
    where, result = within_nvlink(MixedCluster(_leaf("bbaa"), [gang]))
    assert where == ["", "n2", ""]
    (verdict,) = result.verdicts.values()
    assert verdict.status.reason is Reason.TOPOLOGY_ORDER, verdict.status.message()


def _refusal(c: MixedCluster) -> str:
    """The one verdict of a cycle whose gang waits, as ``/diagnose`` shows it."""
    where, result = within_nvlink(c)
    assert not any(where[i] for i in c.gangs[0].unbound), where
    (status,) = (v.status for v in result.verdicts.values())
    return status.message()


def test_a_mixed_gang_over_its_limit_is_told_a_domains_room_in_its_own_quotas() -> None:
    """A launcher and three whole-node workers on domains a (n0, n1) and b (n2, n3): no domain holds
    the four quotas. Each domain takes two workers and the launcher — 3 of 4, not the 2 its room
    counted in the largest quota (the workers) says."""
    c = MixedCluster(_leaf("aabb"), [MixedGang("g0", [LAUNCHER, WORKER, WORKER, WORKER])])
    assert _refusal(c) == (
        "FitsOnlyAboveAllowedTier(4 quotas fit only across a leaf (tier 1); highestTierAllowed is nvlink "
        "(tier 0), and the roomiest NVLink domain, 1b, takes 3 of 4)"
    )


def test_a_bound_mixed_gang_over_its_limit_is_told_its_siblings_domains_room() -> None:
    """Worker 1 bound on n0 (domain a), n1 full; domain b (n2, n3) empty. The rest — the launcher
    and worker 2 — may only join a, which takes the launcher: 1 of 2 there. Domain b, which would
    take both, is no place the gang can ever use, so naming it misleads the operator."""
    nodes = _leaf("aabb", busy={1: 8})
    c = MixedCluster(nodes, [MixedGang("g0", [LAUNCHER, WORKER, WORKER], bound={1: "n0"})])
    assert _refusal(c) == (
        "FitsOnlyAboveAllowedTier(2 quotas fit only across a leaf (tier 1); highestTierAllowed is nvlink "
        "(tier 0), and its siblings' NVLink domain, 1a, takes 1 of 2)"
    )
