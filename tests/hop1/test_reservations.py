"""Reservations (seed 2.4 ②, issue 5 §3) end to end: a restarted worker gets its place back.

A job of four whole-node RDMA workers is admitted through the webhook (HTTPS), its quotas are
bound by the binder loop, and the kube-scheduler stand-in binds the pods through the extender —
n0–n3, in rank order. Then a worker goes away in the ways a pod can, and comes back (through the
webhook again). Time is the injected clock of the cache and the loop: the TTL is crossed by
advancing it, never by sleeping.
"""

from __future__ import annotations

from typing import Any

import pytest

from extender.cache.convert import parse_time
from tests import builders as b
from tests.hop1.harness import INHERIT, QUOTA, REASON, Hop1, annos, hop1_cluster, new_pod

pytestmark = pytest.mark.anyio

TTL = 600.0  # the default (ServeSettings.reservation_ttl)
JOB = "default/train"


def worker(i: int, *, name: str | None = None) -> dict[str, Any]:
    """Worker ``i`` as the training operator creates it (Kubeflow's replica-index label, no quota)."""
    return new_pod(
        name or f"train-worker-{i}",
        group="train",
        gpu=8,
        hca=8,
        labels={"training.kubeflow.org/job-name": "train", "training.kubeflow.org/replica-index": str(i)},
    )


def stranger(name: str, *, gpu: int = 8, hca: int = 8, inherit: str | None = None) -> dict[str, Any]:
    """A pod of another job (a job of one in queue research)."""
    anns = {"scheduling.infini-ai.com/queue-name": "research"}
    if inherit:
        anns[INHERIT] = inherit
    return new_pod(name, gpu=gpu, hca=hca, annotations=anns)


def cluster_objs(*, spare: bool = False) -> list[dict[str, Any]]:
    """The seed's 8 nodes, a quota per worker (and with ``spare`` a fifth, free one)."""
    objs = b.seed_cluster()
    objs += [b.quota(f"q-{i}", gpu=8, hca=8) for i in range(5 if spare else 4)]
    objs.append(b.podgroup("train", min_member=4))
    return objs


async def place_job(h: Hop1) -> dict[str, str]:
    """Webhook → binder → kube-scheduler: the four workers run; returns pod → quota."""
    for i in range(4):
        await h.admit(worker(i))
    await h.cycles_until_quiet()
    await h.schedule()
    placed = {}
    for i in range(4):
        pod = h.pod(f"train-worker-{i}")
        assert pod["spec"].get("nodeName") == f"n{i}", (i, pod["spec"].get("nodeName"))
        assert pod["status"]["phase"] == "Running"
        placed[pod["metadata"]["name"]] = annos(pod)[QUOTA]
    assert sorted(placed.values()) == ["q-0", "q-1", "q-2", "q-3"]
    for name, q in placed.items():
        assert h.quota(q)["status"]["nodeName"] == h.pod(name)["spec"]["nodeName"]
        assert not h.quota(q)["status"].get("reservedTasks")
    return placed


