"""Scheduling Events: stable messages that aggregate (count grows), on the PodGroup and on its
pending pods, through the real binder loop, writer and emulator (and the real kubectl)."""

from __future__ import annotations

import asyncio
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from extender.simulate.cluster import LocalCluster
from extender.simulate.runner import SimClock
from tests import builders as b
from tests.kubectl import KUBECTL, run_kubectl

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[2]


def _blocked_and_stuck() -> list[dict[str, Any]]:
    """``nightly``: held by a closed JobQueue. ``stuck``: its quotas are bound but nothing binds
    its pods (no kube-scheduler here), so release_quota releases them and it backs off."""
    objs: list[dict[str, Any]] = [*b.seed_cluster(), b.queue("research")]
    objs.append(b.jobqueue("nightly", selector={"matchLabels": {"class": "nightly"}}, state="Closed"))
    objs.append(b.podgroup("nightly", min_member=2, labels={"class": "nightly"}))
    objs += [b.pod(f"nightly-{i}", group="nightly", index=i) for i in range(2)]
    objs += [b.quota(f"q-n-{i}") for i in range(2)]
    objs += b.training_job("stuck", 2)
    return objs


def _by_object(events: list[dict[str, Any]]) -> dict[tuple[str, str, str], list[dict[str, Any]]]:
    out: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for ev in events:
        ref = ev["involvedObject"]
        out[(ref["kind"], ref["name"], ev["reason"])].append(ev)
    return out


async def test_seventy_seconds_of_blocked_jobs_make_one_event_per_reason_whose_count_grows() -> None:
    """70 s as the issue saw it, and then some: the stuck job is released twice (a back-off, 30
    more stuck cycles, a second back-off), and its BackOff Event is still one object."""
    clock = SimClock(start=1_800_000_000.0)
    async with LocalCluster(clock=clock) as cl:
        cl.apply(_blocked_and_stuck())
        for _ in range(110):
            clock.advance(1.0)
            await cl.cycle()
        events = cl.emulator.list("v1", "events", namespace="default")
    grouped = _by_object(events)
    # one Event object per object and reason: the message does not change while the reason holds
    repeated = {k: [e["message"] for e in v] for k, v in grouped.items() if len(v) > 1}
    assert not repeated, repeated
    (held,) = grouped[("PodGroup", "nightly", "JobBlockedByJobQueue")]
    assert held["count"] > 1, held
    assert held["message"] == "JobQueue: JobBlockedByJobQueue(jobqueue nightly is closed)"
    # the pending pods carry the same story, where `kubectl describe pod` shows it
    for i in range(2):
        (ev,) = grouped[("Pod", f"nightly-{i}", "JobBlockedByJobQueue")]
        assert ev["count"] > 1 and ev["message"] == held["message"]
    # the stuck job was released and backed off: one BackOff Event, however long the back-off
    assert ("PodGroup", "stuck", "QuotaReleasedUnschedulable") in grouped
    (backoff,) = grouped[("PodGroup", "stuck", "BackOff")]
    assert "retry in" not in backoff["message"] and backoff["count"] > 1, backoff


@pytest.mark.skipif(not os.access(KUBECTL, os.X_OK), reason=f"kubectl not found at {KUBECTL}")
async def test_kubectl_describe_pod_of_a_pending_pod_tells_why(tmp_path: Path) -> None:
    clock = SimClock(start=1_800_000_000.0)
    async with LocalCluster(clock=clock) as cl:
        cl.apply(_blocked_and_stuck())
        for _ in range(3):
            clock.advance(1.0)
            await cl.cycle()
        kc = cl.emulator.write_kubeconfig(tmp_path / "kc")
        out = await asyncio.to_thread(run_kubectl, kc, tmp_path / "c", "describe", "pod", "nightly-0")
        pg = await asyncio.to_thread(run_kubectl, kc, tmp_path / "c", "describe", "skypg", "nightly")
    events = out.split("Events:", 1)[1]
    assert "<none>" not in events, out
    assert "JobBlockedByJobQueue" in events and "jobqueue nightly is closed" in events, out
    assert "JobBlockedByJobQueue" in pg.split("Events:", 1)[1], pg


async def test_a_quota_no_node_could_hold_is_warned_about_once_at_first_sight() -> None:
    async with LocalCluster() as cl:
        cl.apply([*b.seed_cluster(), b.quota("q-16", gpu=16, hca=None), b.quota("q-8", gpu=8, hca=8)])
        for _ in range(3):
            await cl.cycle()
        events = [
            e for e in cl.emulator.list("v1", "events", namespace="default") if e["involvedObject"]["kind"] == "Quota"
        ]
    assert [(e["involvedObject"]["name"], e["type"], e["reason"], e["count"]) for e in events] == [
        ("q-16", "Warning", "QuotaLargerThanAnyNode", 1)
    ]
    assert events[0]["message"].startswith("no node has more than 8 nvidia.com/gpu (asks 16)")
