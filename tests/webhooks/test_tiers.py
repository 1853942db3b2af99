"""Quota choice at admission: the seed's four tiers through the real TQ pipeline (over HTTPS)."""

from __future__ import annotations

from typing import Any

import pytest

from extender import wellknown
from extender.simulate.certs import TLSFiles
from tests import builders as b
from tests.webhooks import helpers as h

pytestmark = pytest.mark.anyio

NS = "ml"


def nodes(n: int = 4) -> list[dict[str, Any]]:
    return [b.node(f"N{i}") for i in range(n)]


# --- required ---------------------------------------------------------------------------------
REQUIRED = wellknown.ANNO_REQUIRED_QUOTA


async def test_a_pod_naming_a_quota_that_fits_keeps_it_even_when_another_tier_would_win(tls: TLSFiles) -> None:
    objs = [*nodes(), b.quota("q-a-bound", status=h.bound("N0")), b.quota("q-z-free")]
    state = h.make_state(objs)
    async with h.serve(state, tls) as hook:
        a = await hook.pod(h.admission_pod("mine", namespace=NS, queue_anno="research", quota="q-z-free"))
        again = await hook.again(a)
    assert a.quota == "q-z-free"
    assert a.annotations[REQUIRED] == "q-z-free"  # the creator's choice, never swapped later
    assert [op["path"] for op in a.ops] == [
        "/metadata/annotations/scheduling.infini-ai.com~1required-quota",
        "/metadata/annotations/scheduling.infini-ai.com~1claim-entry",  # the entry its claim accounts for
    ]
    assert a.response["auditAnnotations"]["tier"] == "required"
    assert len(state.inflight) == 1  # its room is held while the informer catches up
    assert again.ops == []


async def test_a_pod_naming_a_missing_quota_waits_for_it_and_says_so(tls: TLSFiles) -> None:
    objs = [*nodes(), b.quota("q-free")]
    state = h.make_state(objs)
    async with h.serve(state, tls) as hook:
        a = await hook.pod(h.admission_pod("mine", namespace=NS, queue_anno="research", quota="q-gone"))
        again = await hook.again(a)
    assert a.quota is None  # no claim on a quota it does not hold …
    assert a.annotations[REQUIRED] == "q-gone"  # … but never silently moved: it waits for that one
    assert a.reason == "WaitingForNamedQuota(pod names quota q-gone; waiting for room on it: it does not exist yet)"
    assert a.response["auditAnnotations"]["scheduling-reason"] == a.reason
    assert any("q-gone" in w for w in a.response["warnings"])
    assert again.ops == []
    assert len(state.inflight) == 0


async def test_a_pod_naming_a_full_quota_waits_for_it_and_says_what_for(tls: TLSFiles) -> None:
    objs = [
        *nodes(),
        b.quota("q-full", status=h.bound("N0")),
        b.quota("q-free"),
        b.pod("holder", namespace=NS, quota="q-full", node="N0", phase="Running", annotations=_queue("research")),
    ]
    state = h.make_state(objs)
    async with h.serve(state, tls) as hook:
        a = await hook.pod(h.admission_pod("mine", namespace=NS, queue_anno="research", quota="q-full"))
    assert a.quota is None, "a pod claiming a full quota would over-claim it (invariant 3)"
    assert a.annotations[REQUIRED] == "q-full"
    assert a.reason is not None
    assert a.reason.startswith(
        "WaitingForNamedQuota(pod names quota q-full; waiting for room on it: InsufficientQuota(quota q-full: "
        "nvidia.com/gpu 1 > 0"
    ), a.reason
    assert len(state.inflight) == 0


async def test_a_pod_naming_a_quota_of_another_queue_waits_and_records_why(tls: TLSFiles) -> None:
    objs = [*nodes(), b.quota("q-prod", queue="prod"), b.quota("q-research")]
    state = h.make_state(objs)
    async with h.serve(state, tls) as hook:
        a = await hook.pod(h.admission_pod("mine", namespace=NS, queue_anno="research", quota="q-prod"))
    assert a.quota is None and a.annotations[REQUIRED] == "q-prod"
    assert a.reason == (
        "WaitingForNamedQuota(pod names quota q-prod; waiting for room on it: "
        "QuotaQueueMismatch(quota q-prod serves queue prod, not research))"
    )


