"""``/diagnose``: a job stuck at each rung of the ladder, read over HTTP from the running service
on the emulator; the same reasons in the PodGroup conditions and Events the binder loop writes
and in the extender's filter answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from extender import wellknown
from extender.diagnose import UNBLOCK
from extender.framework.status import Reason
from tests import builders as b
from tests.extender.harness import Harness, harness

pytestmark = pytest.mark.anyio

Obj = dict[str, Any]


def _stuck_jobs() -> list[Obj]:
    """Four 2-node leaves' worth of A100s (two leaves of two), and one job stuck at each rung."""
    objs = b.seed_cluster(per_leaf=2)
    objs.append(b.queue("research"))
    # JobQueue: selected by a closed JobQueue
    objs.append(b.jobqueue("hold", selector={"matchLabels": {"team": "hold"}}, state="Closed"))
    objs += [b.podgroup("held", labels={"team": "hold"}), b.quota("q-held-0", gpu=1, hca=None)]
    objs.append(b.pod("held-worker-0", group="held", hca=None))
    # QuotaAssignment: its queue has no quota
    objs += [b.queue("empty"), b.podgroup("noq", min_member=2, queue="empty")]
    objs += [b.pod(f"noq-worker-{i}", group="noq", hca=None) for i in range(2)]
    # QuotaAssignment: its queue does not exist (a typo: no Queue, no quota of it)
    objs.append(b.podgroup("typo", queue="reseach"))
    objs.append(b.pod("typo-worker-0", group="typo", hca=None))
    # Gang: 3 of the 4 pods exist
    objs += [b.podgroup("gang", min_member=4)] + [b.quota(f"q-gang-{i}", gpu=1, hca=None) for i in range(3)]
    objs += [b.pod(f"gang-worker-{i}", group="gang", quota=f"q-gang-{i}", hca=None) for i in range(3)]
    # ZoneSelection: 5 whole-node RDMA workers, 4 nodes
    objs += b.training_job("wide", 5, gpu=8, hca=8)
    # NodePredicates: a 16-GPU quota, 8-GPU nodes
    objs += [b.podgroup("fat"), b.quota("q-fat-0", gpu=16, hca=None)]
    objs.append(b.pod("fat-worker-0", group="fat", quota="q-fat-0", gpu=16, hca=None))
    # ZoneSelection, never: a topology job whose quotas ask 16 GPUs of 8-GPU nodes
    objs += b.training_job("huge", 2, gpu=16, hca=8)
    # Bind: everything done but kube-scheduler's part
    objs += [b.podgroup("ready"), b.quota("q-ready-0", gpu=1, hca=None)]
    objs.append(b.pod("ready-worker-0", group="ready", quota="q-ready-0", hca=None))
    return objs


EXPECTED = {
    "held": ("JobQueue", Reason.JOB_BLOCKED_BY_JOB_QUEUE, "JobBlockedByJobQueue(jobqueue hold is closed)"),
    "noq": ("QuotaAssignment", Reason.NO_QUOTA, "NoQuota(2/2 tasks hold no quota)"),
    "typo": (
        "QuotaAssignment",
        Reason.QUEUE_NOT_FOUND,
        "QueueNotFound(queue reseach does not exist: no Queue, no quota of it)",
    ),
    "gang": ("Gang", Reason.GANG_NOT_READY, "GangNotReady(3/4 pods exist)"),
    "wide": (
        "ZoneSelection",
        Reason.NO_ZONE_FITS,
        "NoZoneFits(no zone holds 5×8 GPU: the roomiest, roce#s2, takes 2 of 5)",
    ),
    # a 16-GPU quota on 8-GPU nodes can never fit: said as such, not "free nodes" (issue 21)
    "fat": (
        "NodePredicates",
        Reason.QUOTA_LARGER_THAN_ANY_NODE,
        "QuotaLargerThanAnyNode(quota q-fat-0: no node has more than 8 nvidia.com/gpu (asks 16))",
    ),
    "huge": (
        "ZoneSelection",
        Reason.QUOTA_LARGER_THAN_ANY_NODE,
        "QuotaLargerThanAnyNode(quota q-huge-0: no node has more than 8 nvidia.com/gpu (asks 16))",
    ),
    "ready": ("Bind", Reason.WAITING_FOR_BIND, "WaitingForBind(1 pod(s) not bound yet by kube-scheduler)"),
}
RUNGS = ["JobQueue", "QuotaAssignment", "Gang", "ZoneSelection", "NodePredicates", "Bind"]


async def _stuck(h: Harness) -> None:
    h.apply(_stuck_jobs())
    await h.cycle()
    await h.cycle()


