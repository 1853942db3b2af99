"""In-flight claim entries on a Quota (``status.tasks`` with ``expiresAt``) and the pods they were
recorded for: the cache and the claim writer count each claim once, and every replica forgets
an entry once it expires (``extender/cache/claims.py``, ``extender/cache/inflight.py``)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from extender import wellknown
from extender.binder.loop import BinderLoop
from extender.cache.cache import ClusterCache
from extender.cache.claims import ClaimEntry, NoRoom, record_claim
from extender.conf import default_policy
from extender.model.resources import Resource
from extender.scheduler import Scheduler
from tests import builders as b
from tests.binder.test_follower import one_round
from tests.core.props import PROPERTY

pytestmark = pytest.mark.anyio

GPU = wellknown.RESOURCE_GPU
NOW = 1_000_000.0
Obj = dict[str, Any]


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def _entry(uid: str, name: str = "web-7d9f-*", job: str = "ml/web-7d9f-*", expires_at: float = NOW + 30) -> ClaimEntry:
    """The entry the webhook records for a lone ``generateName`` pod (its job named after it)."""
    return ClaimEntry(uid, "ml", name, job, None, Resource({GPU: 1000}), expires_at)


def _with_entries(quota: Obj, *entries: ClaimEntry) -> Obj:
    """The Quota as the API holds it after these claims were written, one PUT each."""
    obj = copy.deepcopy(quota)
    for i, e in enumerate(entries):
        status = record_claim(obj, e, now=NOW)
        assert status is not None
        obj["status"] = status
        obj["metadata"]["resourceVersion"] = str(10 + i)
    return obj


def _arrived(name: str, entry: str | None) -> Obj:
    """The created pod of such an admission: its generated name, the webhook's annotations."""
    annotations = {wellknown.ANNO_QUEUE_NAME: "research"}
    if entry is not None:
        annotations[wellknown.ANNO_CLAIM_ENTRY] = entry
    return b.pod(name, namespace="ml", gpu=1, hca=None, quota="q", annotations=annotations)


def _cache(quota: Obj, clock: Clock | None = None) -> ClusterCache:
    cache = ClusterCache(clock=clock or (lambda: NOW))
    b.feed(cache, [b.node("n0"), quota])
    return cache


def test_a_generated_pod_accounts_for_the_entry_it_names_and_for_no_other() -> None:
    quota = _with_entries(b.quota("q", gpu=4, hca=None), _entry("admission:a"), _entry("admission:b"))
    cache = _cache(quota)
    assert sorted(cache.quotas["q"].claims) == ["admission:a", "admission:b"]
    cache.on_pod_add(_arrived("web-7d9f-k2x8q", "admission:b"))
    claims = cache.quotas["q"].claims
    # its own entry gave way to its claim; the other pod's entry still holds that pod's room
    assert sorted(c.name for c in claims.values()) == ["web-7d9f-*", "web-7d9f-k2x8q"]
    assert "admission:a" in claims
    assert cache.quotas["q"].allocated.get(GPU) == 2000


def test_a_pod_naming_another_entry_does_not_take_this_ones_place() -> None:
    quota = _with_entries(b.quota("q", gpu=4, hca=None), _entry("admission:a"))
    cache = _cache(quota)
    cache.on_pod_add(_arrived("web-7d9f-k2x8q", "admission:elsewhere"))
    assert "admission:a" in cache.quotas["q"].claims
    assert cache.quotas["q"].allocated.get(GPU) == 2000


def test_the_claim_writer_counts_an_arrived_pods_entry_once() -> None:
    quota = _with_entries(b.quota("q", gpu=2, hca=None), _entry("admission:a"))
    cache = _cache(quota)
    cache.on_pod_add(_arrived("web-7d9f-k2x8q", "admission:a"))
    known = cache.quotas["q"]
    # 2 GPUs, one pod on it (whose entry the object still lists): room for one more
    status = record_claim(quota, _entry("admission:c"), now=NOW, known=known)
    assert status is not None
    assert [t["uid"] for t in status["tasks"]] == ["admission:a", "admission:c"]
    with pytest.raises(NoRoom):  # and no more than that
        record_claim({**quota, "status": status}, _entry("admission:d"), now=NOW, known=known)


