"""Volcano-uthelper-style scenarios through the real conversion, cache and scheduler (no HTTP).

Each scenario builds API objects (``tests/builders.py``), feeds them to a ``ClusterCache``, runs
``Scheduler(default_policy()).run_once`` and asserts on what the cycle decided: the committed
intents, the final state of the quotas it touched, the per-job verdicts and the session's
ledgers. Between cycles :func:`write_back` plays the binder: it writes the decisions into the
API objects and feeds them back as informer updates.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from extender import wellknown
from extender.cache.cache import ClusterCache
from extender.conf import default_policy
from extender.framework.intents import BindQuota, ClaimQuota, ReleaseClaim, ReleaseQuota
from extender.framework.pipeline import place
from extender.framework.session import FitStage, Session
from extender.framework.status import Reason, summarize
from extender.scheduler import CycleResult, Scheduler
from tests import builders as b
from tests.core.props import cache_state

NOW = 1_800_000_000.0
POLICY = default_policy()
GPU = wellknown.RESOURCE_GPU
HCA = wellknown.RESOURCE_RDMA_HCA
QUEUE_ANNO = {wellknown.ANNO_QUEUE_NAME: "research"}


def make_cache(objs: list[dict[str, Any]], now: float = NOW) -> ClusterCache:
    cache = ClusterCache(clock=lambda: now)
    b.feed(cache, objs)
    assert not cache.conversion_errors, cache.conversion_errors
    cache.check()
    return cache


def cycle(cache: ClusterCache, sched: Scheduler | None = None, now: float = NOW) -> CycleResult:
    sched = sched or Scheduler(POLICY)
    return sched.run_once(cache.snapshot(now))


def bound(result: CycleResult) -> dict[str, str]:
    """Quota → node for every quota the cycle bound (``""``: touched but left unbound)."""
    return {name: q.node_name for name, q in sorted(result.quotas.items())}


def binds(result: CycleResult) -> dict[str, str]:
    return {i.quota: i.node for i in result.intents if isinstance(i, BindQuota)}


def _bump(obj: dict[str, Any]) -> dict[str, Any]:
    new = copy.deepcopy(obj)
    meta = new["metadata"]
    meta["resourceVersion"] = str(int(meta.get("resourceVersion") or "1") + 1)
    return new


def write_back(cache: ClusterCache, result: CycleResult) -> None:
    """What the binder writes after a cycle, delivered back as informer updates."""
    for intent in result.intents:
        if isinstance(intent, ClaimQuota | ReleaseClaim):
            old = cache.pod(intent.task)
            assert old is not None
            new = _bump(old)
            annotations = new["metadata"].setdefault("annotations", {})
            if isinstance(intent, ClaimQuota):
                annotations[wellknown.ANNO_QUOTA_NAME] = intent.quota
            else:
                annotations.pop(wellknown.ANNO_QUOTA_NAME, None)
            cache.on_pod_update(old, new)
    for name, q in result.quotas.items():
        old = cache.quota_object(name)
        assert old is not None
        new = _bump(old)
        new["status"] = {**(old.get("status") or {}), "phase": str(q.phase), "nodeName": q.node_name}
        cache.on_quota_update(old, new)
    cache.check()


def uid_of(cache: ClusterCache, name: str) -> str:
    return next(t.uid for j in cache.jobs.values() for t in j.tasks.values() if t.name == name)


def node_of(result: CycleResult, name: str) -> Any:
    n = result.session.node(name)
    assert n is not None
    return n


# --- the seed example and what follows it ------------------------------------------------------------


def test_seed_example_four_workers_land_on_one_leaf_in_rank_order() -> None:
    cache = make_cache(b.seed_cluster() + b.training_job("train", 4, quota_prefix="q-train"))
    before = {n: c.ledger_state() for n, c in cache.nodes.items()}
    result = cycle(cache)
    assert bound(result) == {"q-train-0": "n0", "q-train-1": "n1", "q-train-2": "n2", "q-train-3": "n3"}
    # one intent per binding, in rank order; nothing else is written
    assert result.intents == [BindQuota(f"q-train-{i}", f"n{i}") for i in range(4)]
    assert result.verdicts == {}
    for i in range(4):  # seed 2.8: quota_idle 7,7 on n0–n3; the pod ledger does not move at hop ②
        n = node_of(result, f"n{i}")
        assert n.quota_idle.get(GPU) == 7000 and n.quota_idle.get(HCA) == 7000
        assert n.idle.get(GPU) == 8000
        assert set(n.quota_allocated) == {f"q-train-{i}"}
    for i in range(4, 8):
        assert node_of(result, f"n{i}").quota_allocated == {}
    assert {n: c.ledger_state() for n, c in cache.nodes.items()} == before  # the cache is untouched


def test_a_second_four_worker_job_packs_into_the_same_leaf() -> None:
    """After the seed job holds one GPU on each of n0–n3, a second identical job also goes to
    leaf s1, n0–n3: both leaves can hold it whole, and namedzone's best fit prefers the zone with
    the least free room (keeping s2 whole for a bigger gang)."""
    cache = make_cache(b.seed_cluster() + b.training_job("train", 4, quota_prefix="q-train"))
    sched = Scheduler(POLICY)
    write_back(cache, cycle(cache, sched))
    assert {n: q.node_name for n, q in cache.quotas.items()} == {f"q-train-{i}": f"n{i}" for i in range(4)}
    b.feed(cache, b.training_job("second", 4))
    result = cycle(cache, sched, NOW + 1)
    assert binds(result) == {f"q-second-{i}": f"n{i}" for i in range(4)}
    for i in range(4):
        n = node_of(result, f"n{i}")
        assert n.quota_idle.get(GPU) == 6000
        assert set(n.quota_allocated) == {f"q-train-{i}", f"q-second-{i}"}
    assert result.verdicts == {}


def test_a_gang_of_five_whole_node_workers_spans_exactly_two_leaves() -> None:
    cache = make_cache(b.seed_cluster() + b.training_job("big", 5, gpu=8, hca=8))
    result = cycle(cache)
    placed = binds(result)
    assert len(placed) == 5
    assert len(set(placed.values())) == 5  # one whole-node quota per node
    leaves = {cache.nodes[n].zone for n in placed.values()}
    assert leaves == {"roce#s1", "roce#s2"}
    assert placed == {f"q-big-{i}": f"n{i}" for i in range(5)}  # all of s1, then the first node of s2
    for n in placed.values():
        assert node_of(result, n).quota_idle.get(GPU) == 0


def mixed_cluster() -> list[dict[str, Any]]:
    """Two leaves; on each leaf two A100 nodes and two H100 nodes (same switch, different GPUs)."""
    objs: list[dict[str, Any]] = []
    for leaf in range(2):
        for i in range(4):
            n = leaf * 4 + i
            objs.append(b.node(f"n{n}", gpu_model="A100" if i < 2 else "H100"))
            objs.append(b.topology(f"n{n}", [f"s{leaf + 1}"]))
    return objs


@pytest.mark.parametrize("workers", [2, 3, 4])
def test_a_job_never_mixes_gpu_models_even_on_one_switch(workers: int) -> None:
    cache = make_cache(mixed_cluster() + b.training_job("mix", workers, gpu=8, hca=8))
    result = cycle(cache)
    placed = binds(result)
    assert len(placed) == workers, result.verdicts
    models = {cache.nodes[n].labels["nvidia.com/gpu.product"] for n in placed.values()}
    assert len(models) == 1
    zones = {cache.nodes[n].zone for n in placed.values()}
    # one leaf would hold 3–4 nodes of mixed models; one model per leaf holds only 2
    assert len(zones) == (1 if workers <= 2 else 2)


def test_a_job_asking_for_a_model_gets_only_that_model() -> None:
    objs = [*mixed_cluster(), b.podgroup("h", min_member=2)]
    for i in range(2):
        objs.append(b.quota(f"q-h-{i}", gpu=8, hca=8, node_selector={"nvidia.com/gpu.product": "H100"}))
        objs.append(b.pod(f"h-{i}", group="h", quota=f"q-h-{i}", gpu=8, hca=8, index=i))
    result = cycle(make_cache(objs))
    assert binds(result) == {"q-h-0": "n2", "q-h-1": "n3"}


# --- gangs that cannot fit ------------------------------------------------------------------------------


def three_free_nodes(topology: bool) -> list[dict[str, Any]]:
    """The seed cluster where five nodes already hold a running 4-GPU quota: only n5–n7 are free."""
    objs = b.seed_cluster()
    for i in range(5):
        objs.append(b.quota(f"busy-{i}", gpu=4, hca=None, status={"phase": "QuotaBound", "nodeName": f"n{i}"}))
        objs.append(
            b.pod(
                f"busy-{i}", quota=f"busy-{i}", gpu=4, hca=None, node=f"n{i}", phase="Running", annotations=QUEUE_ANNO
            )
        )
    return objs + b.training_job("four", 4, gpu=8, hca=8 if topology else None)


@pytest.mark.parametrize("topology", [True, False], ids=["rdma-gang", "plain-gang"])
def test_a_gang_of_four_where_only_three_nodes_fit_binds_nothing(topology: bool) -> None:
    cache = make_cache(three_free_nodes(topology))
    result = cycle(cache)
    assert not [i for i in result.intents if isinstance(i, BindQuota)]
    assert all(not q.node_name for name, q in result.quotas.items() if name.startswith("q-four"))
    for i in range(5, 8):  # discarded: the free nodes are as free as before
        assert node_of(result, f"n{i}").quota_idle.get(GPU) == 8000
    verdict = result.verdicts["default/four"]
    assert not verdict.status.ok
    assert verdict.stage in (FitStage.GANG, FitStage.ZONE_SELECTION, FitStage.NODE_PREDICATES)


@pytest.mark.parametrize("topology", [True, False], ids=["rdma-gang", "plain-gang"])
def test_the_verdict_of_a_gang_that_cannot_fit_says_why(topology: bool) -> None:
    """The user must read *why*: no zone holds 4 whole nodes (topology), or which nodes refuse
    the 4th quota and why (``5 nodes: InsufficientQuotaIdle(nvidia.com/gpu 8 > 4)``)."""
    result = cycle(make_cache(three_free_nodes(topology)))
    verdict = result.verdicts["default/four"]
    if topology:
        assert verdict.stage is FitStage.ZONE_SELECTION
        assert verdict.status.message() == "NoZoneFits(no zone holds 4×8 GPU: the roomiest, roce#s2, takes 3 of 4)"
    else:
        # the first three quotas took n5–n7; the fourth finds every node short, and says how
        assert verdict.stage is FitStage.NODE_PREDICATES
        assert verdict.quota == "q-four-3"
        assert verdict.per_node is not None
        assert summarize(verdict.per_node) == [
            "5 nodes: InsufficientQuotaIdle(nvidia.com/gpu 8 > 4)",
            "3 nodes: InsufficientQuotaIdle(nvidia.com/gpu 8 > 0)",
        ]


# --- static binding, quota affinity -----------------------------------------------------------------------


def test_a_quota_with_static_bind_node_is_pinned_there() -> None:
    cache = make_cache([*b.seed_cluster(), b.quota("pinned", gpu=8, hca=None, static_bind_node="n5")])
    result = cycle(cache)
    assert result.intents == [BindQuota("pinned", "n5")]
    assert node_of(result, "n5").quota_idle.get(GPU) == 0
    # a static quota is never released as idle, even with no claimant
    write_back(cache, result)
    again = cycle(cache, now=NOW + 100)
    assert not [i for i in again.intents if isinstance(i, ReleaseQuota)]


def with_node(objs: list[dict[str, Any]], replacement: dict[str, Any]) -> list[dict[str, Any]]:
    """``objs`` with the Node of the same name replaced."""
    name = replacement["metadata"]["name"]
    return [replacement if o["kind"] == "Node" and o["metadata"]["name"] == name else o for o in objs]


def test_a_static_bind_node_that_is_not_ready_is_not_used() -> None:
    objs = with_node(b.seed_cluster(), b.node("n5", ready=False))
    cache = make_cache([*objs, b.quota("pinned", gpu=1, hca=None, static_bind_node="n5")])
    assert not cache.nodes["n5"].ready
    result = cycle(cache)
    assert binds(result) == {}


def test_the_tq_pipeline_prefers_a_statically_bound_quota_over_a_free_one() -> None:
    cache = make_cache(
        [
            *b.seed_cluster(),
            b.quota("free", gpu=1, hca=None),
            b.quota("pinned", gpu=1, hca=None, static_bind_node="n5"),
            b.pod("p", gpu=1, hca=None, annotations=QUEUE_ANNO),
        ]
    )
    ssn = Session(cache.snapshot(NOW), POLICY)
    task = ssn.task(uid_of(cache, "p"))
    result = place(ssn.tq, task, list(ssn.quotas_of_queue("research")))
    assert result.choice is not None and result.choice.name == "pinned"


def anti_pair(anti_on: str) -> list[dict[str, Any]]:
    a_aff = {"quotaAntiAffinity": [{"quotaNames": ["qb"]}]} if anti_on == "qa" else None
    b_aff = {"quotaAntiAffinity": [{"quotaNames": ["qa"]}]} if anti_on == "qb" else None
    return [
        b.quota("qa", gpu=1, hca=None, affinity=a_aff),
        b.quota("qb", gpu=1, hca=None, affinity=b_aff),
        b.pod("pa", quota="qa", gpu=1, hca=None, annotations=QUEUE_ANNO),
        b.pod("pb", quota="qb", gpu=1, hca=None, annotations=QUEUE_ANNO),
    ]


def test_without_anti_affinity_binpack_puts_two_small_quotas_together() -> None:
    """The control for the next test: the default policy packs both quotas onto one node."""
    objs = b.seed_cluster(leaves=1, per_leaf=2) + anti_pair("none")
    placed = binds(cycle(make_cache(objs)))
    assert len(set(placed.values())) == 1


@pytest.mark.parametrize("anti_on", ["qa", "qb"])
def test_quota_anti_affinity_keeps_two_quotas_apart_whichever_declares_it(anti_on: str) -> None:
    objs = b.seed_cluster(leaves=1, per_leaf=2) + anti_pair(anti_on)
    placed = binds(cycle(make_cache(objs)))
    assert set(placed) == {"qa", "qb"}
    assert placed["qa"] != placed["qb"]


def test_quota_anti_affinity_with_one_node_leaves_the_second_unbound_and_says_why() -> None:
    objs = b.seed_cluster(leaves=1, per_leaf=1) + anti_pair("qb")
    result = cycle(make_cache(objs))
    assert binds(result) == {"qa": "n0"}
    verdict = result.verdicts["default/pb"]
    assert verdict.quota == "qb"
    assert verdict.per_node is not None
    assert verdict.per_node["n0"].reason is Reason.QUOTA_ANTI_AFFINITY


def test_quota_affinity_by_label_follows_the_bound_quota() -> None:
    objs = [
        *b.seed_cluster(leaves=1, per_leaf=4),
        b.quota("leader", gpu=1, hca=None, labels={"team": "x"}, status={"phase": "QuotaBound", "nodeName": "n2"}),
        b.pod("lead", quota="leader", gpu=1, hca=None, node="n2", phase="Running", annotations=QUEUE_ANNO),
        b.quota(
            "follower", gpu=1, hca=None, affinity={"quotaAffinity": [{"labelSelector": {"matchLabels": {"team": "x"}}}]}
        ),
        b.pod("follow", quota="follower", gpu=1, hca=None, annotations=QUEUE_ANNO),
    ]
    assert binds(cycle(make_cache(objs))) == {"follower": "n2"}


# --- self-healing, admission, races, reservations ---------------------------------------------------------


def drifted() -> list[dict[str, Any]]:
    """The seed job after the fact: every quota bound n0–n3, but worker-1 runs on n4."""
    objs = [*b.seed_cluster(), b.podgroup("train", min_member=4)]
    for i in range(4):
        objs.append(b.quota(f"q-train-{i}", status={"phase": "QuotaBound", "nodeName": f"n{i}"}))
        node = "n4" if i == 1 else f"n{i}"
        objs.append(
            b.pod(f"train-worker-{i}", group="train", quota=f"q-train-{i}", index=i, node=node, phase="Running")
        )
    return objs


def test_fix_quota_binding_moves_a_drifted_quota_to_where_its_pod_runs() -> None:
    cache = make_cache(drifted())
    assert cache.nodes["n1"].quota_allocated.keys() == {"q-train-1"}
    sched = Scheduler(POLICY)
    assert sched.memory.last_fix == 0.0
    result = cycle(cache, sched)
    assert bound(result) == {"q-train-1": "n4"}
    assert result.intents == [ReleaseQuota("q-train-1", "n1", "its pods run on n4"), BindQuota("q-train-1", "n4")]
    n1, n4 = node_of(result, "n1"), node_of(result, "n4")
    assert n1.quota_allocated == {}
    assert n1.quota_idle.get(GPU) == 8000 and n1.quota_idle.get(HCA) == 8000
    assert n4.quota_allocated.keys() == {"q-train-1"}
    assert n4.quota_idle.get(GPU) == 7000 and n4.quota_idle.get(HCA) == 7000
    n1.check()
    n4.check()
    assert cache.nodes["n1"].quota_allocated.keys() == {"q-train-1"}  # the cache moves only on write-back
    assert sched.memory.last_fix == NOW


def test_fix_quota_binding_full_rebuild_is_throttled_the_drift_a_pod_event_showed_is_not() -> None:
    cache = make_cache(drifted())
    sched = Scheduler(POLICY)
    cycle(cache, sched)
    assert sched.memory.last_fix == NOW
    # nothing written back: the drift is still there and is fixed again at once (the cache saw
    # the pod on n4), but the full rebuild waits min_interval_seconds (10)
    soon = cycle(cache, sched, NOW + 5)
    assert binds(soon) == {"q-train-1": "n4"}
    assert soon.notes["fix_quota_binding"]["ran"] is False and sched.memory.last_fix == NOW
    again = cycle(cache, sched, NOW + 11)
    assert binds(again) == {"q-train-1": "n4"}
    assert sched.memory.last_fix == NOW + 11


def test_a_quota_whose_pods_are_scattered_is_reported_not_moved() -> None:
    objs = [
        *b.seed_cluster(),
        b.podgroup("pair", min_member=2),
        b.quota("shared", gpu=2, hca=None, status={"phase": "QuotaBound", "nodeName": "n0"}),
    ]
    objs += [
        b.pod(f"pair-{i}", group="pair", quota="shared", gpu=1, hca=None, index=i, node=f"n{i + 1}", phase="Running")
        for i in range(2)
    ]
    result = cycle(make_cache(objs))
    assert result.intents == []
    assert result.notes["fix_quota_binding"]["scattered"] == [("shared", ["n1", "n2"])]


def test_a_closed_jobqueue_blocks_a_job_that_has_no_quota_yet() -> None:
    objs = [
        *b.seed_cluster(),
        b.quota("q0", gpu=1, hca=None),
        b.jobqueue("nightly", selector={"matchLabels": {"batch": "nightly"}}, state="Closed"),
        b.podgroup("etl", min_member=1, labels={"batch": "nightly"}),
        b.pod("etl-0", group="etl", gpu=1, hca=None, index=0),
    ]
    result = cycle(make_cache(objs))
    verdict = result.verdicts["default/etl"]
    assert verdict.stage is FitStage.JOB_QUEUE
    assert verdict.status.reason is Reason.JOB_BLOCKED_BY_JOB_QUEUE
    assert "nightly" in verdict.status.message()
    assert not [i for i in result.intents if isinstance(i, ClaimQuota)]


def test_a_closed_jobqueue_does_not_block_jobs_it_does_not_select_or_already_admitted() -> None:
    objs = [
        *b.seed_cluster(),
        b.jobqueue("nightly", selector={"matchLabels": {"batch": "nightly"}}, state="Closed"),
        b.podgroup("etl", min_member=1, labels={"batch": "nightly"}),
        b.quota("q-etl", gpu=1, hca=None),
        b.pod("etl-0", group="etl", quota="q-etl", gpu=1, hca=None, index=0),  # admitted: holds a quota
        b.podgroup("other", min_member=1, labels={"batch": "daytime"}),
        b.pod("other-0", group="other", gpu=1, hca=None, index=0),
    ]
    result = cycle(make_cache(objs))
    assert "q-etl" in binds(result)
    for key in ("default/etl", "default/other"):
        v = result.verdicts.get(key)
        assert v is None or v.status.reason is not Reason.JOB_BLOCKED_BY_JOB_QUEUE


def racing(free_quota: bool) -> list[dict[str, Any]]:
    objs = [*b.seed_cluster(leaves=1, per_leaf=2), b.quota("q1", gpu=1, hca=None)]
    if free_quota:
        objs.append(b.quota("q2", gpu=1, hca=None))
    objs += [
        b.pod("early", quota="q1", gpu=1, hca=None, annotations=QUEUE_ANNO, created="2026-11-29T08:00:00Z"),
        b.pod("late", quota="q1", gpu=1, hca=None, annotations=QUEUE_ANNO, created="2026-11-29T08:00:05Z"),
    ]
    return objs


def lost_race(result: CycleResult, uid: str) -> str:
    """The quota ``uid``'s claim was taken from for over-claiming ("" if none)."""
    lost = [i for i in result.intents if isinstance(i, ReleaseClaim) and i.task == uid]
    if not lost:
        return ""
    (release,) = lost
    assert "over-claimed" in release.reason, release.reason
    return release.quota


