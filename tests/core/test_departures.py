"""``extender/cache/departures.py``: which ``status.tasks`` entries of a freshly synced cache are
pods that went while no replica watched, and what place each keeps (the rules of a watching
replica's pod deletion, ``pod_events._remove_task``)."""

from __future__ import annotations

from typing import Any

import pytest

from extender.cache import departures
from extender.cache.cache import ClusterCache
from extender.cache.convert import format_time
from tests import builders as b
from tests.core.scenarios import NOW, make_cache


def entry(name: str, *, job: str = "default/train", index: int | None = 1, **extra: Any) -> dict[str, Any]:
    """A pod's entry as the binder leader writes it into ``status.tasks``."""
    out: dict[str, Any] = {"uid": f"uid-{name}", "namespace": "default", "name": name, "job": job, "phase": "Running"}
    out["request"] = {"nvidia.com/gpu": "8", "rdma/hca": "1"}
    if index is not None:
        out["taskIndex"] = index
    return out | extra


def cache_with(tasks: list[dict[str, Any]], *objs: dict[str, Any], podgroup: bool = True) -> ClusterCache:
    status = {"phase": "QuotaBound", "nodeName": "n1", "tasks": tasks}
    quota = b.quota("q-train-1", gpu=8, hca=1, status=status)
    return make_cache([b.node("n1"), quota, *([b.podgroup("train", min_member=2)] if podgroup else []), *objs])


def test_a_pod_entry_whose_pod_is_gone_keeps_its_place_as_deleted() -> None:
    cache = cache_with([entry("train-worker-1")])
    (d,) = departures.unseen(cache)
    assert (d.quota, d.uid, d.name, d.job, d.index) == ("q-train-1", "uid-train-worker-1", "train-worker-1",
                                                        "default/train", 1)  # fmt: skip
    assert departures.adopt(cache, d, None)
    (r,) = cache.quotas["q-train-1"].reserved
    assert (r.pod_uid, r.reason, r.expires_at) == ("uid-train-worker-1", "Deleted", NOW + cache.reservation_ttl)
    assert "uid-train-worker-1" in cache.pending_reservations["q-train-1"], "the leader writes it next cycle"
    assert "q-train-1" in cache.dirty_quotas
    assert departures.unseen(cache) == [], "a kept place is not kept twice"


@pytest.mark.parametrize(
    ("why", "tasks", "podgroup"),
    [
        ("an in-flight claim (it expires by itself)", [entry("w", expiresAt="2026-12-01T00:00:00Z")], True),
        ("a finished task's entry", [entry("train-worker-1", phase="Succeeded")], True),
        ("its group's PodGroup is gone: the job is", [entry("train-worker-1")], False),
        ("an unreadable entry", [entry("train-worker-1", request={"nvidia.com/gpu": "many"})], True),
    ],
)
def test_entries_that_keep_no_place(why: str, tasks: list[dict[str, Any]], podgroup: bool) -> None:
    assert departures.unseen(cache_with(tasks, podgroup=podgroup)) == [], why


def test_a_lone_pod_keeps_its_place_without_a_podgroup() -> None:
    cache = cache_with([entry("solo", job="default/solo", index=None)], podgroup=False)
    assert [d.name for d in departures.unseen(cache)] == ["solo"]


def test_a_pod_the_cache_holds_or_a_successor_already_running_needs_no_place() -> None:
    held = b.pod("train-worker-1", group="train", quota="q-train-1", gpu=8, index=1, node="n1", phase="Running")
    same = cache_with([entry("train-worker-1") | {"uid": held["metadata"]["uid"]}], held)
    assert departures.unseen(same) == []
    successor = b.pod("train-worker-1", group="train", gpu=8, index=1, uid="uid-new")  # recreated, not yet placed
    assert departures.unseen(cache_with([entry("train-worker-1")], successor)) == []


@pytest.mark.parametrize(
    ("pod", "reason"),
    [
        (None, "Deleted"),
        ({"metadata": {"uid": "uid-other"}, "status": {"phase": "Pending"}}, "Deleted"),  # its name was taken
        ({"metadata": {"uid": "uid-train-worker-1"}, "status": {"phase": "Failed"}}, "Failed"),
        ({"metadata": {"uid": "uid-train-worker-1"}, "status": {"phase": "Failed", "reason": "Evicted"}}, "Evicted"),
        ({"metadata": {"uid": "uid-train-worker-1"}, "status": {"phase": "Succeeded"}}, None),
    ],
)
def test_what_the_api_says_of_the_pod_now_decides_the_reason(pod: dict[str, Any] | None, reason: str | None) -> None:
    cache = cache_with([entry("train-worker-1")])
    (d,) = departures.unseen(cache)
    assert departures.adopt(cache, d, pod) is (reason is not None)
    assert [r.reason for r in cache.quotas["q-train-1"].reserved] == ([reason] if reason else [])


def test_a_pod_that_cannot_be_read_keeps_its_place_and_one_seen_since_keeps_none() -> None:
    cache = cache_with([entry("train-worker-1")])
    (d,) = departures.unseen(cache)
    assert departures.adopt(cache, d, {"metadata": {"uid": d.uid}, "status": {"phase": "Succeeded"}}, readable=False)
    other = cache_with([entry("train-worker-1")])
    (d2,) = departures.unseen(other)
    other.on_pod_add(b.pod("train-worker-1", group="train", gpu=8, index=1, uid="uid-new"))  # arrived meanwhile
    assert not departures.adopt(other, d2, None), "judged again on the cache as it is when the read returns"


def test_the_restarted_worker_takes_the_kept_place() -> None:
    cache = cache_with([entry("train-worker-1")])
    (d,) = departures.unseen(cache)
    departures.adopt(cache, d, None)
    cache.on_pod_add(b.pod("train-worker-1", group="train", quota="q-train-1", gpu=8, index=1, uid="uid-new"))
    q = cache.quotas["q-train-1"]
    assert not q.reserved and list(q.claims) == ["uid-new"]


def kept(job: str, pod: str, *, index: int | None = 1) -> dict[str, Any]:
    """A place the leader wrote into ``status.reservedTasks``."""
    return {"job": job, "taskIndex": index, "namespace": "default", "podName": pod, "podUID": f"uid-{pod}",
            "reason": "Deleted", "expiresAt": format_time(NOW + 300), "request": {"nvidia.com/gpu": "8"}}  # fmt: skip


def test_places_of_a_group_whose_podgroup_went_unwatched_are_forgotten_and_no_others() -> None:
    status = {
        "phase": "QuotaBound",
        "nodeName": "n1",
        "reservedTasks": [
            kept("default/gone", "gone-worker-0", index=0),  # its PodGroup was deleted while nobody watched
            kept("default/train", "train-worker-1"),  # its PodGroup exists
            kept("default/solo", "solo", index=None),  # a lone pod: its job is the pod itself
        ],
    }
    cache = make_cache([b.node("n1"), b.quota("q-train-1", gpu=8, hca=1, status=status), b.podgroup("train")])
    assert departures.forget_orphaned(cache) == ["default/gone"]
    assert [r.job for r in cache.quotas["q-train-1"].reserved] == ["default/train", "default/solo"]
    assert "q-train-1" in cache.dirty_quotas, "the leader writes the status without it next cycle"
    assert departures.forget_orphaned(cache) == [], "nothing is forgotten twice"
