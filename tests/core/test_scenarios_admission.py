"""Scenarios: admission — closed JobQueues block only the jobs they select and have not admitted,
and a pod's queue decides which quotas may serve it."""

from __future__ import annotations

from extender import wellknown
from extender.framework.intents import BindQuota, ClaimQuota, ReleaseClaim
from extender.framework.session import FitStage
from extender.framework.status import Reason
from tests import builders as b
from tests.core.scenarios import (
    binds,
    cycle,
    make_cache,
    uid_of,
)


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