def test_two_claims_racing_for_one_quota_the_later_loses_and_takes_the_free_one() -> None:
    cache = make_cache(racing(free_quota=True))
    assert cache.quotas["q1"].over_claimed()  # the API says both claim it (two webhook replicas raced)
    early, late = uid_of(cache, "early"), uid_of(cache, "late")
    result = cycle(cache)
    assert lost_race(result, late) == "q1"
    assert ClaimQuota(late, "default", "late", "q2") in result.intents
    assert not [i for i in result.intents if isinstance(i, ReleaseClaim | ClaimQuota) and i.task == early]
    ssn = result.session
    for q in ssn.quotas():  # invariant 3 holds again
        assert not q.over_claimed()
    t_early, t_late = ssn.task(early), ssn.task(late)
    assert t_early is not None and t_late is not None
    assert (t_early.quota, t_late.quota) == ("q1", "q2")
    assert set(binds(result)) == {"q1", "q2"}


def test_two_claims_racing_without_a_spare_quota_the_loser_waits_with_a_reason() -> None:
    cache = make_cache(racing(free_quota=False))
    late = uid_of(cache, "late")
    result = cycle(cache)
    assert lost_race(result, late) == "q1"
    t = result.session.task(late)
    assert t is not None and t.quota == ""
    verdict = result.verdicts["default/late"]
    assert verdict.stage is FitStage.QUOTA_ASSIGNMENT
    assert verdict.status.reason in (Reason.NO_QUOTA, Reason.INSUFFICIENT_QUOTA)
    assert not result.session.quota("q1").over_claimed()  # type: ignore[union-attr]