def reserved(h: Hop1, quota: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = h.quota(quota)["status"].get("reservedTasks") or []
    return out


async def lose_worker(h: Hop1, i: int) -> tuple[dict[str, str], str]:
    """Place the job, delete worker ``i``'s pod and run a cycle: its quota holds one reservation.
    Returns (pod → quota, worker ``i``'s quota)."""
    placed = await place_job(h)
    quota = placed[f"train-worker-{i}"]
    h.emulator.delete("v1", "pods", f"train-worker-{i}", "default")
    await h.cycle()
    assert len(reserved(h, quota)) == 1
    return placed, quota


async def test_deleted_worker_comes_back_to_the_same_quota_and_node() -> None:
    async with hop1_cluster(objs=cluster_objs()) as h:
        placed = await place_job(h)
        q2 = placed["train-worker-2"]
        old_uid = h.pod("train-worker-2")["metadata"]["uid"]

        h.emulator.delete("v1", "pods", "train-worker-2", "default")
        deleted_at = h.clock()
        await h.cycle()
        # in between: the quota keeps its node and shows the reservation
        status = h.quota(q2)["status"]
        assert status["phase"] == "QuotaBound" and status["nodeName"] == "n2"
        assert status.get("tasks") in (None, [])
        [r] = reserved(h, q2)
        assert r["job"] == JOB and r["taskIndex"] == 2 and r["podName"] == "train-worker-2"
        assert r["podUID"] == old_uid and r["reason"] == "Deleted"
        assert r["request"] == {"nvidia.com/gpu": "8", "rdma/hca": "8"}
        assert abs(parse_time(r["expiresAt"]) - (deleted_at + TTL)) <= 1.0
        # the place is held: another job's pod gets no quota, and says why
        await h.admit(stranger("intruder"))
        anns = annos(h.pod("intruder"))
        assert QUOTA not in anns
        assert "QuotaReserved" in anns[REASON], anns[REASON]
        await h.cycle()
        assert QUOTA not in annos(h.pod("intruder")), "the loop gave the reserved place away"
        h.emulator.delete("v1", "pods", "intruder", "default")

        # the training operator recreates the worker (same job, same index) through the webhook
        await h.admit(worker(2))
        assert annos(h.pod("train-worker-2"))[QUOTA] == q2
        await h.cycle()
        assert reserved(h, q2) == [], "the reservation outlived its use"
        assert [t["name"] for t in h.quota(q2)["status"]["tasks"]] == ["train-worker-2"]
        await h.schedule()
        back = h.pod("train-worker-2")
        assert back["metadata"]["uid"] != old_uid
        assert back["spec"]["nodeName"] == "n2"
        assert h.quota(q2)["status"]["nodeName"] == "n2"


async def test_worker_restarted_right_after_its_admission_keeps_its_place() -> None:
    """The last worker admitted crashes and is recreated before any other admission: the
    webhook's in-flight entry for its first admission must not hold the reserved place against
    the restarted pod (a free spare quota would then be handed out instead — another node)."""
    async with hop1_cluster(objs=cluster_objs(spare=True)) as h:
        placed = await place_job(h)
        q3 = placed["train-worker-3"]
        h.emulator.delete("v1", "pods", "train-worker-3", "default")
        await h.settle()
        await h.admit(worker(3))
        assert annos(h.pod("train-worker-3"))[QUOTA] == q3
        await h.cycles_until_quiet()
        await h.schedule()
        assert h.pod("train-worker-3")["spec"]["nodeName"] == "n3"
        assert not h.quota("q-4")["status"].get("nodeName")


@pytest.mark.parametrize(
    ("how", "reason"),
    [("preempted", "Preempted"), ("evicted", "Evicted"), ("failed", "Failed")],
)
async def test_preempted_evicted_or_failed_worker_leaves_a_reservation(how: str, reason: str) -> None:
    async with hop1_cluster(objs=cluster_objs()) as h:
        placed = await place_job(h)
        pod = h.pod("train-worker-1")
        status = dict(pod["status"])
        if how == "preempted":
            status["conditions"] = [
                *(status.get("conditions") or []),
                {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"},
            ]
        else:
            status["phase"] = "Failed"
            if how == "evicted":
                status["reason"] = "Evicted"
        h.emulator.patch("v1", "pods", "train-worker-1", {"status": status}, namespace="default", subresource="status")
        if how == "preempted":
            h.emulator.delete("v1", "pods", "train-worker-1", "default")
        await h.cycle()
        [r] = reserved(h, placed["train-worker-1"])
        assert r["reason"] == reason and r["taskIndex"] == 1
        assert h.quota(placed["train-worker-1"])["status"]["nodeName"] == "n1"
        if how != "preempted":  # the failed pod object is still there; the operator replaces it
            h.emulator.delete("v1", "pods", "train-worker-1", "default")
        await h.admit(worker(1))
        assert annos(h.pod("train-worker-1"))[QUOTA] == placed["train-worker-1"]
        await h.schedule()
        assert h.pod("train-worker-1")["spec"]["nodeName"] == "n1"


async def test_reservation_expires_after_the_ttl_and_the_quota_is_free_again() -> None:
    async with hop1_cluster(objs=cluster_objs()) as h:
        placed, q2 = await lose_worker(h, 2)

        h.clock.advance(TTL - 10)  # not yet
        await h.cycle()
        assert len(reserved(h, q2)) == 1
        assert h.quota(q2)["status"]["nodeName"] == "n2"

        h.clock.advance(20)  # past the TTL
        await h.cycle()
        status = h.quota(q2)["status"]
        assert not status.get("reservedTasks"), "an expired reservation is still in the status"
        assert status["phase"] == "QuotaEmpty" and not status.get("nodeName"), status
        assert h.cluster.rt.cache.nodes["n2"].quota_idle.get("nvidia.com/gpu") == 8000
        # the other places are untouched
        for name, q in placed.items():
            if name != "train-worker-2":
                assert h.quota(q)["status"]["nodeName"] == h.pod(name)["spec"]["nodeName"]

        # a pod of another job can claim the free quota now (through the webhook)
        await h.admit(stranger("newcomer"))
        assert annos(h.pod("newcomer"))[QUOTA] == q2
        await h.cycles_until_quiet()
        await h.schedule()
        assert h.pod("newcomer")["spec"].get("nodeName")


async def test_inherit_resource_from_names_the_deleted_pod() -> None:
    async with hop1_cluster(objs=cluster_objs()) as h:
        _, q2 = await lose_worker(h, 2)
        # without the annotation a pod of another job is kept out ...
        await h.admit(stranger("stranger"))
        assert QUOTA not in annos(h.pod("stranger"))
        # ... with it, the reservation is its
        await h.admit(stranger("heir", inherit="train-worker-2"))
        assert annos(h.pod("heir"))[QUOTA] == q2
        await h.cycle()
        assert reserved(h, q2) == []
        assert QUOTA not in annos(h.pod("stranger"))
        await h.schedule()
        assert h.pod("heir")["spec"]["nodeName"] == "n2"
        assert not h.pod("stranger")["spec"].get("nodeName")


async def test_a_pod_that_succeeded_leaves_no_reservation() -> None:
    async with hop1_cluster(objs=cluster_objs()) as h:
        placed = await place_job(h)
        q3 = placed["train-worker-3"]
        h.kubelet.set_phase(h.pod("train-worker-3"), "Succeeded")
        await h.cycle()
        status = h.quota(q3)["status"]
        assert not status.get("reservedTasks")
        # nothing claims it and nothing holds it: back to QuotaEmpty
        assert status["phase"] == "QuotaEmpty" and not status.get("nodeName")
        # a failed worker, by contrast, does leave one (the test can tell the two apart)
        h.kubelet.set_phase(h.pod("train-worker-0"), "Failed")
        await h.cycle()
        assert [r["reason"] for r in reserved(h, placed["train-worker-0"])] == ["Failed"]
        # the free quota goes to the next pod (the loop gives it at the latest)
        await h.admit(stranger("next"))
        await h.cycle()
        assert annos(h.pod("next"))[QUOTA] == q3
        assert REASON not in annos(h.pod("next"))


async def test_the_webhook_gives_the_quota_of_a_pod_that_just_succeeded() -> None:
    async with hop1_cluster(objs=cluster_objs()) as h:
        placed = await place_job(h)
        h.kubelet.set_phase(h.pod("train-worker-3"), "Succeeded")  # the last one admitted
        await h.cycle()
        await h.admit(stranger("next"))
        assert annos(h.pod("next")).get(QUOTA) == placed["train-worker-3"]


async def test_deleting_the_podgroup_drops_the_jobs_reservations() -> None:
    async with hop1_cluster(objs=cluster_objs()) as h:
        _, q0 = await lose_worker(h, 0)
        h.emulator.delete("scheduling.infini-ai.com/v1alpha1", "podgroups", "train", "default")
        await h.cycle()
        status = h.quota(q0)["status"]
        assert not status.get("reservedTasks")
        assert status["phase"] == "QuotaEmpty"


async def test_pods_deleted_after_their_podgroup_reserve_nothing() -> None:
    """``kubectl delete -f job.yaml`` deletes the PodGroup before the pods: the job is gone, so
    its pods' deletions keep no places for a restart that will not come."""
    async with hop1_cluster(objs=cluster_objs()) as h:
        placed = await place_job(h)
        h.emulator.delete("scheduling.infini-ai.com/v1alpha1", "podgroups", "train", "default")
        for i in range(4):
            h.emulator.delete("v1", "pods", f"train-worker-{i}", "default")
        await h.cycles_until_quiet()
        for q in placed.values():
            assert reserved(h, q) == [], q
            assert h.quota(q)["status"]["phase"] == "QuotaEmpty"


@pytest.mark.parametrize("kept_by", ["another-claim", "static-bind"])
async def test_expired_reservation_leaves_the_status_of_a_quota_that_stays_bound(kept_by: str) -> None:
    """Expired reservations are dropped every cycle, also from a quota that is not released (it
    still has a claim, or it is statically bound): nothing else changes on it that cycle."""
    objs = b.seed_cluster()
    if kept_by == "another-claim":
        objs += [b.quota("q-pair", gpu=8, hca=8), b.podgroup("pair", min_member=2)]
        pods = [new_pod(f"pair-{i}", group="pair", gpu=4, hca=4, index=i) for i in range(2)]
    else:
        objs += [b.quota("q-pair", gpu=8, hca=8, static_bind_node="n5"), b.podgroup("pair", min_member=1)]
        pods = [new_pod("pair-0", group="pair", gpu=8, hca=8, index=0)]
    async with hop1_cluster(objs=objs) as h:
        for p in pods:
            await h.admit(p)
        await h.cycles_until_quiet()
        await h.schedule()
        assert all(h.pod(p["metadata"]["name"])["spec"].get("nodeName") for p in pods)
        h.emulator.delete("v1", "pods", "pair-0", "default")
        await h.cycles_until_quiet()  # the reservation is written; nothing else is going on
        assert [r["podName"] for r in reserved(h, "q-pair")] == ["pair-0"]
        h.clock.advance(TTL + 1)
        await h.cycle()
        assert reserved(h, "q-pair") == [], "the expired reservation is still shown"
        assert h.quota("q-pair")["status"]["nodeName"]
        assert not h.cluster.rt.cache.quotas["q-pair"].reserved
        # the place is free again
        await h.admit(new_pod("pair-0", group="pair", gpu=4, hca=4, index=0))
        assert annos(h.pod("pair-0")).get(QUOTA) == "q-pair", annos(h.pod("pair-0"))
