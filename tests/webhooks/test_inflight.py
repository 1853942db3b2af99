"""In-flight claims: one instance never gives the same room twice before the informer catches up."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import anyio
import pytest

from extender import wellknown
from extender.model.quota import QuotaClaim, QuotaInfo
from extender.model.resources import Resource
from extender.simulate.certs import TLSFiles
from tests import builders as b
from tests.webhooks import helpers as h
from webhooks.inflight import InFlightRegistry

pytestmark = pytest.mark.anyio

NS = "ml"
GPU = wellknown.RESOURCE_GPU


def created(a: h.Admission, name: str | None = None) -> dict[str, Any]:
    """The pod the apiserver stores after admission (name generated, uid assigned)."""
    pod = a.pod
    meta = pod["metadata"]
    if "name" not in meta:
        meta["name"] = name or meta["generateName"] + uuid.uuid4().hex[:5]
    meta["uid"] = str(uuid.uuid4())
    meta["resourceVersion"] = "10"
    meta["creationTimestamp"] = b.TS
    pod["status"] = {"phase": "Pending"}
    return pod


async def test_fifty_concurrent_admissions_share_ten_quotas_exactly(tls: TLSFiles) -> None:
    objs: list[dict[str, Any]] = [b.node(f"N{i}") for i in range(4)]
    objs += [b.quota(f"q-{i:02d}", gpu=1, hca=1) for i in range(10)]
    state = h.make_state(objs)
    results: list[h.Admission] = []
    async with h.serve(state, tls, max_connections=50) as hook:

        async def one(i: int) -> None:
            pod = h.admission_pod(None, generate_name=f"burst-{i}-", namespace=NS, queue_anno="research")
            results.append(await hook.pod(pod))

        async with anyio.create_task_group() as tg:
            for i in range(50):
                tg.start_soon(one, i)
    assert len(results) == 50
    assert all(a.status_code == 200 for a in results)
    quotas = Counter(a.quota for a in results if a.quota)
    assert sorted(quotas) == [f"q-{i:02d}" for i in range(10)]
    assert set(quotas.values()) == {1}
    refused = [a for a in results if a.quota is None]
    assert len(refused) == 40
    assert all(a.reason == "NoQuota(queue research has no quota with room left)" for a in refused)
    assert len(state.inflight) == 10


async def test_an_entry_is_dropped_when_the_cache_shows_the_pod_and_nothing_is_counted_twice(tls: TLSFiles) -> None:
    state = h.make_state([b.node("N0"), b.quota("q-2gpu", gpu=2, hca=2)])
    cache = h.cache_of(state)
    async with h.serve(state, tls) as hook:
        first = await hook.pod(h.admission_pod("a", namespace=NS, queue_anno="research"))
        assert first.quota == "q-2gpu" and len(state.inflight) == 1
        cache.on_pod_add(created(first))  # the informer delivers the created pod
        second = await hook.pod(h.admission_pod("b", namespace=NS, queue_anno="research"))
        assert second.quota == "q-2gpu"  # 2 − 1 claimed = 1 left: the entry of "a" is gone
        assert [e.name for e in state.inflight] == ["b"]
        third = await hook.pod(h.admission_pod("c", namespace=NS, queue_anno="research"))
    assert third.quota is None


async def test_an_entry_holds_the_room_until_it_expires(tls: TLSFiles) -> None:
    clock = h.Clock()
    state = h.make_state([b.node("N0"), b.quota("q-0")], clock=clock)
    async with h.serve(state, tls) as hook:
        first = await hook.pod(h.admission_pod("a", namespace=NS, queue_anno="research"))
        clock.now += state.inflight.ttl - 1
        held = await hook.pod(h.admission_pod("b", namespace=NS, queue_anno="research"))
        clock.now += 2  # "a" was never created (another admission plugin denied it)
        after = await hook.pod(h.admission_pod("c", namespace=NS, queue_anno="research"))
    assert first.quota == "q-0"
    assert held.quota is None
    assert after.quota == "q-0"
    assert [e.name for e in state.inflight] == ["c"]


async def test_claims_that_existed_before_the_admission_do_not_drop_its_entry(tls: TLSFiles) -> None:
    objs = [
        b.node("N0"),
        b.quota("q-3", gpu=3, hca=3, status=h.bound("N0")),
        b.pod(
            "x",
            namespace=NS,
            quota="q-3",
            node="N0",
            phase="Running",
            annotations={wellknown.ANNO_QUEUE_NAME: "research"},
        ),
    ]
    state = h.make_state(objs)
    async with h.serve(state, tls) as hook:
        a = await hook.pod(h.admission_pod("a", namespace=NS, queue_anno="research"))
        c = await hook.pod(h.admission_pod("c", namespace=NS, queue_anno="research"))
        d = await hook.pod(h.admission_pod("d", namespace=NS, queue_anno="research"))
    assert (a.quota, c.quota, d.quota) == ("q-3", "q-3", None)
    assert len(state.inflight) == 2


async def test_a_dry_run_leaves_the_registry_untouched_even_when_entries_are_stale(tls: TLSFiles) -> None:
    clock = h.Clock()
    state = h.make_state([b.node("N0"), b.quota("q-0"), b.quota("q-1")], clock=clock)
    async with h.serve(state, tls) as hook:
        await hook.pod(h.admission_pod("a", namespace=NS, queue_anno="research"))
        before = list(state.inflight)
        clock.now += 3600
        dry = await hook.pod(h.admission_pod("b", namespace=NS, queue_anno="research"), dry_run=True)
        assert list(state.inflight) == before
    assert dry.quota == "q-0"  # the stale entry does not count, but is not removed by a dry run


# --- the registry on its own ---------------------------------------------------------------------
def _quota(name: str, claims: list[tuple[str, str, str, int | None]]) -> QuotaInfo:
    q = QuotaInfo(name=name, queue="research", request=Resource({GPU: 8000}))
    for uid, ns, job, index in claims:
        q.claims[uid] = QuotaClaim(uid, ns, uid, job, index, Resource({GPU: 1000}))
    return q


def _entry(reg: InFlightRegistry, q: QuotaInfo, name: str, job: str, index: int | None, now: float = 0.0) -> None:
    reg.add(
        reg.new_entry(
            quota=q,
            namespace="ml",
            name=name,
            job=job,
            queue="research",
            index=index,
            request=Resource({GPU: 1000}),
            fingerprint=name,
            now=now,
        )
    )


def test_a_new_claim_takes_away_the_entry_of_its_own_job_and_index_first() -> None:
    reg = InFlightRegistry(ttl=30)
    q = _quota("q", [])
    _entry(reg, q, "w-0", "ml/j", 0)
    _entry(reg, q, "w-1", "ml/j", 1)
    arrived = _quota("q", [("uid-1", "ml", "ml/j", 1)])
    assert [e.name for e in reg.live({"q": arrived}, now=1.0)] == ["w-0"]


def test_a_claim_of_another_namespace_does_not_take_an_entry_away() -> None:
    reg = InFlightRegistry(ttl=30)
    q = _quota("q", [])
    _entry(reg, q, "w-0", "ml/j", 0)
    arrived = _quota("q", [("uid-1", "other", "other/j", 0)])
    assert [e.name for e in reg.live({"q": arrived}, now=1.0)] == ["w-0"]


def test_a_generated_name_pod_is_matched_by_namespace_when_its_job_key_differs() -> None:
    reg = InFlightRegistry(ttl=30)
    q = _quota("q", [])
    _entry(reg, q, "lone-*", "ml/lone-*", None)
    arrived = _quota("q", [("uid-1", "ml", "ml/lone-x7k2p", None)])
    assert reg.live({"q": arrived}, now=1.0) == []


def test_one_claim_accounts_for_one_entry_only() -> None:
    reg = InFlightRegistry(ttl=30)
    q = _quota("q", [])
    _entry(reg, q, "a", "ml/a", None)
    _entry(reg, q, "b", "ml/b", None)
    arrived = _quota("q", [("uid-1", "ml", "ml/a", None)])
    assert [e.name for e in reg.live({"q": arrived}, now=1.0)] == ["b"]
    assert reg.reconcile({"q": arrived}, now=1.0) == 1
    assert len(reg) == 1


def test_entries_of_a_deleted_quota_and_expired_entries_are_dropped() -> None:
    reg = InFlightRegistry(ttl=30)
    q = _quota("q", [])
    _entry(reg, q, "a", "ml/a", None, now=0.0)
    _entry(reg, _quota("gone", []), "b", "ml/b", None, now=0.0)
    assert [e.name for e in reg.live({"q": q}, now=29.9)] == ["a"]
    assert reg.live({"q": q}, now=30.0) == []
    with pytest.raises(ValueError, match="ttl"):
        InFlightRegistry(ttl=0)