def reservation_cluster() -> tuple[ClusterCache, dict[str, Any]]:
    """q-a held by worker-0 of job train (running on n0); q-b bound to n1 and free."""
    worker = b.pod("train-worker-0", group="train", quota="q-a", gpu=1, hca=None, index=0, node="n0", phase="Running")
    cache = make_cache(
        [
            *b.seed_cluster(leaves=1, per_leaf=2),
            b.podgroup("train", min_member=1),
            b.quota("q-a", gpu=1, hca=None, status={"phase": "QuotaBound", "nodeName": "n0"}),
            b.quota("q-b", gpu=1, hca=None, status={"phase": "QuotaBound", "nodeName": "n1"}),
            worker,
        ]
    )
    return cache, worker


def test_deleting_a_pod_that_holds_a_quota_leaves_a_reservation() -> None:
    cache, worker = reservation_cluster()
    cache.on_pod_delete(worker)
    (r,) = cache.quotas["q-a"].reserved
    assert (r.job, r.index, r.pod_name, r.reason) == ("default/train", 0, "train-worker-0", "Deleted")
    assert r.expires_at == NOW + cache.reservation_ttl
    assert not cache.quotas["q-a"].claims
    # the reservation keeps the quota bound: release_quota does not take it back while it lives
    result = cycle(cache)
    assert not [i for i in result.intents if isinstance(i, ReleaseQuota) and i.quota == "q-a"]


