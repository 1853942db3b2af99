"""The topology plugin's memo of which nodes take a quota of a given shape, seen from outside.

allocate_zone offers each quota the nodes of its job's zones in rank order, skipping nodes known
not to take a quota of that shape. A node a bind touched since it was memoized is offered as it
is — unless its quota ledger has no room left for the request (the bind would be refused); when
the pipeline rejects it, the plugin learns that (``Rejectable``) instead of looking at the node
again itself. These tests pin what the memo may and may not do:

* a touched node without room for the request is not offered, and not looked at;
* a node the pipeline rejected is not offered to a quota of the same shape again — and is not
  even looked at for it (no predicate call);
* a rejection says nothing about another shape: a smaller quota still gets the node;
* a release on the node makes it a candidate again;
* planning sees the rejection: the zone's capacity for the shape drops;
* a quota that another quota's anti-affinity repels (by name or label) has no shape: its
  rejection teaches nothing to quotas that only look like it;
* differential: random clusters (with such anti-affinity) bind the same with and without memo.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from unittest import mock

from hypothesis import given
from hypothesis import strategies as st

from extender import wellknown
from extender.actions.allocate_quota import bind_job_quotas
from extender.actions.allocate_zone import Action as AllocateZone
from extender.cache.cache import ClusterCache
from extender.conf import default_policy
from extender.framework.intents import BindQuota
from extender.framework.session import Session
from extender.framework.status import Reason, Status
from extender.plugins import topology
from extender.scheduler import Scheduler
from tests import builders as b
from tests.core.props import PROPERTY
from tests.core.test_topology_property import Cluster, clusters

NOW = 1_800_000_000.0
POLICY = default_policy()


TAINT = {"key": "maintenance", "value": "true", "effect": "NoSchedule"}


def session(*, taint_n0: bool = False) -> Session:
    cluster = b.seed_cluster(leaves=1, per_leaf=4)
    if taint_n0:  # n0 repels every quota below: none tolerates the taint
        cluster[0] = b.node("n0", gpu_model="A100", taints=[TAINT])
    tolerant = b.training_job("tolerant", 1, gpu=2)  # like small, but its quota and pod tolerate the taint
    for obj in tolerant:
        if obj["kind"] in ("Pod", wellknown.KIND_QUOTA):
            obj["spec"]["tolerations"] = [{"key": TAINT["key"], "operator": "Exists"}]
    objs = [
        *cluster,
        b.quota("filler", gpu=4, hca=None),  # bound by hand onto n0 below: 4 of its 8 GPUs
        *b.training_job("big-a", 2, gpu=8),
        *b.training_job("big-b", 1, gpu=8),
        *b.training_job("big-c", 2, gpu=8),
        *b.training_job("small", 1, gpu=2),
        *tolerant,
    ]
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, objs)
    assert not cache.conversion_errors
    return Session(cache.snapshot(NOW), POLICY)


def candidates(ssn: Session, job: str, quota: str) -> list[str]:
    j, q = ssn.job(f"default/{job}"), ssn.quota(quota)
    assert j is not None and q is not None
    zone = ssn.stages.zone_candidates(j, q)
    assert zone is not None and not isinstance(zone, Status)
    return list(zone)


def count_predicates(ssn: Session) -> dict[str, int]:
    """Count QN predicate calls per node from now on (the bundle resolves its stages lazily)."""
    seen: dict[str, int] = {}
    inner: Callable[..., Status] = ssn.qn.predicate

    def counting(quota: Any, node: Any) -> Status:
        seen[node.name] = seen.get(node.name, 0) + 1
        return inner(quota, node)

    ssn.qn.predicate = counting  # type: ignore[method-assign]
    return seen


def place_job(ssn: Session, job: str) -> bool:
    j = ssn.job(f"default/{job}")
    assert j is not None
    quotas = [q for q in ssn.job_quotas(j) if not q.node_name]
    return bind_job_quotas(
        ssn, j, quotas, AllocateZone.candidates(ssn, j), rank_ordered=ssn.qn.rank_ordered, stop_after=None
    )


def bind_by_hand(ssn: Session, quota: str, node: str) -> None:
    stmt = ssn.statement()
    stmt.allocate_quota_to_node(quota, node)
    stmt.commit()


def test_a_touched_node_without_room_for_the_request_is_not_offered() -> None:
    ssn = session()
    assert candidates(ssn, "big-a", "q-big-a-0")[:2] == ["n0", "n1"]  # planned: n0 memoized as fitting
    bind_by_hand(ssn, "filler", "n0")  # n0 keeps 4 GPUs: too few for an 8-GPU quota now
    seen = count_predicates(ssn)
    assert candidates(ssn, "big-a", "q-big-a-0")[0] == "n1"
    assert seen.get("n0", 0) == 0  # the ledger says so: no predicate call
    assert place_job(ssn, "big-a")
    placed = {q: ssn.quota(q).node_name for q in ("q-big-a-0", "q-big-a-1")}  # type: ignore[union-attr]
    assert placed == {"q-big-a-0": "n1", "q-big-a-1": "n2"}
    assert candidates(ssn, "small", "q-small-0")[0] == "n0"  # another shape: 4 GPUs are room for 2


def release_by_hand(ssn: Session, quota: str) -> None:
    stmt = ssn.statement()
    stmt.release_quota(quota, "test")
    stmt.commit()


def test_a_node_the_pipeline_rejected_is_not_offered_again_to_the_same_shape() -> None:
    ssn = session(taint_n0=True)
    assert candidates(ssn, "big-a", "q-big-a-0") == ["n1", "n2", "n3"]  # n0 memoized: the taint
    bind_by_hand(ssn, "filler", "n0")  # (by hand: the taint does not stop a statement)
    release_by_hand(ssn, "filler")  # room given back: n0 might fit now
    assert candidates(ssn, "big-a", "q-big-a-0")[0] == "n0"  # touched since: offered as it is

    assert place_job(ssn, "big-a")  # the pipeline rejects n0 (the taint)
    placed = {q: ssn.quota(q).node_name for q in ("q-big-a-0", "q-big-a-1")}  # type: ignore[union-attr]
    assert placed == {"q-big-a-0": "n1", "q-big-a-1": "n2"}

    seen = count_predicates(ssn)
    offered = candidates(ssn, "big-b", "q-big-b-0")  # the same shape
    assert "n0" not in offered  # rejected for this shape: skipped …
    assert seen.get("n0", 0) == 0  # … without being looked at again
    assert offered == ["n3"]  # n1 and n2 are full: no room left for 8 GPUs
    assert place_job(ssn, "big-b")
    assert ssn.quota("q-big-b-0").node_name == "n3"  # type: ignore[union-attr]


def test_a_rejection_for_one_shape_leaves_other_shapes_alone() -> None:
    ssn = session(taint_n0=True)
    assert "n0" not in candidates(ssn, "small", "q-small-0")  # memoized: the taint
    assert candidates(ssn, "tolerant", "q-tolerant-0")[0] == "n0"  # memoized: it fits
    bind_by_hand(ssn, "filler", "n0")
    release_by_hand(ssn, "filler")  # touched: both shapes look at n0 again
    assert place_job(ssn, "small")  # the pipeline rejects n0 (the taint), learnt for small's shape
    assert ssn.quota("q-small-0").node_name == "n1"  # type: ignore[union-attr]
    assert candidates(ssn, "tolerant", "q-tolerant-0")[0] == "n0"  # not for the other shape
    assert place_job(ssn, "tolerant")
    assert ssn.quota("q-tolerant-0").node_name == "n0"  # type: ignore[union-attr]


def test_a_release_makes_a_rejected_node_a_candidate_again() -> None:
    ssn = session()
    candidates(ssn, "big-a", "q-big-a-0")
    bind_by_hand(ssn, "filler", "n0")  # 4 GPUs left: no room for 8
    assert place_job(ssn, "big-a")
    assert "n0" not in candidates(ssn, "big-b", "q-big-b-0")
    release_by_hand(ssn, "filler")
    assert candidates(ssn, "big-b", "q-big-b-0")[0] == "n0"
    assert place_job(ssn, "big-b")
    assert ssn.quota("q-big-b-0").node_name == "n0"  # type: ignore[union-attr]


def test_planning_counts_a_rejected_node_out_of_the_zone() -> None:
    """After the rejection only n3 is left for 8-GPU quotas: a two-worker job no longer fits the
    leaf, and says so, instead of being planned into it and failing node by node."""
    ssn = session()
    candidates(ssn, "big-a", "q-big-a-0")
    stmt = ssn.statement()
    stmt.allocate_quota_to_node("filler", "n0")
    stmt.commit()
    assert place_job(ssn, "big-a")  # n1, n2
    assert not place_job(ssn, "big-c")
    verdict = ssn.verdicts["default/big-c"]
    assert verdict.status.reason is Reason.NO_ZONE_FITS, verdict
    assert "no zone holds 2×8 GPU" in verdict.status.message()


# --- differential: the memo never changes an answer ----------------------------------------------
def placements(c: Cluster, *, memo: bool) -> tuple[dict[str, str], dict[str, bool]]:
    """(quota → node, job → placed) after one cycle; without the memo when ``memo`` is False (no
    quota gets a shape, so every node is looked at by the pipeline every time)."""
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, c.objects())
    if memo:
        result = Scheduler(POLICY).run_once(cache.snapshot(NOW))
    else:
        with mock.patch.object(topology, "_shape", lambda ssn, quota: None):
            result = Scheduler(POLICY).run_once(cache.snapshot(NOW))
    bound = {i.quota: i.node for i in result.intents if isinstance(i, BindQuota)}
    placed = {g.name: all(q in bound for q in g.quotas) for g in c.gangs}
    return bound, placed


@st.composite
def repelling_clusters(draw: st.DrawFn) -> Cluster:
    """Clusters of up to six gangs where some busy quotas repel some gang quotas by name."""
    c = draw(clusters(max_gangs=6))
    names = [f"q-{g.name}-{i}" for g in c.gangs for i in range(g.workers)]
    for n in c.nodes:
        if n.busy and draw(st.booleans()):
            c.repel[n.name] = draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))
    return c


@PROPERTY
@given(repelling_clusters())
def test_the_memo_never_changes_where_a_quota_goes(c: Cluster) -> None:
    """Skipping nodes known not to fit, learning rejections, scanning zones only as far as the
    gang needs and keeping zone views per gang class are shortcuts: the same cluster scheduled
    without any of them binds exactly the same quotas to exactly the same nodes — also where
    quota anti-affinity repels some quotas of a shape and not others."""
    with_memo = placements(c, memo=True)
    for g in c.gangs:
        g.quotas.clear()  # objects() fills them again
    assert placements(c, memo=False) == with_memo


def test_a_quota_another_repels_by_name_does_not_teach_its_shape_to_skip_the_node() -> None:
    """The loner repels q-small-0 by name only: q-twin-0, of the same request and claimants, is
    welcome on n0. The rejection of the one must not make the other skip n0."""
    objs = [
        *b.seed_cluster(leaves=1, per_leaf=4),
        b.quota("loner", gpu=1, hca=None, affinity={"quotaAntiAffinity": [{"quotaNames": ["q-small-0"]}]}),
        *b.training_job("small", 1, gpu=2),
        *b.training_job("twin", 1, gpu=2),
    ]
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, objs)
    ssn = Session(cache.snapshot(NOW), POLICY)
    candidates(ssn, "small", "q-small-0")
    bind_by_hand(ssn, "loner", "n0")
    assert place_job(ssn, "small")
    assert ssn.quota("q-small-0").node_name == "n1"  # type: ignore[union-attr]  # repelled from n0
    assert candidates(ssn, "twin", "q-twin-0")[0] == "n0"
    assert place_job(ssn, "twin")
    assert ssn.quota("q-twin-0").node_name == "n0"  # type: ignore[union-attr]
