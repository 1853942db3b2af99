"""A gang whose quotas differ in size (a launcher beside its workers) keeps to one NVLink domain
when one holds it, as a gang of one kind does (docs/placement.md rule 1; DESIGN: placement
minimises the highest tier a gang spans): the domain with the least room that holds it, and by
default never one that would make its ranks share a node. Before, such a gang skipped the domain
tier and took the leaf's lowest nodes across domains.

Through the real conversion, cache and scheduler; one leaf s1, 8 GPUs a node, each node's NVLink
domain (label ``nvidia.com/gpu.clique``) given by a letter of ``domains``."""

from __future__ import annotations

import itertools
from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st

from bench.cache_writes import apply_plan
from extender import wellknown
from extender.binder.plan import plan_writes
from extender.cache.cache import ClusterCache
from extender.conf import default_policy_text, load_policy_text
from extender.scheduler import Scheduler
from tests import builders as b
from tests.core.props import PROPERTY
from tests.core.test_heterogeneous_gang import gang, nodes_of

Obj = dict[str, Any]
LAUNCHER, WORKER, HALF = (None, "2"), (8, "8"), (4, "8")


Member = tuple[int | None, str]


def place(
    domains: str, members: list[Member], *, pack: bool = False, strict: bool = False, busy: list[int] | None = None
) -> list[str]:
    doc = yaml.safe_load(default_policy_text())
    doc["plugins"]["topology"]["pack_workers"] = pack
    policy = load_policy_text(yaml.safe_dump(doc), "test")
    cache = ClusterCache(clock=lambda: 1_800_000_000.0)
    objs: list[Obj] = [b.queue("research")]
    for i, d in enumerate(domains):
        objs += [b.node(f"n{i}", index=i, labels={"nvidia.com/gpu.clique": d}), b.topology(f"n{i}", ["s1"])]
        if busy and busy[i]:  # another job's bound quota and running pod
            bound = {"phase": "QuotaBound", "nodeName": f"n{i}"}
            objs.append(b.quota(f"q-run-{i}", gpu=busy[i], hca=None, status=bound))
            objs.append(b.pod(f"run-{i}", quota=f"q-run-{i}", gpu=busy[i], hca=None, node=f"n{i}", phase="Running"))
    job = gang("g", members)
    if strict:
        job[0]["metadata"].setdefault("annotations", {})[wellknown.ANNO_ENABLE_TOPOLOGY] = "true"
    b.feed(cache, objs + job)
    result = Scheduler(policy).run_once(cache.snapshot())
    apply_plan(cache, plan_writes(cache, result, extra_quotas=cache.take_dirty_quotas()))
    return nodes_of(cache, "g", len(members))


def test_a_launcher_and_its_worker_keep_to_one_domain() -> None:
    # by node index alone n0 (a) and n1 (b): two domains where domain a holds both
    assert place("abab", [LAUNCHER, WORKER]) == ["n0", "n2"]


def test_the_domain_with_the_least_room_that_holds_the_gang() -> None:
    # a has three nodes, b two: b holds the launcher and its worker, a stays whole
    assert place("ababa", [LAUNCHER, WORKER]) == ["n1", "n3"]


def test_by_default_a_domain_never_makes_ranks_share_a_node() -> None:
    # a launcher and two workers: a (two nodes) would hold them with the launcher beside worker 0,
    # but distinct nodes come first; b has three
    assert place("aabbb", [LAUNCHER, WORKER, WORKER]) == ["n2", "n3", "n4"]


def test_with_pack_workers_a_domain_s_room_is_its_slots() -> None:
    # a launcher and four 4-GPU workers packed on two nodes: both of domain a (n0, n2), not the
    # leaf's two lowest (n0 of a, n1 of b); a holds them in 4 slots, as b does: the lower index
    assert place("abab", [LAUNCHER, HALF, HALF, HALF, HALF], pack=True) == ["n0", "n0", "n0", "n2", "n2"]


def test_a_strict_gang_keeps_rank_order_inside_its_domain() -> None:
    # b (n1, n3) is too small for three quotas on distinct nodes; a holds them in rank order
    assert place("ababa", [(1, "2"), WORKER, WORKER], strict=True) == ["n0", "n2", "n4"]


def test_a_full_node_does_not_count_toward_a_domain() -> None:
    # a = n0 (full), n1, n2; b = n3-n6, empty: a holds a launcher and two 4-GPU workers only with
    # the launcher beside a worker (it took n1, n1, n2); b holds them one a node
    assert place("aaabbbb", [(1, "2"), HALF, HALF], busy=[8, 0, 0, 0, 0, 0, 0]) == ["n3", "n4", "n5"]