def test_the_tq_pipeline_gives_the_restarted_pod_its_reserved_quota_and_refuses_strangers() -> None:
    cache, worker = reservation_cluster()
    cache.on_pod_delete(worker)
    b.feed(
        cache,
        [
            b.pod("train-worker-0", group="train", gpu=1, hca=None, index=0),  # recreated: same job and index
            b.pod("stranger", gpu=1, hca=None, annotations=QUEUE_ANNO),
        ],
    )
    ssn = Session(cache.snapshot(NOW), POLICY)
    quotas = list(ssn.quotas_of_queue("research"))
    restarted = ssn.task(uid_of(cache, "train-worker-0"))
    got = place(ssn.tq, restarted, quotas)
    assert got.choice is not None and got.choice.name == "q-a"
    stranger = place(ssn.tq, ssn.task(uid_of(cache, "stranger")), quotas)
    assert stranger.choice is not None and stranger.choice.name == "q-b"
    assert stranger.failures["q-a"].reason is Reason.QUOTA_RESERVED


def test_pods_without_a_quota_get_one_from_allocate_job() -> None:
    cache = make_cache(b.seed_cluster() + b.training_job("train", 4, claim=False))
    result = cycle(cache)
    claims = {i.name: i.quota for i in result.intents if isinstance(i, ClaimQuota)}
    assert len(claims) == 4
    assert len(set(claims.values())) == 4  # one whole quota per worker
    assert "default/train" not in result.verdicts or result.verdicts["default/train"].stage > FitStage.GANG


