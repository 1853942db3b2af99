"""Scenarios: claiming quotas — two claims racing for one quota, reservations left by deleted pods
and given back to their replacement, and allocate_job giving quotas to pods that name none."""

from __future__ import annotations

from typing import Any

from extender.cache.cache import ClusterCache
from extender.framework.intents import ClaimQuota, ReleaseClaim, ReleaseQuota
from extender.framework.pipeline import place
from extender.framework.session import FitStage, Session
from extender.framework.status import Reason
from extender.scheduler import CycleResult
from tests import builders as b
from tests.core.scenarios import (
    NOW,
    POLICY,
    QUEUE_ANNO,
    binds,
    cycle,
    make_cache,
    racing,
    uid_of,
    write_back,
)


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