def test_a_domain_that_holds_the_gang_apart_beats_a_smaller_one_that_shares() -> None:
    # a = n0 (8 free), n1, n2 (2 free each); b = n3-n5, empty: a has a node per quota but holds
    # the two 4-GPU workers only on n0 together; b holds the gang one quota a node
    assert place("aaabbb", [(1, "2"), HALF, HALF], busy=[0, 6, 6, 0, 0, 0]) == ["n3", "n4", "n5"]


def test_distinct_nodes_over_two_domains_beat_one_domain_that_shares() -> None:
    # a = n0 (8 free), n1, n2 (2 free each); b = n3, n4, empty: only a holds the gang, with the
    # two 4-GPU workers together on n0 (it took n1, n0, n0); the leaf holds it one quota a node
    assert place("aaabb", [(1, "2"), HALF, HALF], busy=[0, 6, 6, 0, 0]) == ["n0", "n3", "n4"]


def test_one_domain_beats_two_when_ranks_share_a_node_anyway() -> None:
    # a = n0 (8 free), n1, n2 (2 free each); b = n3: no rank order puts the launcher and both
    # workers on three nodes, so the gang shares a node wherever it goes: all of it in a
    assert place("aaab", [LAUNCHER, HALF, HALF], busy=[0, 6, 6, 0]) == ["n0", "n0", "n0"]


def _in_order_apart(free: list[int], members: list[Member]) -> bool:
    """Exhaustive: the quotas fit distinct nodes whose index ascends with the rank."""
    return any(
        all((gpu or 0) <= free[i] for i, (gpu, _) in zip(at, members, strict=True))
        for at in itertools.combinations(range(len(free)), len(members))
    )


def _fits(nodes: list[int], members: list[Member], *, apart: bool = False) -> bool:
    """Exhaustive: the gang's quotas fit these nodes' free GPUs in some order, sharing nodes (or,
    ``apart``, one quota a node); by default a domain holds a gang only with as many nodes with
    room for some quota as it has quotas."""
    if sum(1 for free in nodes if any((gpu or 0) <= free for gpu, _ in members)) < len(members):
        return False
    for where in itertools.product(range(len(nodes)), repeat=len(members)):
        if apart and len(set(where)) < len(where):
            continue
        used = [0] * len(nodes)
        for i, (gpu, _) in zip(where, members, strict=True):
            used[i] += gpu or 0
        if all(u <= free for u, free in zip(used, nodes, strict=True)):
            return True
    return False


@st.composite
def clusters(draw: st.DrawFn) -> tuple[str, list[int], list[Member]]:
    size = draw(st.integers(2, 5))
    domains = "".join(draw(st.sampled_from("aab")) for _ in range(size))
    busy = [draw(st.sampled_from([0, 0, 4, 6, 8])) for _ in range(size)]
    workers = [(draw(st.sampled_from([2, 4, 8])), "8")] * draw(st.integers(1, 2))
    return domains, busy, [(draw(st.sampled_from([None, 1])), "2"), *workers]


@PROPERTY
@given(clusters())
def test_a_mixed_gang_one_domain_holds_keeps_to_one_domain(c: tuple[str, list[int], list[Member]]) -> None:
    """One NVLink domain never makes ranks share a node: a domain whose nodes take the gang one
    quota a node in rank order (its plan then does) beats one that only shares; the plan inside a
    domain keeps rank order first, so a domain that holds the gang apart only out of order may
    plan it apart or sharing. A domain that holds it only sharing a node is taken when the leaf
    cannot hold it apart in rank order either (ranks share anyway: one domain beats two)."""
    domains, busy, members = c
    where = place(domains, members, busy=busy)
    free = [8 - x for x in busy]
    doms = sorted(set(domains))

    def usable(d: str) -> int:
        return sum(1 for f, e in zip(free, domains, strict=True) if e == d and any((g or 0) <= f for g, _ in members))

    def mine(d: str) -> list[int]:
        return [f for f, e in zip(free, domains, strict=True) if e == d]

    in_order = [d for d in doms if _in_order_apart(mine(d), members)]
    sharing = [d for d in doms if _fits(mine(d), members)]
    leaf_apart = _in_order_apart(free, members)
    distinct = len(set(where)) == len(where)
    if in_order or (sharing and not leaf_apart):
        assert all(w for w in where), (c, where)
        spans = {domains[int(w[1:])] for w in where}
        assert len(spans) == 1, (c, where)
        (d,) = spans
        if distinct:  # apart: never with more room than a domain that holds it apart in rank order
            assert _fits(mine(d), members, apart=True), (c, where)
            assert not in_order or usable(d) <= min(usable(h) for h in in_order), (c, where)
        else:  # sharing only when no domain holds it apart in rank order: the least room of those
            assert not in_order and usable(d) == min(usable(h) for h in sharing), (c, where)
    elif leaf_apart:
        assert distinct, (c, where)