def test_a_restarted_pod_gets_its_reserved_quota_back_through_allocate_job() -> None:
    cache, worker = reservation_cluster()
    cache.on_pod_delete(worker)
    b.feed(cache, [b.pod("train-worker-0", group="train", gpu=1, hca=None, index=0)])
    new_uid = uid_of(cache, "train-worker-0")
    result = cycle(cache)
    assert ClaimQuota(new_uid, "default", "train-worker-0", "q-a") in result.intents
    write_back(cache, result)
    assert cache.quotas["q-a"].reserved == ()  # the reservation did its job
    assert set(cache.quotas["q-a"].claims) == {new_uid}


def test_a_lone_pod_without_a_queue_annotation_is_in_the_queue_of_the_quota_it_names() -> None:
    cache = make_cache(
        [*b.seed_cluster(leaves=1, per_leaf=1), b.quota("qr", gpu=1, hca=None), b.pod("p", quota="qr", gpu=1, hca=None)]
    )
    assert cache.jobs["default/p"].queue == "research"
    result = cycle(cache)
    assert result.intents == [BindQuota("qr", "n0")]


def test_quotas_must_serve_the_job_queue() -> None:
    """A pod in queue "batch" naming a quota of queue "research" loses that claim, with a reason
    that says so, and the quota is not bound for it."""
    batch = {wellknown.ANNO_QUEUE_NAME: "batch"}
    cache = make_cache(
        [
            *b.seed_cluster(leaves=1, per_leaf=1),
            b.quota("qr", gpu=1, hca=None),
            b.pod("p", quota="qr", gpu=1, hca=None, annotations=batch),
        ]
    )
    uid = uid_of(cache, "p")
    result = cycle(cache)
    (release,) = [i for i in result.intents if isinstance(i, ReleaseClaim)]
    assert release.task == uid
    assert "QuotaQueueMismatch" in release.reason
    assert result.session.quota("qr").claims == {}  # type: ignore[union-attr]
    assert binds(result) == {}


def test_the_cycle_never_mutates_the_cache() -> None:
    """Drift, a race, an over-full gang and new bindings in one cycle: the cache stays as it was."""
    objs = three_free_nodes(True) + racing(free_quota=True)[4:]  # skip racing()'s own two nodes
    objs += [o for o in drifted() if o["kind"] in ("Quota", "Pod", "PodGroup")]
    cache = make_cache(objs)
    before = cache_state(cache)
    result = cycle(cache)
    assert binds(result)  # the cycle did decide things …
    assert any(isinstance(i, ReleaseClaim) for i in result.intents)
    assert cache_state(cache) == before  # … in its own copy-on-write overlay only
