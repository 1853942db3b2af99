"""Task identity at hop ① (issue 18 §3): a recreated pod finds its predecessor's place even
before the predecessor's deletion is seen, and a quota the pod's creator named is never swapped.

Real HTTPS admissions into the service's webhook, the emulator as the API, the binder loop
stepped by the test.
"""

from __future__ import annotations

from typing import Any

import pytest

from extender import wellknown
from tests import builders as b
from tests.hop1.harness import QUOTA, REASON, annos, hop1_cluster, new_pod
from tests.hop1.test_race import Front
from tests.hop1.test_reservations import cluster_objs, place_job, reserved

pytestmark = pytest.mark.anyio

REQUIRED = wellknown.ANNO_REQUIRED_QUOTA


def replacement(i: int, name: str) -> dict[str, Any]:
    """Worker ``i`` recreated by its operator under a new name (JobSet style: the index label)."""
    return new_pod(
        name,
        group="train",
        gpu=8,
        hca=8,
        labels={"training.kubeflow.org/job-name": "train", "training.kubeflow.org/replica-index": str(i)},
    )


async def test_a_pod_recreated_before_the_deletion_is_seen_gets_its_predecessors_quota() -> None:
    """The operator deletes worker 1 and creates its replacement at once: the webhook answers the
    replacement while its cache still shows the old pod claiming q-1 (the deletion has not
    reached it). The replacement takes q-1 — not the spare quota on another node — and once the
    deletion is seen no reservation keeps q-1's room from it."""
    async with hop1_cluster(objs=cluster_objs(spare=True)) as h:
        placed = await place_job(h)
        q1 = placed["train-worker-1"]
        front = Front(h.apiserver)
        new = await front.admit(replacement(1, "train-worker-1-r1"))  # the old pod is still in every cache
        assert front.admitted == {"train-worker-1-r1": q1}, "the replacement did not get its predecessor's quota"
        h.emulator.delete("v1", "pods", "train-worker-1", "default")
        front.store(new)
        await h.settle()
        await h.cycles_until_quiet()
        assert reserved(h, q1) == [], "a reservation holds the room its own replacement already claims"
        assert annos(h.pod("train-worker-1-r1"))[QUOTA] == q1
        assert [t["name"] for t in h.quota(q1)["status"]["tasks"]] == ["train-worker-1-r1"]
        assert not (h.quota("q-4").get("status") or {}).get("tasks"), "the spare quota was claimed"
        await h.schedule()
        assert h.pod("train-worker-1-r1")["spec"]["nodeName"] == "n1"


async def test_a_replacement_stored_while_the_old_pod_still_runs_is_not_the_loser() -> None:
    """Both pods claim q-1 for a moment (the old one still Running in the cache): the binder's
    re-validation must not take the claim from the replacement."""
    async with hop1_cluster(objs=cluster_objs(spare=True)) as h:
        placed = await place_job(h)
        q1 = placed["train-worker-1"]
        await h.admit(replacement(1, "train-worker-1-r1"))
        await h.cycle()  # the old pod is still there
        assert annos(h.pod("train-worker-1-r1")).get(QUOTA) == q1
        h.emulator.delete("v1", "pods", "train-worker-1", "default")
        await h.settle()
        await h.cycles_until_quiet()
        assert annos(h.pod("train-worker-1-r1")).get(QUOTA) == q1
        assert reserved(h, q1) == []


async def test_a_pod_naming_a_full_quota_waits_for_it_and_is_never_given_another() -> None:
    bound = {"phase": "QuotaBound", "nodeName": "n0"}
    objs = [
        *b.seed_cluster(),
        b.quota("q-mine", gpu=8, hca=8, status=bound),
        b.quota("q-other", gpu=8, hca=8),
    ]
    research = {"scheduling.infini-ai.com/queue-name": "research"}
    async with hop1_cluster(objs=objs) as h:
        await h.admit(new_pod("holder", gpu=8, hca=8, quota="q-mine", annotations=research))
        await h.cycles_until_quiet()
        await h.schedule()
        assert h.pod("holder")["spec"]["nodeName"] == "n0"
        await h.admit(new_pod("named", gpu=8, hca=8, quota="q-mine", annotations=research))
        anns = annos(h.pod("named"))
        assert anns[REQUIRED] == "q-mine" and QUOTA not in anns
        assert anns[REASON].startswith("WaitingForNamedQuota(pod names quota q-mine"), anns[REASON]
        for _ in range(3):
            await h.cycle()
            await h.schedule()
            anns = annos(h.pod("named"))
            assert anns.get(QUOTA) in (None, "q-mine"), f"the named quota was swapped: {anns}"
            assert not h.pod("named")["spec"].get("nodeName")
        assert "q-mine" in anns[REASON]
        assert not (h.quota("q-other").get("status") or {}).get("tasks")
        # the holder finishes: the named quota is the pod's at last
        h.kubelet.set_phase(h.pod("holder"), "Succeeded")
        await h.settle()
        await h.cycles_until_quiet()
        anns = annos(h.pod("named"))
        assert anns[QUOTA] == "q-mine" and REASON not in anns


async def test_a_quota_bound_by_another_controller_stays_bound_through_the_binders_cycles() -> None:
    external = {"phase": "QuotaBound", "nodeName": "n3", "boundBy": None}
    objs = [*b.seed_cluster(), b.quota("q-ext", gpu=8, hca=8, status=external)]
    async with hop1_cluster(objs=objs) as h:
        for _ in range(4):
            await h.cycle()
        status = h.quota("q-ext")["status"]
        assert status.get("nodeName") == "n3" and status.get("phase") == "QuotaBound", status
        assert "boundBy" not in status
        # the scheduler's own bindings say so
        await h.admit(new_pod("lone", gpu=8, hca=8, annotations={"scheduling.infini-ai.com/queue-name": "research"}))
        await h.cycles_until_quiet()
        assert annos(h.pod("lone"))[QUOTA] == "q-ext"  # an externally bound quota is still offered
