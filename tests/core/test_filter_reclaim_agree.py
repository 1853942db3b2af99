"""The filter and ``reclaim`` use one rule for who may go.

The filter answers a quota pod's node as resolvable by preemption (``LowerPriorityPodsUseNode``:
kube-scheduler then runs its preemption and calls ``/preempt``) exactly when reclaim would
answer victims there: the pods :func:`extender.framework.victims.eligible` allows (spot, on the
node in kube-scheduler's eyes, of lower priority, not already being preempted), narrowed by the
policy's ``job.victims`` stage (conformance keeps kube-system pods), free enough room. Before,
the filter counted every lower-priority spot pod of the node: a node full of kube-system spot
pods, or of pods a preemption was already deleting, was answered resolvable, kube-scheduler
ran a preemption, and reclaim refused it — the pod waited a preemption round each cycle, its
reason saying spot pods would be evicted when none could be.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from extender import wellknown
from extender.actions import reclaim
from extender.cache.cache import ClusterCache
from extender.conf import default_policy
from extender.framework.session import Session
from extender.framework.status import Reason
from extender.plugins.quotapredicates import tn_quota_task
from tests import builders as b
from tests.core.props import PROPERTY
from tests.core.test_reclaim_victims import NOW, POLICIES, _session, neighbours

PREEMPTED = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}


@PROPERTY
@given(
    neighbours(),
    st.lists(st.booleans(), min_size=5, max_size=5),
    st.sampled_from([2, 4, 6]),
    st.sampled_from(sorted(POLICIES, key=str)),
)
def test_filter_says_preemption_helps_exactly_when_reclaim_answers_victims(
    pods: list[dict[str, Any]], preempted: list[bool], gpu: int, victims: str | None
) -> None:
    for pod, gone in zip(pods, preempted, strict=False):
        if gone:
            pod["status"].setdefault("conditions", []).append(dict(PREEMPTED))
    ssn = _session(pods, gpu, POLICIES[victims])
    preemptor = next(t for j in ssn.jobs() for t in j.tasks.values() if t.name == "train-0")
    node = ssn.node("n0")
    assert node is not None
    status = tn_quota_task(ssn, preemptor, node)
    answered = reclaim.reclaim(ssn, preemptor, {"n0": []}).victims.get("n0")
    says_preempt = status.reason == Reason.LOWER_PRIORITY_PODS_USE_NODE
    assert says_preempt == bool(answered), (status, answered, victims)


def test_kube_system_spot_pods_do_not_make_a_node_resolvable() -> None:
    """Three 2-GPU spot pods of kube-system fill n0 beside a 4-GPU quota pod's room: conformance
    keeps them, reclaim answers nothing, so the filter must not send kube-scheduler to preempt."""
    pods = [b.running_spot_pod(f"p{i}", namespace="kube-system", group=f"g{i}", gpu=2, priority=0) for i in range(3)]
    ssn = _session(pods, 4, POLICIES["intersect(sylas, priority, conformance)"])
    preemptor = next(t for j in ssn.jobs() for t in j.tasks.values() if t.name == "train-0")
    node = ssn.node("n0")
    assert node is not None
    assert not reclaim.reclaim(ssn, preemptor, {"n0": []}).victims
    assert tn_quota_task(ssn, preemptor, node).reason == Reason.INSUFFICIENT_IDLE


def test_a_pod_that_never_preempts_is_not_told_preemption_will_free_its_node() -> None:
    """``preemptionPolicy: Never`` (set on the pod from its PriorityClass): kube-scheduler runs no
    preemption for it (``PodEligibleToPreemptOthers``), so no spot pod may go for it. Before, the
    filter still answered ``LowerPriorityPodsUseNode`` and ``/diagnose`` said kube-scheduler's
    preemption would evict the spot pods — the pod waited for an eviction that never comes."""
    objs: list[dict[str, Any]] = [
        b.queue("research"),
        b.node("n0", extra_allocatable={wellknown.RESOURCE_SPOT_GPU: "8"}),
        b.quota("q0", gpu=4, hca=1, status={"phase": "QuotaBound", "nodeName": "n0"}),
        b.pod("train-0", quota="q0", gpu=4, hca=1, priority=100),
    ]
    objs[-1]["spec"]["preemptionPolicy"] = "Never"
    for i in range(3):
        objs.append(b.running_spot_pod(f"s{i}", namespace="batch", group=f"g{i}", gpu=2, priority=0))
        objs.append(b.podgroup(f"g{i}", namespace="batch", min_member=1))
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, objs)
    assert not cache.conversion_errors
    ssn = Session(cache.snapshot(NOW), default_policy())
    preemptor = next(t for j in ssn.jobs() for t in j.tasks.values() if t.name == "train-0")
    node = ssn.node("n0")
    assert node is not None
    assert tn_quota_task(ssn, preemptor, node).reason == Reason.INSUFFICIENT_IDLE
    assert not reclaim.reclaim(ssn, preemptor, {"n0": []}).victims