# --- reserved ---------------------------------------------------------------------------------
def reserved_world() -> list[dict[str, Any]]:
    """q-a (bound, room), q-b (free), q-r (free, reserved for ml/train index 2 and for pod old-7)."""
    return [
        *nodes(),
        b.podgroup("train", namespace=NS, min_member=1),
        b.quota("q-a", status=h.bound("N0")),
        b.quota("q-b"),
        b.quota(
            "q-r",
            status={
                "phase": "QuotaEmpty",
                "reservedTasks": [
                    h.reservation(job=f"{NS}/train", index=2, namespace=NS, pod_name="train-worker-2"),
                ],
            },
        ),
        b.quota(
            "q-s",
            gpu=2,
            status={
                "phase": "QuotaEmpty",
                "reservedTasks": [h.reservation(job=f"{NS}/old", index=None, namespace=NS, pod_name="old-7", gpu=2)],
            },
        ),
    ]


async def test_a_restarted_task_inherits_the_reservation_of_its_job_and_index(tls: TLSFiles) -> None:
    state = h.make_state(reserved_world())
    async with h.serve(state, tls) as hook:
        a = await hook.pod(
            h.admission_pod(None, generate_name="train-worker-", namespace=NS, group="train", labels=_kf(2))
        )
    assert a.quota == "q-r"
    assert a.response["auditAnnotations"]["tier"] == "reserved"


async def test_another_index_of_the_same_job_does_not_take_the_reserved_place(tls: TLSFiles) -> None:
    state = h.make_state(reserved_world())
    async with h.serve(state, tls) as hook:
        a = await hook.pod(
            h.admission_pod(None, generate_name="train-worker-", namespace=NS, group="train", labels=_kf(3))
        )
    assert a.quota == "q-a"  # the bound tier; q-r's only slot is held for index 2


async def test_a_pod_inherits_a_reservation_by_inherit_resource_from(tls: TLSFiles) -> None:
    state = h.make_state(reserved_world())
    pod = h.admission_pod(
        "new-7",
        namespace=NS,
        gpu=2,
        annotations={wellknown.ANNO_INHERIT_RESOURCE_FROM: "old-7", **_queue("research")},
    )
    stranger = h.admission_pod("other-7", namespace=NS, gpu=2, annotations=_queue("research"))
    async with h.serve(state, tls) as hook:
        s = await hook.pod(stranger, dry_run=True)
        a = await hook.pod(pod)
    assert a.quota == "q-s"
    assert a.response["auditAnnotations"]["tier"] == "reserved"
    assert s.quota is None and s.reason is not None  # q-s is the only 2-GPU quota and it is held


# --- bound / static ---------------------------------------------------------------------------
async def test_a_bound_quota_on_the_node_of_the_siblings_is_preferred(tls: TLSFiles) -> None:
    objs = [
        *nodes(),
        b.podgroup("train", namespace=NS, min_member=2),
        b.quota("q-a", status=h.bound("N0")),  # first by name: wins a tie
        b.quota("q-b", status=h.bound("N1")),
        b.quota("q-c"),
        b.quota("q-sib", status=h.bound("N1")),
        b.pod("train-worker-0", namespace=NS, group="train", quota="q-sib", index=0, node="N1", phase="Running"),
    ]
    state = h.make_state(objs)
    async with h.serve(state, tls) as hook:
        a = await hook.pod(h.admission_pod("train-worker-1", namespace=NS, group="train", index=1))
        lone = await hook.pod(h.admission_pod("lone", namespace=NS, queue_anno="research"), dry_run=True)
    assert a.quota == "q-b"
    assert a.response["auditAnnotations"]["tier"] == "bound"
    assert lone.quota == "q-a"  # no siblings anywhere: the tie goes to the first by name


async def test_siblings_admitted_a_moment_ago_count_before_the_informer_shows_them(tls: TLSFiles) -> None:
    objs = [
        *nodes(),
        b.podgroup("train", namespace=NS, min_member=3),
        b.quota("q-a", status=h.bound("N0")),
        b.quota("q-b", status=h.bound("N1")),
        b.quota("q-c", status=h.bound("N1")),
        b.quota("q-sib", status=h.bound("N1")),
    ]
    state = h.make_state(objs)
    async with h.serve(state, tls) as hook:
        # worker 0 is the only admitted sibling, in flight on q-sib (named by the pod: required)
        first = await hook.pod(h.admission_pod("train-worker-0", namespace=NS, group="train", quota="q-sib"))
        second = await hook.pod(h.admission_pod("train-worker-1", namespace=NS, group="train"))
    assert first.quota == "q-sib"
    assert second.quota == "q-b"  # N1, where the in-flight sibling's quota is, not q-a on N0


