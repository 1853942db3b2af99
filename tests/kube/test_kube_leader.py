"""Leader election on one Lease: never two leaders, takeover after the holder stops renewing,
release on stop."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from extender.emulator import Emulator
from extender.kube import client as kube_client
from extender.kube.leader import LeaderElector
from extender.kube.writer import KubeWriter
from tests.waiting import eventually

pytestmark = pytest.mark.anyio

FAST = {"lease_duration": 1.0, "renew_deadline": 0.5, "retry_period": 0.05}


class Sampler:
    """Checks, every few milliseconds, that at most one candidate believes it leads."""

    def __init__(self, *candidates: LeaderElector) -> None:
        self.candidates = candidates
        self.samples = 0
        self.overlaps = 0
        self.leaders_seen: list[str] = []

    async def run(self) -> None:
        while True:
            leaders = [c.identity for c in self.candidates if c.is_leader]
            self.samples += 1
            if len(leaders) > 1:
                self.overlaps += 1
            if leaders and (not self.leaders_seen or self.leaders_seen[-1] != leaders[0]):
                self.leaders_seen.append(leaders[0])
            await anyio.sleep(0.002)


@asynccontextmanager
async def candidate(emu: Emulator, identity: str, lease: str, **kw: Any) -> AsyncIterator[LeaderElector]:
    api = kube_client.from_url(emu.url, user_agent=f"sky-scheduler/{identity}")
    writer = KubeWriter(api, retries=1, request_timeout=0.4)
    elector = LeaderElector(writer, lease_name=lease, namespace="kube-system", identity=identity, **{**FAST, **kw})
    elector.start()
    try:
        yield elector
    finally:
        await elector.stop()
        await api.close()


def lease_spec(emu: Emulator, lease: str) -> dict[str, Any]:
    spec: dict[str, Any] = emu.get("coordination.k8s.io/v1", "leases", lease, "kube-system")["spec"]
    return spec


async def test_single_candidate_acquires_renews_and_releases(emu: Emulator) -> None:
    lease = f"l-{uuid.uuid4().hex[:6]}"
    started: list[str] = []
    stopped: list[str] = []
    # a lease of 4 s with a 3 s renew deadline: a loaded CI machine that stalls this event loop
    # for half a second must not make the only candidate step down (started == ["a", "a"])
    async with candidate(
        emu,
        "a",
        lease,
        lease_duration=4.0,
        renew_deadline=3.0,
        on_started_leading=lambda: started.append("a"),
        on_stopped_leading=lambda: stopped.append("a"),
    ) as a:
        with anyio.fail_after(5):
            await a.leading.wait()
        spec = lease_spec(emu, lease)
        assert spec["holderIdentity"] == "a" and spec["leaseTransitions"] == 0
        assert spec["leaseDurationSeconds"] == 4
        first_renew = spec["renewTime"]
        await eventually(lambda: lease_spec(emu, lease)["renewTime"] != first_renew)  # it renews
        assert lease_spec(emu, lease)["acquireTime"] == spec["acquireTime"]
    assert not a.is_leader and started == ["a"] and stopped == ["a"]
    released = lease_spec(emu, lease)
    assert released["holderIdentity"] == "" and released["leaseDurationSeconds"] == 1  # released: expire now


async def test_two_candidates_one_leader_takeover_and_release(emu: Emulator) -> None:
    lease = f"l-{uuid.uuid4().hex[:6]}"
    async with candidate(emu, "a", lease) as a:
        with anyio.fail_after(5):
            await a.leading.wait()
        async with candidate(emu, "b", lease) as b, anyio.create_task_group() as tg:
            sampler = Sampler(a, b)
            tg.start_soon(sampler.run)
            await anyio.sleep(0.3)  # b campaigns while a renews: b must stay a follower
            assert a.is_leader and not b.is_leader and b.leader == "a"

            # a can no longer renew (its lease updates fail): it steps down, then b takes over
            emu.faults.add("update", "leases", code=503, user_agent="sky-scheduler/a")
            with anyio.fail_after(10):
                await a.not_leading.wait()
                await b.leading.wait()
            spec = lease_spec(emu, lease)
            assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1

            # a recovers: it campaigns again but b holds the lease
            emu.faults.clear()
            await anyio.sleep(0.3)
            assert (b.is_leader, a.is_leader, a.leader) == (True, False, "b")
            tg.cancel_scope.cancel()
        # b stopped and released: a takes over without waiting out a lease duration
        with anyio.fail_after(5):
            await a.leading.wait()
        assert lease_spec(emu, lease)["leaseTransitions"] == 2
    assert sampler.overlaps == 0 and sampler.samples > 100
    assert sampler.leaders_seen == ["a", "b"]


async def test_release_lets_a_successor_in_before_the_lease_would_expire(emu: Emulator) -> None:
    lease = f"l-{uuid.uuid4().hex[:6]}"
    slow = {"lease_duration": 60.0, "renew_deadline": 30.0, "retry_period": 0.05}
    async with candidate(emu, "a", lease, **slow) as a:
        with anyio.fail_after(5):
            await a.leading.wait()
        async with candidate(emu, "b", lease, **slow) as b:
            await anyio.sleep(0.2)
            assert not b.is_leader
            await a.stop()
            with anyio.fail_after(5):  # a 60 s lease: only the release can explain a quick takeover
                await b.leading.wait()


async def test_leader_steps_down_when_the_apiserver_is_unreachable(emu: Emulator) -> None:
    lease = f"l-{uuid.uuid4().hex[:6]}"
    async with candidate(emu, "a", lease) as a:
        with anyio.fail_after(5):
            await a.leading.wait()
        emu.faults.add("*", "leases", code=500, user_agent="sky-scheduler/a")
        with anyio.fail_after(5):
            await a.not_leading.wait()
        emu.faults.clear()
        with anyio.fail_after(5):  # nobody else took it: a re-acquires (same holder: no transition)
            await a.leading.wait()
        assert lease_spec(emu, lease)["leaseTransitions"] == 0


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError):
        LeaderElector(None, lease_name="l", namespace="n", identity="a", lease_duration=5, renew_deadline=10)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        LeaderElector(None, lease_name="l", namespace="n", identity="")  # type: ignore[arg-type]


async def test_release_after_a_renewal_the_stop_cut_short_still_releases(emu: Emulator) -> None:
    """A renewal that reached the API server but whose answer the stop cancelled leaves the
    elector with a stale resourceVersion: the release conflicts, re-reads, and releases."""
    lease = f"l-{uuid.uuid4().hex[:6]}"
    slow = {"lease_duration": 10.0, "renew_deadline": 5.0, "retry_period": 2.0}  # no renewal in between
    async with candidate(emu, "a", lease, **slow) as a:
        with anyio.fail_after(5):
            await a.leading.wait()
        # what the cut-short renewal did on the server: same holder, newer renewTime and version
        emu.patch("coordination.k8s.io/v1", "leases", lease, {"spec": {"renewTime": "2026-11-29T00:00:00.000000Z"}},
                  namespace="kube-system")  # fmt: skip
    assert not a.is_leader
    released = lease_spec(emu, lease)
    assert released["holderIdentity"] == "" and released["leaseDurationSeconds"] == 1  # released: expire now


async def test_lease_left_counts_from_the_last_renewal_sent_and_is_zero_when_not_leading(emu: Emulator) -> None:
    """What the binder's writes are fenced with: while leading, at most ``renew_deadline`` and
    more than nothing (renewals keep it up); once the renewals fail it runs down, and it is 0
    from the moment the candidate steps down."""
    lease = f"l-{uuid.uuid4().hex[:6]}"
    async with candidate(emu, "a", lease) as a:
        assert a.lease_left() == 0.0
        with anyio.fail_after(5):
            await a.leading.wait()
        for _ in range(10):
            assert 0.0 < a.lease_left() <= FAST["renew_deadline"]
            await anyio.sleep(FAST["retry_period"])
        emu.faults.add("*", "leases", code=500, user_agent="sky-scheduler/a")
        with anyio.fail_after(5):
            await a.not_leading.wait()
        assert a.lease_left() == 0.0
