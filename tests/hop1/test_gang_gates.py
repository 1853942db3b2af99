"""A gang is all or nothing at hop ③ too (issue 18 §4): the extender filter passes a pod of a
gang only when at least minMember of its job's tasks hold quotas bound to nodes — statically
bound quotas included, which never pass through hop ② where the binder's gang gate sits — and a
strict-order job's pod only when every lower rank holds a bound quota.

Real HTTPS admissions, the kube-scheduler stand-in calling the extender over HTTP, the emulator.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests import builders as b
from tests.hop1.harness import QUOTA, annos, hop1_cluster, new_pod

pytestmark = pytest.mark.anyio


def worker(job: str, i: int, **kw: Any) -> dict[str, Any]:
    return new_pod(
        f"{job}-worker-{i}",
        group=job,
        gpu=8,
        hca=8,
        labels={"training.kubeflow.org/job-name": job, "training.kubeflow.org/replica-index": str(i)},
        **kw,
    )


async def test_a_gang_with_three_of_four_quotas_statically_bound_starts_no_pod() -> None:
    objs = [
        *b.seed_cluster(),
        *(b.quota(f"q-{i}", gpu=8, hca=8, static_bind_node=f"n{i}") for i in range(3)),
        b.podgroup("train", min_member=4),
    ]
    async with hop1_cluster(objs=objs) as h:
        for i in range(4):
            await h.admit(worker("train", i))
        await h.cycles_until_quiet()
        bound = {n: (h.quota(n).get("status") or {}).get("nodeName") for n in ("q-0", "q-1", "q-2")}
        assert bound == {"q-0": "n0", "q-1": "n1", "q-2": "n2"}, "test precondition: the static quotas are bound"
        holders = [i for i in range(4) if annos(h.pod(f"train-worker-{i}")).get(QUOTA)]
        assert len(holders) == 3
        messages: list[str] = []
        for _ in range(3):
            attempts = await h.scheduler.schedule_round()
            messages += [a.message for a in attempts]
            assert not any(a.node for a in attempts), [(a.pod, a.node) for a in attempts]
            await h.cycle()
        running = [p["metadata"]["name"] for p in h.pods() if p["spec"].get("nodeName")]
        assert running == [], f"part of the gang started: {running}"
        assert any("GangNotReady(3/4 quotas bound)" in m for m in messages), messages


async def test_a_strict_order_job_runs_no_rank_before_the_lower_ranks_hold_bound_quotas() -> None:
    objs = [
        *b.seed_cluster(),
        b.quota("q-pinned", gpu=8, hca=8, static_bind_node="n5"),
        b.podgroup("ordered", min_member=1, topology={"strictOrder": True}),
    ]
    async with hop1_cluster(objs=objs) as h:
        await h.admit(worker("ordered", 2, quota="q-pinned"))  # rank 2 names the pinned quota
        await h.admit(worker("ordered", 0))  # no quota left for ranks 0 and 1
        await h.admit(worker("ordered", 1))
        await h.cycles_until_quiet()
        assert (h.quota("q-pinned").get("status") or {}).get("nodeName") == "n5"
        assert annos(h.pod("ordered-worker-2")).get(QUOTA) == "q-pinned"
        attempts = await h.scheduler.schedule_round()
        by_pod = {a.pod.split("/")[-1]: a for a in attempts}
        rank2 = by_pod["ordered-worker-2"]
        assert not rank2.node, "rank 2 started while ranks 0 and 1 wait"
        assert "GangNotReady(rank 2 waits for rank 0's quota to be bound)" in rank2.message, rank2.message
        assert not h.pod("ordered-worker-2")["spec"].get("nodeName")


async def test_hop1_a_gang_that_cannot_hold_minmember_quotas_claims_none() -> None:
    """The binder's hop-① gate: pods created while the webhook was down (no quota) of a gang of
    four, three free quotas in the queue: the loop commits no claim at all (half a gang must not
    sit on quotas another job could use), and says why."""
    objs = [*b.seed_cluster(), *(b.quota(f"q-{i}", gpu=8, hca=8) for i in range(3)), b.podgroup("train", min_member=4)]
    async with hop1_cluster(objs=objs) as h:
        for i in range(4):
            h.emulator.create(worker("train", i))
        await h.settle()
        await h.cycles_until_quiet()
        held = {f"train-worker-{i}": annos(h.pod(f"train-worker-{i}")).get(QUOTA) for i in range(4)}
        assert held == dict.fromkeys(held), f"part of the gang claimed quotas: {held}"
        for i in range(3):
            assert not (h.quota(f"q-{i}").get("status") or {}).get("tasks")
        verdict = h.cluster.rt.loop.verdicts["default/train"] if h.cluster.rt.loop is not None else None
        assert verdict is not None and verdict.status.message().startswith("NoQuota("), verdict


async def test_a_one_pod_job_held_by_a_closed_jobqueue_is_not_bound_inline() -> None:
    nightly = {"class": "nightly"}
    objs = [
        *b.seed_cluster(),
        b.quota("q-free", gpu=8, hca=None),
        b.jobqueue("nightly", selector={"matchLabels": nightly}, state="Closed"),
    ]
    async with hop1_cluster(objs=objs) as h:
        pod = new_pod(
            "lone", gpu=8, hca=None, labels=nightly, annotations={"scheduling.infini-ai.com/queue-name": "research"}
        )
        await h.admit(pod)
        assert QUOTA not in annos(h.pod("lone"))
        messages = []
        for _ in range(3):
            attempts = await h.scheduler.schedule_round()
            messages += [a.message for a in attempts]
            assert not any(a.node for a in attempts), "a closed JobQueue's job was bound inline"
            await h.cycle()
        assert not h.pod("lone")["spec"].get("nodeName")
        assert QUOTA not in annos(h.pod("lone"))
        assert any("JobBlockedByJobQueue(jobqueue nightly is closed)" in m for m in messages), messages