async def test_a_statically_bound_quota_beats_a_free_one(tls: TLSFiles) -> None:
    objs = [*nodes(), b.quota("q-a-free"), b.quota("q-b-static", static_bind_node="N2")]
    state = h.make_state(objs)
    async with h.serve(state, tls) as hook:
        a = await hook.pod(h.admission_pod("p", namespace=NS, queue_anno="research"))
    assert a.quota == "q-b-static"
    assert a.response["auditAnnotations"]["tier"] == "static"


# --- free, shared queues, affinity ------------------------------------------------------------
async def test_a_free_quota_of_the_queue_is_taken_when_nothing_better_exists(tls: TLSFiles) -> None:
    objs = [*nodes(), b.quota("q-other", queue="prod"), b.quota("q-x"), b.quota("q-y")]
    state = h.make_state(objs)
    async with h.serve(state, tls) as hook:
        a = await hook.pod(h.admission_pod("p", namespace=NS, queue_anno="research"))
    assert a.quota == "q-x"
    assert a.response["auditAnnotations"]["tier"] == "free"


async def test_a_quota_shared_with_the_queue_is_used(tls: TLSFiles) -> None:
    objs = [*nodes(), b.quota("q-prod", queue="prod", shared_queues=["research"]), b.quota("q-dev", queue="dev")]
    state = h.make_state(objs)
    async with h.serve(state, tls) as hook:
        a = await hook.pod(h.admission_pod("p", namespace=NS, queue_anno="research"))
        dev = await hook.pod(h.admission_pod("d", namespace=NS, queue_anno="ops"))
    assert a.quota == "q-prod"
    assert dev.quota is None
    assert dev.reason == "NoQuota(queue ops has no quota with room left)"


async def test_pod_to_quota_affinity_is_respected(tls: TLSFiles) -> None:
    team_a_only = {"podAffinity": {"podSelector": {"matchLabels": {"team": "a"}}}}
    objs = [*nodes(), b.quota("q-1-team-a", affinity=team_a_only), b.quota("q-2")]
    state = h.make_state(objs)
    async with h.serve(state, tls) as hook:
        outsider = await hook.pod(h.admission_pod("x", namespace=NS, queue_anno="research"), dry_run=True)
        member = await hook.pod(
            h.admission_pod("y", namespace=NS, queue_anno="research", labels={"team": "a"}), dry_run=True
        )
    assert outsider.quota == "q-2"
    assert member.quota == "q-1-team-a"


async def test_the_queue_of_the_podgroup_decides_for_a_group_pod(tls: TLSFiles) -> None:
    objs = [
        *nodes(),
        b.podgroup("g", namespace=NS, queue="prod"),
        b.quota("q-research"),
        b.quota("q-prod", queue="prod"),
    ]
    state = h.make_state(objs)
    async with h.serve(state, tls) as hook:
        a = await hook.pod(h.admission_pod(None, generate_name="g-", namespace=NS, group="g"))
    assert a.quota == "q-prod"


async def test_a_lone_pod_without_a_queue_annotation_uses_the_default_queue(tls: TLSFiles) -> None:
    objs = [*nodes(), b.quota("q-research"), b.quota("q-default", queue="default")]
    state = h.make_state(objs)
    async with h.serve(state, tls) as hook:
        a = await hook.pod(h.admission_pod("p", namespace=NS))
    assert a.quota == "q-default"


