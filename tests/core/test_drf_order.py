"""Job order within a queue (drf): the share is what a job has *placed*, not what it claims, so
waiting gangs go by age and a big gang is not always passed by smaller ones."""

from __future__ import annotations

from typing import Any

from extender.cache.cache import ClusterCache
from extender.conf import default_policy
from extender.scheduler import Scheduler
from tests import builders as b

NOW = 1_800_000_000.0


def created(objs: list[dict[str, Any]], ts: str) -> list[dict[str, Any]]:
    for o in objs:
        o["metadata"]["creationTimestamp"] = ts
    return objs


def run(objs: list[dict[str, Any]]) -> dict[str, str]:
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, objs)
    assert not cache.conversion_errors
    ssn = Scheduler(default_policy()).run_once(cache.snapshot(NOW)).session
    return {q.name: q.node_name for q in ssn.quotas() if q.name.startswith("q-")}


def cluster() -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [b.queue("research")]
    for i in range(4):
        objs += [b.node(f"n{i}"), b.topology(f"n{i}", ["s1"])]
    return objs


def test_the_older_big_gang_goes_before_a_younger_small_one() -> None:
    big = created(b.training_job("big", 3, gpu=8), "2026-01-01T00:00:00Z")
    small = created(b.training_job("small", 2, gpu=8), "2026-01-01T00:05:00Z")
    where = run(cluster() + big + small)
    assert all(where[f"q-big-{i}"] for i in range(3)), where
    assert not any(where[f"q-small-{i}"] for i in range(2)), where


def test_a_job_that_already_runs_goes_after_one_that_has_nothing() -> None:
    """Placed work counts: a job with a running worker waits behind an empty one for the rest
    (by claims, the younger 3-worker job would have the larger share and wait)."""
    first = created(b.training_job("first", 2, gpu=8, min_member=1), "2026-01-01T00:00:00Z")
    for o in first:
        if o["kind"] == "Quota" and o["metadata"]["name"] == "q-first-0":
            o["status"] = {"phase": "QuotaBound", "nodeName": "n0"}
        if o["kind"] == "Pod" and o["metadata"]["name"] == "first-worker-0":
            o["spec"]["nodeName"] = "n0"
            o["status"]["phase"] = "Running"
    second = created(b.training_job("second", 3, gpu=8), "2026-01-01T00:05:00Z")
    where = run(cluster() + first + second)
    assert all(where[f"q-second-{i}"] for i in range(3)), where
    assert not where["q-first-1"], where
