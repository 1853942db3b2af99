"""Who gets a quota, and in which order, when the loop assigns them (issue 5 §2):
JobQueue blocking (``JobBlockedByJobQueue``) and its release, fair share between queues
(``job.queue_order``, weighted DRF) and priority within a queue (``job.order``).

Pods the webhook cannot serve — a closed JobQueue, or no webhook at all (created straight in
the API, as with ``failurePolicy: Ignore`` while the webhook is down) — wait without a quota
until the binder loop assigns one.
"""

from __future__ import annotations

from typing import Any

import pytest

from extender import wellknown
from extender.framework.intents import ClaimQuota
from tests import builders as b
from tests.hop1.harness import QUOTA, REASON, Hop1, annos, hop1_cluster, new_pod

pytestmark = pytest.mark.anyio

QUEUE_ANNO = wellknown.ANNO_QUEUE_NAME


def jobqueue_objs(state: str) -> list[dict[str, Any]]:
    objs = b.seed_cluster()
    objs += [b.quota(f"q-{i}", gpu=1, hca=None) for i in range(4)]
    objs.append(b.jobqueue("llm", selector={"matchLabels": {"team": "llm"}}, state=state))
    objs.append(b.podgroup("pretrain", min_member=2, labels={"team": "llm"}))
    objs.append(b.podgroup("finetune", min_member=1, labels={"team": "vision"}))
    return objs


async def test_closed_jobqueue_blocks_admission_and_opening_it_lets_the_loop_assign() -> None:
    async with hop1_cluster(objs=jobqueue_objs("Closed")) as h:
        for i in range(2):
            await h.admit(new_pod(f"pretrain-{i}", group="pretrain", gpu=1, hca=None))
        await h.admit(new_pod("finetune-0", group="finetune", gpu=1, hca=None))
        # the job the closed JobQueue selects is admitted without a quota, and says why
        for i in range(2):
            anns = annos(h.pod(f"pretrain-{i}"))
            assert QUOTA not in anns
            assert anns[REASON] == "JobBlockedByJobQueue(jobqueue llm is closed)"
        # a job it does not select is not held back
        assert annos(h.pod("finetune-0"))[QUOTA]
        assert REASON not in annos(h.pod("finetune-0"))

        reports = await h.cycles_until_quiet()
        for i in range(2):
            anns = annos(h.pod(f"pretrain-{i}"))
            assert QUOTA not in anns, "the loop let a blocked job in"
            assert anns[REASON].startswith("JobBlockedByJobQueue")
        result = reports[0].result
        assert result is not None
        verdict = result.verdicts["default/pretrain"]
        assert verdict.status.reason is not None and verdict.status.reason.value == "JobBlockedByJobQueue"

        h.apply([b.jobqueue("llm", selector={"matchLabels": {"team": "llm"}}, state="Open")])
        await h.settle()
        await h.cycles_until_quiet()
        held: dict[str, str] = {}
        for i in range(2):
            anns = annos(h.pod(f"pretrain-{i}"))
            assert anns.get(QUOTA), f"pretrain-{i} got no quota after the JobQueue opened"
            assert REASON not in anns, "the stale scheduling-reason was left on the pod"
            held[f"pretrain-{i}"] = anns[QUOTA]
        assert len(set(held.values())) == 2
        for pod, quota in held.items():
            assert [t["name"] for t in h.quota(quota)["status"]["tasks"]] == [pod]
        # the extender places them where their quotas are
        await h.schedule()
        for pod, quota in held.items():
            assert h.pod(pod)["spec"]["nodeName"] == h.quota(quota)["status"]["nodeName"]


def _claim_order(h: Hop1, reports: list[Any]) -> list[str]:
    """Pods in the order the loop's cycles claimed quotas for them."""
    out = []
    for r in reports:
        assert r.result is not None
        out += [i.name for i in r.result.intents if isinstance(i, ClaimQuota)]
    return out


def _weighted_drf(
    weights: dict[str, int], jobs_per_queue: int, places: int, held: dict[str, int] | None = None
) -> list[str]:
    """The order of queues weighted DRF serves one-GPU jobs in (share = GPUs held / weight, GPUs
    being the dominant resource here; ties by queue name) — what ``job.queue_order`` must give."""
    used = {q: (held or {}).get(q, 0) for q in weights}
    left = dict.fromkeys(weights, jobs_per_queue)
    order = []
    for _ in range(places):
        q = min((q for q in weights if left[q]), key=lambda q: (used[q] / weights[q], q))
        order.append(q)
        used[q] += 1
        left[q] -= 1
    return order