# --- no quota ---------------------------------------------------------------------------------
async def test_no_room_left_admits_the_pod_with_the_reason_recorded(tls: TLSFiles) -> None:
    objs = [
        *nodes(),
        b.quota("q-0", status=h.bound("N0")),
        b.pod("holder", namespace=NS, quota="q-0", node="N0", phase="Running", annotations=_queue("research")),
    ]
    state = h.make_state(objs)
    async with h.serve(state, tls) as hook:
        a = await hook.pod(h.admission_pod("p", namespace=NS, queue_anno="research"))
        again = await hook.again(a)
    assert a.quota is None
    assert a.reason == "NoQuota(queue research has no quota with room left)"
    assert a.response["auditAnnotations"]["scheduling-reason"] == a.reason
    assert a.response["warnings"] == [
        "sky-scheduler: no quota at admission: NoQuota(queue research has no quota with room left); "
        "the binder loop takes over"
    ]
    assert again.ops == []
    assert len(state.inflight) == 0


async def test_quotas_that_all_refuse_the_pod_are_summarised_by_reason(tls: TLSFiles) -> None:
    team_b_only = {"podAffinity": {"podSelector": {"matchLabels": {"team": "b"}}}}
    objs = [
        *nodes(),
        b.quota("q-1", gpu=2, affinity=team_b_only),
        b.quota("q-2", gpu=2, affinity=team_b_only),
        b.quota("q-3", gpu=1),
    ]
    state = h.make_state(objs)
    async with h.serve(state, tls) as hook:
        a = await hook.pod(h.admission_pod("p", namespace=NS, queue_anno="research", gpu=2))
    assert a.reason == (
        "NoQuota(queue research has no quota that fits: 2× PodQuotaAffinityNotMatch, 1× InsufficientQuota)"
    )


async def test_a_job_held_by_a_closed_jobqueue_gets_no_quota(tls: TLSFiles) -> None:
    objs = [
        *nodes(),
        b.podgroup("llm-1", namespace=NS, labels={"team": "llm"}),
        b.jobqueue("llm", selector={"matchLabels": {"team": "llm"}}, state="Closed"),
        b.quota("q-0"),
    ]
    state = h.make_state(objs)
    async with h.serve(state, tls) as hook:
        a = await hook.pod(h.admission_pod("llm-1-w-0", namespace=NS, group="llm-1"))
    assert a.quota is None
    assert a.reason == "JobBlockedByJobQueue(jobqueue llm is closed)"
    assert a.annotations[wellknown.ANNO_TASK_INDEX] == "0"


async def test_a_previous_reason_is_removed_when_a_quota_is_found(tls: TLSFiles) -> None:
    objs = [*nodes(), b.quota("q-0")]
    state = h.make_state(objs)
    pod = h.admission_pod(
        "p",
        namespace=NS,
        annotations={wellknown.ANNO_SCHEDULING_REASON: "NoQuota(old)", **_queue("research")},
    )
    async with h.serve(state, tls) as hook:
        a = await hook.pod(pod)
    assert a.quota == "q-0"
    assert wellknown.ANNO_SCHEDULING_REASON not in a.annotations
    assert {"op": "remove", "path": "/metadata/annotations/scheduling.infini-ai.com~1scheduling-reason"} in a.ops


async def test_before_the_cache_is_synced_pods_get_no_quota_and_a_warning(tls: TLSFiles) -> None:
    objs = [*nodes(), b.quota("q-0")]
    state = h.make_state(objs, synced=False, namespaces={"team": {wellknown.LABEL_INJECT: "enabled"}})
    async with h.serve(state, tls) as hook:
        ours = await hook.pod(h.admission_pod("w-3", namespace=NS, queue_anno="research"))
        injected = await hook.pod(h.admission_pod("i-1", namespace="team", scheduler="default-scheduler"))
    assert ours.quota is None and ours.reason is None
    assert ours.annotations[wellknown.ANNO_TASK_INDEX] == "3"
    assert "still syncing" in ours.response["warnings"][0]
    # routing does not need the cache: an injected pod still reaches our scheduler
    assert injected.pod["spec"]["schedulerName"] == wellknown.SCHEDULER_NAME
    assert injected.quota is None
    assert len(state.inflight) == 0


async def test_a_spot_pod_gets_no_quota(tls: TLSFiles) -> None:
    objs = [*nodes(), b.quota("q-0")]
    state = h.make_state(objs)
    pod = h.admission_pod("spot-1", namespace=NS, gpu=None, hca=None, extra={wellknown.RESOURCE_SPOT_GPU: "1"})
    async with h.serve(state, tls) as hook:
        a = await hook.pod(pod)
    assert a.quota is None and a.reason is None
    assert a.annotations == {wellknown.ANNO_TASK_INDEX: "1"}