@pytest.fixture
async def stuck(tmp_path: Path) -> Any:
    async with harness(tmp_path) as h:
        await _stuck(h)
        yield h


async def test_each_rung_of_the_ladder(stuck: Harness) -> None:
    for job, (stage, reason, message) in EXPECTED.items():
        r = await stuck.ops(f"/diagnose/job/default/{job}")
        assert r.status_code == 200, job
        assert r.headers["content-type"] == "application/json"
        d = r.json()
        assert d["job"] == f"default/{job}"
        assert d["stage"] == stage, (job, d)
        assert d["reason"] == reason.value, (job, d)
        if message is not None:
            assert d["message"] == message
        assert d["unblock"] == UNBLOCK[reason] and d["unblock"]
        ladder = d["ladder"]
        # the ladder is in rung order, every rung up to the stop passed, the stop is the first failure
        names = [r["stage"] for r in ladder]
        assert names == [n for n in RUNGS if n in names]
        stop = names.index(stage)
        assert all(r["passed"] for r in ladder[:stop]), (job, ladder)
        assert ladder[stop] == {**ladder[stop], "passed": False, "reason": reason.value, "message": d["message"]}
        # the rungs after the stop were not reached, and say so (not "passed")
        assert ladder[stop + 1 :] == [
            {"stage": r["stage"], "passed": None, "reached": False} for r in ladder[stop + 1 :]
        ]


async def test_the_ladder_details(stuck: Harness) -> None:
    fat = (await stuck.ops("/diagnose/job/default/fat")).json()
    rung = next(r for r in fat["ladder"] if r["stage"] == "NodePredicates")
    assert rung["quota"] == "q-fat-0"
    assert rung["nodes"] == ["4 nodes: InsufficientQuotaIdle(nvidia.com/gpu 16 > 8)"] or rung["nodes"] == [
        "3 nodes: InsufficientQuotaIdle(nvidia.com/gpu 16 > 8)",
        "1 node: InsufficientQuotaIdle(nvidia.com/gpu 16 > 7)",
    ]
    noq = (await stuck.ops("/diagnose/job/default/noq")).json()
    rung = next(r for r in noq["ladder"] if r["stage"] == "QuotaAssignment")
    assert rung["tasksWithoutQuota"] == ["noq-worker-0", "noq-worker-1"]
    wide = (await stuck.ops("/diagnose/job/default/wide")).json()
    assert wide["topology"] is True and wide["minMember"] == 5 and wide["queue"] == "research"
    assert [t["quota"] for t in wide["tasks"]] == [f"q-wide-{i}" for i in range(5)]
    assert all("quotaNode" not in t for t in wide["tasks"])
    ready = (await stuck.ops("/diagnose/job/default/ready")).json()
    assert ready["tasks"] == [
        {
            "name": "ready-worker-0",
            "uid": stuck.pod("ready-worker-0")["metadata"]["uid"],
            "index": 0,
            "state": "AllocatedToQuota",
            "quota": "q-ready-0",
            "quotaNode": stuck.cl.quota_nodes()["q-ready-0"],
        }
    ]


async def test_stage_agrees_with_the_binders_last_cycle(stuck: Harness) -> None:
    for job in ("held", "noq", "typo", "wide", "fat", "huge"):
        d = (await stuck.ops(f"/diagnose/job/default/{job}")).json()
        assert d["lastCycle"]["stage"] == d["stage"], job
        assert d["lastCycle"]["reason"] == d["reason"], job


async def test_conditions_events_and_filter_speak_the_same_reasons(stuck: Harness) -> None:
    for job in ("held", "noq", "typo", "wide", "fat", "huge"):
        d = (await stuck.ops(f"/diagnose/job/default/{job}")).json()
        pg = stuck.emulator.get(wellknown.API_VERSION, wellknown.PODGROUPS, job, "default")
        (cond,) = [c for c in pg["status"]["conditions"] if c["type"] == "Unschedulable"]
        assert cond["status"] == "True"
        assert cond["reason"] == d["reason"], job
        # one vocabulary: a job its queue does not admit yet is Pending, a placement failure Unschedulable
        assert d["phase"] == pg["status"]["phase"] == ("Pending" if job == "held" else "Unschedulable"), job
        assert cond["message"].endswith(": " + d["lastCycle"]["message"]), job
        events = stuck.events(kind="PodGroup", name=job)
        assert [(e["type"], e["reason"], e["message"]) for e in events] == [
            ("Warning", d["reason"], cond["message"])
        ], job
    # what kube-scheduler's user reads in `kubectl describe pod`: the same reason, the same words
    wide = (await stuck.ops("/diagnose/job/default/wide")).json()
    pod = stuck.pod("wide-worker-0")
    body = (await stuck.post("filter", {"Pod": pod, "Nodes": None, "NodeNames": ["n0", "n1"]})).json()
    assert body["NodeNames"] == []
    assert body["FailedAndUnresolvableNodes"] == dict.fromkeys(
        ["n0", "n1"], "NoZoneFits(quota q-wide-0 not bound: no zone holds 5×8 GPU: the roomiest, roce#s2, takes 2 of 5)"
    )
    assert wide["message"] == "NoZoneFits(no zone holds 5×8 GPU: the roomiest, roce#s2, takes 2 of 5)"