async def test_fair_share_between_queues_follows_their_weights() -> None:
    """Two queues compete for eight shared one-GPU quotas with eight one-GPU jobs each; the
    webhook is down (pods are created straight in the API), so the loop assigns everything in one
    cycle, serving queues by weighted dominant share. ``alpha`` (weight 1) sorts first by name and
    age: ignoring queue order would give it all eight places (or four of them round-robin)."""
    weights = {"alpha": 1, "zeta": 3}
    objs = [*b.seed_cluster(), *(b.queue(q, weight=w) for q, w in weights.items())]
    objs += [b.quota(f"shared-{i}", queue="pool", gpu=1, hca=None, shared_queues=["alpha", "zeta"]) for i in range(8)]
    async with hop1_cluster(objs=objs) as h:
        # alpha's jobs are older and sort first by name too
        pods = [new_pod(f"a-{j}", gpu=1, hca=None, annotations={QUEUE_ANNO: "alpha"}) for j in range(8)]
        pods += [new_pod(f"z-{j}", gpu=1, hca=None, annotations={QUEUE_ANNO: "zeta"}) for j in range(8)]
        for p in pods:
            h.emulator.create(p)
        await h.settle()
        reports = await h.cycles_until_quiet()
        order = _claim_order(h, reports)
        assert len(order) == 8
        queue_of = {"a": "alpha", "z": "zeta"}
        assert [queue_of[n[0]] for n in order] == _weighted_drf(weights, 8, 8)
        holders = [p["metadata"]["name"] for p in h.pods() if annos(p).get(QUOTA)]
        assert sum(1 for n in holders if n.startswith("a-")) == 2
        assert sum(1 for n in holders if n.startswith("z-")) == 6
        # within each queue, the oldest / first-named jobs
        assert sorted(n for n in holders if n.startswith("a-")) == ["a-0", "a-1"]
        assert sorted(n for n in holders if n.startswith("z-")) == [f"z-{j}" for j in range(6)]


async def test_fair_share_counts_what_a_queue_already_holds() -> None:
    """The same weights, but zeta already runs six GPUs' worth of claims: alpha goes first now."""
    weights = {"alpha": 1, "zeta": 3}
    objs = [*b.seed_cluster(), *(b.queue(q, weight=w) for q, w in weights.items())]
    objs += [b.quota(f"shared-{i}", queue="pool", gpu=1, hca=None, shared_queues=["alpha", "zeta"]) for i in range(4)]
    objs += [b.quota("zeta-own", queue="zeta", gpu=6, hca=None)]
    async with hop1_cluster(objs=objs) as h:
        h.emulator.create(new_pod("z-running", gpu=6, hca=None, quota="zeta-own", annotations={QUEUE_ANNO: "zeta"}))
        for j in range(4):
            h.emulator.create(new_pod(f"a-{j}", gpu=1, hca=None, annotations={QUEUE_ANNO: "alpha"}))
            h.emulator.create(new_pod(f"z-{j}", gpu=1, hca=None, annotations={QUEUE_ANNO: "zeta"}))
        await h.settle()
        reports = await h.cycles_until_quiet()
        order = _claim_order(h, reports)
        # zeta's share is 6/64/3 = 2/64: alpha is served until it passes that (a tie goes by name)
        queue_of = {"a": "alpha", "z": "zeta"}
        assert [queue_of[n[0]] for n in order] == _weighted_drf(weights, 4, 4, held={"zeta": 6})
        assert [n[0] for n in order] == ["a", "a", "a", "z"]


async def test_priority_orders_jobs_within_a_queue() -> None:
    """Three places, five jobs in one queue: the three highest priorities win, whatever their
    names or ages; the loop claims for them in priority order."""
    objs = [*b.seed_cluster(), *(b.quota(f"q-{i}", gpu=1, hca=None) for i in range(3))]
    prios = {"job-a": 0, "job-b": 5, "job-c": 10, "job-d": 1, "job-e": 7}
    async with hop1_cluster(objs=objs) as h:
        for name, prio in prios.items():
            h.emulator.create(new_pod(name, gpu=1, hca=None, priority=prio, annotations={QUEUE_ANNO: "research"}))
        await h.settle()
        reports = await h.cycles_until_quiet()
        assert _claim_order(h, reports) == ["job-c", "job-e", "job-b"]
        holders = sorted(p["metadata"]["name"] for p in h.pods() if annos(p).get(QUOTA))
        assert holders == ["job-b", "job-c", "job-e"]
        # a higher-priority job arriving later does not take a place away from a pending claim
        # (placed or not, a valid claim is kept); it waits for room
        h.emulator.create(new_pod("job-f", gpu=1, hca=None, priority=100, annotations={QUEUE_ANNO: "research"}))
        await h.settle()
        await h.cycles_until_quiet()
        assert QUOTA not in annos(h.pod("job-f"))
        # room appears: the highest-priority waiting job gets it, not the older ones
        h.emulator.delete("v1", "pods", "job-c", "default")
        await h.settle()
        h.clock.advance(601)  # past job-c's reservation
        await h.cycles_until_quiet()
        assert annos(h.pod("job-f")).get(QUOTA)
        assert QUOTA not in annos(h.pod("job-d")) and QUOTA not in annos(h.pod("job-a"))