# --- helpers ----------------------------------------------------------------------------------
def _queue(name: str) -> dict[str, str]:
    return {wellknown.ANNO_QUEUE_NAME: name}


def _kf(index: int) -> dict[str, str]:
    return {"training.kubeflow.org/replica-index": str(index)}


def _from_template(quota: str) -> dict[str, Any]:
    """A pod of a ``generateName`` template whose creator names ``quota``."""
    return h.admission_pod(None, generate_name="web-7d9f-", namespace=NS, queue_anno="research", quota=quota)


async def test_pods_of_one_template_naming_a_quota_each_keep_the_creators_choice(tls: TLSFiles) -> None:
    """Two pods from one ``generateName`` template that names quota ``q-two`` (room for both):
    at admission they share the stand-in name, so the second is not the first one re-invoked —
    each keeps the creator's choice in required-quota and gets the quota."""
    state = h.make_state([*nodes(), b.quota("q-two", gpu=2, hca=2)])
    async with h.serve(state, tls) as hook:
        first = await hook.pod(_from_template("q-two"))
        second = await hook.pod(_from_template("q-two"))
        again = await hook.again(second)  # the second one re-invoked is still recognised
    for a in (first, second):
        assert a.quota == "q-two" and a.annotations[REQUIRED] == "q-two"
        assert a.response["auditAnnotations"]["tier"] == "required"
    assert len(state.inflight) == 2
    assert again.ops == []


async def test_a_sibling_from_the_same_template_does_not_take_a_full_named_quota(tls: TLSFiles) -> None:
    """The same template naming a one-pod quota: the first pod holds its room in flight, and the
    second — a new pod, not the first one re-invoked — waits for that quota."""
    state = h.make_state([*nodes(), b.quota("q-one", gpu=1, hca=1)])
    async with h.serve(state, tls) as hook:
        first = await hook.pod(_from_template("q-one"))
        second = await hook.pod(_from_template("q-one"))
    assert first.quota == "q-one"
    assert second.quota is None and second.annotations[REQUIRED] == "q-one"
    assert second.reason is not None and second.reason.startswith("WaitingForNamedQuota(")


# --- a pod that asks for no GPU -------------------------------------------------------------------
LAUNCHER_REQUEST = {"rdma/hca": "1", "cpu": "2", "memory": "8Gi"}


async def test_a_gpu_less_pod_given_a_gpu_quota_is_told_the_gpus_stay_idle(tls: TLSFiles) -> None:
    """An MPIJob launcher (no GPU) in a queue whose quotas all hold 8 GPUs is admitted into one —
    and warned: those GPUs stay idle while it runs (kubectl shows the warning)."""
    objs = [*nodes(), b.quota("q-worker", gpu=8, hca=8)]
    state = h.make_state(objs)
    async with h.serve(state, tls) as hook:
        a = await hook.pod(
            h.admission_pod("launcher", namespace=NS, queue_anno="research", gpu=None, cpu="2", memory="8Gi")
        )
    assert a.quota == "q-worker"
    assert any(
        "asks for no GPU" in w and "q-worker holds 8 nvidia.com/gpu" in w for w in a.response.get("warnings", [])
    ), a.response


async def test_a_gpu_less_pod_in_a_quota_sized_to_it_is_not_warned(tls: TLSFiles) -> None:
    """With a quota sized to it (named so that name order would not pick it), the launcher takes
    that one, unwarned; a worker takes the GPU quota, unwarned."""
    objs = [
        *nodes(),
        b.quota("q-z-launcher", gpu=None, hca=None, request=LAUNCHER_REQUEST),
        b.quota("q-worker", gpu=8, hca=8),
    ]
    state = h.make_state(objs)
    async with h.serve(state, tls) as hook:
        a = await hook.pod(
            h.admission_pod("launcher", namespace=NS, queue_anno="research", gpu=None, cpu="2", memory="8Gi")
        )
        w = await hook.pod(h.admission_pod("worker", namespace=NS, queue_anno="research", gpu=8, hca=8))
    assert (a.quota, w.quota) == ("q-z-launcher", "q-worker")
    assert not a.response.get("warnings") and not w.response.get("warnings"), (a.response, w.response)