async def test_a_placed_job_and_its_pod(stuck: Harness) -> None:
    pod = (await stuck.ops("/diagnose/pod/default/ready-worker-0")).json()
    assert pod["pod"] == "default/ready-worker-0"
    assert pod["state"] == "AllocatedToQuota" and pod["quota"] == "q-ready-0"
    assert pod["jobDiagnosis"]["stage"] == "Bind"
    attempt = await stuck.scheduler.schedule_one(stuck.pod("ready-worker-0"))
    assert attempt.message == ""
    await stuck.cl.settle()
    pod = (await stuck.ops("/diagnose/pod/default/ready-worker-0")).json()
    assert pod["node"] == attempt.node and pod["state"] == "Bound"
    job = pod["jobDiagnosis"]
    assert job["stage"] == "Placed"
    assert all(r["passed"] for r in job["ladder"])
    assert "unblock" not in job and "reason" not in job


async def test_not_found(stuck: Harness) -> None:
    r = await stuck.ops("/diagnose/job/default/nope")
    assert r.status_code == 404
    assert r.json() == {"error": "job default/nope not found: no PodGroup and no pod of that name"}
    r = await stuck.ops("/diagnose/pod/default/nope")
    assert r.status_code == 404
    assert r.json() == {"error": "pod default/nope is not one of sky-scheduler's pods"}
    stuck.apply([b.pod("theirs", scheduler="default-scheduler", gpu=None, hca=None)])
    await stuck.cl.settle()
    assert (await stuck.ops("/diagnose/pod/default/theirs")).status_code == 404
    # a lone pod is a job of one, under its own name
    stuck.apply([b.pod("lone", gpu=1, hca=None)])
    await stuck.cl.settle()
    r = await stuck.ops("/diagnose/job/default/lone")
    assert r.status_code == 200 and r.json()["podGroup"] is False


async def test_a_pod_the_scheduler_cannot_read_says_why(stuck: Harness) -> None:
    """A pod of ours whose annotations cannot be read (an unknown tier) is not in the model: its
    filter answer and /diagnose say what is wrong with it — not "not in the cache yet" (it never
    will be) or "not one of sky-scheduler's pods" (it is)."""
    bad = b.pod("bad", gpu=1, hca=None, annotations={wellknown.ANNO_HIGHEST_TIER_ALLOWED: "rack"})
    stuck.apply([bad])
    await stuck.cl.settle()
    r = await stuck.ops("/diagnose/pod/default/bad")
    assert r.status_code == 422
    assert r.json()["error"].startswith("InvalidPod(") and "tier 'rack'" in r.json()["error"]
    attempt = await stuck.scheduler.schedule_one(stuck.pod("bad"))
    assert not attempt.node
    assert "InvalidPod(" in attempt.message and "tier 'rack'" in attempt.message
    assert "not in the scheduler's cache" not in attempt.message


def test_every_reason_says_what_would_unblock_it() -> None:
    assert {r for r in Reason if not UNBLOCK.get(r)} == set()


async def test_the_time_left_of_a_back_off_is_in_diagnose_not_in_the_message(tmp_path: Path) -> None:
    """Nothing binds the pods here, so release_quota releases the job's quotas after 30 cycles
    and the job backs off 10 s: /diagnose counts the time down, the message stays the same."""
    async with harness(tmp_path) as h:
        h.apply([*b.seed_cluster(per_leaf=2), b.queue("research"), *b.training_job("idle", 2, hca=None)])
        seen: list[tuple[str, int]] = []
        for _ in range(45):
            await h.cycle()
            d = (await h.ops("/diagnose/job/default/idle")).json()
            if d.get("reason") == Reason.BACKOFF.value:
                seen.append((d["message"], d["backoff"]["remainingSeconds"]))
                assert d["backoff"]["releases"] == 1 and d["backoff"]["until"].endswith("Z")
    assert len(seen) >= 3, seen
    assert len({m for m, _ in seen}) == 1 and "retry in" not in seen[0][0]
    remaining = [r for _, r in seen]
    assert remaining == sorted(remaining, reverse=True) and remaining[0] > remaining[-1] > 0