async def test_a_replica_that_is_not_the_leader_forgets_expired_entries() -> None:
    clock = Clock()
    quota = _with_entries(b.quota("q", gpu=1, hca=None), _entry("admission:a", expires_at=NOW + 5))
    cache = _cache(quota, clock)
    assert "admission:a" in cache.quotas["q"].claims
    loop = BinderLoop(cache, Scheduler(default_policy()), writer=None, is_leader=lambda: False)  # type: ignore[arg-type]
    await one_round(loop)
    assert "admission:a" in cache.quotas["q"].claims  # not expired yet
    clock.now = NOW + 6
    await one_round(loop)
    assert cache.quotas["q"].claims == {}
    assert cache.quotas["q"].allocated.get(GPU) == 0
    assert "q" in cache.dirty_quotas  # its status still lists the entry: a leader rewrites it


def test_a_pod_admitted_by_an_older_webhook_accounts_for_one_entry_only() -> None:
    """Entries recorded before the webhook named them on the pod (an upgrade): two workers of one
    gang from ``generateName``, without a task index, share prefix and job; the first to arrive
    takes the place of one entry, and the other entry keeps holding its pod's room."""
    name, job = "train-worker-*", "ml/train"
    quota = _with_entries(
        b.quota("q", gpu=4, hca=None), _entry("admission:a", name, job), _entry("admission:b", name, job)
    )
    cache = _cache(quota)
    pod = b.pod("train-worker-x7k2p", namespace="ml", group="train", gpu=1, hca=None, quota="q")
    cache.on_pod_add(pod)
    claims = cache.quotas["q"].claims
    assert sorted(c.name for c in claims.values()) == ["train-worker-*", "train-worker-x7k2p"]
    assert cache.quotas["q"].allocated.get(GPU) == 2000
    second = b.pod("train-worker-p9q4z", namespace="ml", group="train", gpu=1, hca=None, quota="q")
    cache.on_pod_add(second)
    assert sorted(c.name for c in cache.quotas["q"].claims.values()) == ["train-worker-p9q4z", "train-worker-x7k2p"]
    assert cache.quotas["q"].allocated.get(GPU) == 2000


def test_an_inline_binds_entry_gives_way_to_its_pod_even_when_the_pod_names_another() -> None:
    """The extender's inline bind records the entry under the pod's own uid; the pod may still
    carry the claim-entry its admission named on another quota (the bind chose this one)."""
    pod = _arrived("solo", "admission:elsewhere")
    uid = pod["metadata"]["uid"]
    quota = b.quota("q", gpu=2, hca=None)
    cache = _cache(quota)
    cache.on_pod_add(pod)
    inline = ClaimEntry(uid, "ml", "solo", "ml/solo", None, Resource({GPU: 1000}), NOW + 30)
    written = _with_entries(quota, inline)
    cache.on_quota_update(quota, written)
    assert cache.claim_arrived(uid)  # the leader rewrites the entry in the pod's form
    assert cache.quotas["q"].allocated.get(GPU) == 1000


# --- against an exact count ---------------------------------------------------------------------
# Pods of a few owners, each admitted once (its entry recorded on the quota, named on the pod as
# the webhook does), a random subset of them arriving in a random order: every moment, the room
# the cache counts and the room the claim writer counts are exactly the pods that arrived plus
# the entries whose pod has not — one GPU each, nothing counted twice, nothing missed.
_POD = st.tuples(st.integers(0, 2), st.booleans(), st.booleans())  # owner, generateName?, arrives?


@PROPERTY
@given(pods=st.lists(_POD, min_size=1, max_size=6), order=st.randoms(use_true_random=False))
def test_the_cache_and_the_writer_count_each_admitted_pod_once(pods: list[tuple[int, bool, bool]], order: Any) -> None:
    entries, arrivals = [], []
    for i, (owner, generated, arrives) in enumerate(pods):
        name = f"web-{owner}-*" if generated else f"web-{owner}-p{i}"
        entries.append(_entry(f"admission:{i}", name=name, job=f"ml/{name}"))
        if arrives:
            arrivals.append(_arrived(f"web-{owner}-g{i}" if generated else name, f"admission:{i}"))
    quota = _with_entries(b.quota("q", gpu=len(pods) + 1, hca=None), *entries)
    cache = _cache(quota)
    order.shuffle(arrivals)
    for n, pod in enumerate([None, *arrivals]):
        if pod is not None:
            cache.on_pod_add(pod)
        assert cache.quotas["q"].allocated.get(GPU) == len(pods) * 1000, f"after {n} arrivals"
        # the next pod of owner 0, from its template: no earlier pod is its predecessor
        new = _entry("admission:new", name="web-0-*", job="ml/web-0-*")
        status = record_claim(quota, new, now=NOW, known=cache.quotas["q"])
        assert status is not None and status["allocated"] == {GPU: str(len(pods) + 1)}
