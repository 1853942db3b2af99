"""Who ``reclaim`` may answer as a victim, whatever the policy's ``job.victims`` stage says.

The seed (五: "victim 只在抢占者自己的绑定节点上找 spot task") and Kubernetes' preemption (a pod
preempts only pods of lower priority; kube-scheduler marks each victim "preempting to
accommodate a higher priority pod") bound the victims: spot pods on the preemptor's node, of
lower priority than the preemptor. The ``job.victims`` stage narrows that set (conformance keeps
critical pods, a plugin may keep more); it never widens it. Before, a policy whose stage left
out ``priority`` (``job.victims: sylas``) answered a spot pod of higher priority, one that left
out ``sylas`` answered quota pods of other jobs, and one where no enabled plugin implements the
stage answered every pod of the node.
"""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st

from extender import wellknown
from extender.actions import reclaim
from extender.cache.cache import ClusterCache
from extender.conf import default_policy_text, load_policy_text
from extender.framework.policy import Policy
from extender.framework.session import Session
from extender.plugins.conformance import is_critical
from tests import builders as b
from tests.core.props import PROPERTY

NOW = 1_800_000_000.0
PREEMPTOR_PRIORITY = 100


def _policy(victims: str | None) -> Policy:
    """The default policy with ``job.victims: <victims>``; None: without the plugins that implement
    the stage (sylas, priority, conformance), so that no plugin answers it."""
    doc = yaml.safe_load(default_policy_text())
    if victims is not None:
        doc["stages"]["job.victims"] = victims
        return load_policy_text(yaml.safe_dump(doc), f"job.victims: {victims}")
    for name in ("sylas", "priority", "conformance"):
        del doc["plugins"][name]
    stages = doc["stages"]
    del stages["job.victims"]
    stages["job.order"] = "first_not_pass(jobqueue, drf)"
    stages["qn.node_order"] = "sum(topology, 2*binpack, nodeorder)"
    stages["tn.predicate"] = "joint(predicates, quotapredicates, storage, topology)"
    stages["tn.node_order"] = "sum(binpack, nodeorder)"
    return load_policy_text(yaml.safe_dump(doc), "no job.victims plugin")


POLICIES = {
    v: _policy(v)
    for v in (
        "intersect(sylas, priority, conformance)",
        "sylas",
        "priority",
        "conformance",
        "or(sylas, priority)",
        None,
    )
}


@st.composite
def neighbours(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Pods running on n0 beside the preemptor's room: spot pods, a quota pod of another job,
    pods of other schedulers; of lower, equal or higher priority; some in kube-system."""
    pods: list[dict[str, Any]] = []
    free = 8 - 2  # q1 (2 GPUs) is bound to n0 too
    for i in range(draw(st.integers(1, 5))):
        gpu = draw(st.integers(1, 2))
        if gpu > free:
            break
        free -= gpu
        kind = draw(st.sampled_from(["spot", "spot", "quota", "other"]))
        ns = draw(st.sampled_from(["batch", "batch", "kube-system"]))
        prio = draw(st.sampled_from([0, 50, PREEMPTOR_PRIORITY, 500]))
        extra = {wellknown.RESOURCE_SPOT_GPU: str(gpu)} if kind == "spot" else None
        pods.append(
            b.pod(
                f"p{i}",
                namespace=ns,
                group=f"g{i}" if kind == "spot" else None,
                quota="q1" if kind == "quota" else None,
                gpu=gpu,
                hca=None,
                extra=extra,
                node="n0",
                phase="Running",
                priority=prio,
                scheduler="default-scheduler" if kind == "other" else wellknown.SCHEDULER_NAME,
            )
        )
    return pods


def _session(pods: list[dict[str, Any]], gpu: int, policy: Policy, *, never: bool = False) -> Session:
    """n0 (8 GPUs, 8 spot GPUs) with ``pods`` running, q0 (``gpu``) and q1 (2 GPUs) bound there,
    and the preemptor ``train-0`` claiming q0 (``never``: its ``preemptionPolicy`` is Never)."""
    objs: list[dict[str, Any]] = [
        b.queue("research"),
        b.node("n0", extra_allocatable={wellknown.RESOURCE_SPOT_GPU: "8"}),
        b.quota("q0", gpu=gpu, hca=1, status={"phase": "QuotaBound", "nodeName": "n0"}),
        b.quota("q1", gpu=2, hca=0, status={"phase": "QuotaBound", "nodeName": "n0"}),
        b.pod("train-0", quota="q0", gpu=gpu, hca=1, priority=PREEMPTOR_PRIORITY),
        *pods,
    ]
    if never:
        objs[4]["spec"]["preemptionPolicy"] = "Never"
    objs += [b.podgroup(f"g{i}", namespace=p["metadata"]["namespace"], min_member=1) for i, p in enumerate(pods)]
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, objs)
    assert not cache.conversion_errors
    return Session(cache.snapshot(NOW), policy)


@PROPERTY
@given(neighbours(), st.sampled_from([2, 4, 6]), st.sampled_from(sorted(POLICIES, key=str)))
def test_victims_are_lower_priority_spot_pods_of_the_node_whatever_the_policy(
    pods: list[dict[str, Any]], gpu: int, victims: str | None
) -> None:
    ssn = _session(pods, gpu, POLICIES[victims])
    preemptor = next(t for j in ssn.jobs() for t in j.tasks.values() if t.name == "train-0")
    out = reclaim.reclaim(ssn, preemptor, {"n0": []})
    node = ssn.node("n0")
    assert node is not None
    room = node.idle.clone()
    for uid in out.victims.get("n0", []):
        t = ssn.task(uid)
        assert t is not None and t.node == "n0" and node.has_task(uid)
        assert t.spot, f"{t.key} is no spot pod ({victims})"
        assert t.priority < preemptor.priority, f"{t.key} has priority {t.priority} ({victims})"
        if victims is not None and "conformance" in victims and not victims.startswith("or"):
            assert not is_critical(t)
        room.iadd(t.request)
    if "n0" in out.victims:
        assert not preemptor.request.shortfalls(room)


def test_a_higher_priority_spot_pod_is_no_victim_even_if_the_policy_forgets_priority() -> None:
    """``job.victims: sylas``: a 500-priority spot pod holds the GPUs a 100-priority quota pod
    needs; kube-scheduler would never propose it, and reclaim does not answer it either."""
    spot = b.running_spot_pod("spot-0", namespace="batch", group="g0", gpu=6, priority=500)
    ssn = _session([spot], 4, POLICIES["sylas"])
    preemptor = next(t for j in ssn.jobs() for t in j.tasks.values() if t.name == "train-0")
    out = reclaim.reclaim(ssn, preemptor, {"n0": []})
    assert out.victims == {} and "n0" in out.dropped, out


def _terminating(pod: dict[str, Any], *, preempted: bool) -> dict[str, Any]:
    pod["metadata"]["deletionTimestamp"] = "2027-01-15T08:00:00Z"
    if preempted:  # kube-scheduler marks a victim before it deletes it
        condition = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
        pod["status"]["conditions"] = [condition]
    return pod


def _spot(name: str, started: str) -> dict[str, Any]:
    pod = b.pod(
        name,
        namespace="batch",
        group=name,
        gpu=4,
        hca=None,
        extra={wellknown.RESOURCE_SPOT_GPU: "4"},
        node="n0",
        phase="Running",
    )
    pod["status"]["startTime"] = started
    return pod


def test_a_victim_already_preempted_for_another_pod_is_not_answered_again() -> None:
    """n0's GPUs: young (started an hour ago) and old (a day ago), spot pods of 4 GPUs each;
    young was preempted for another quota's pod (terminating, its room promised to that pod).
    A second 4-GPU quota pod must evict old: answering young again — the cheaper one to sylas —
    would nominate two pods onto one pod's room, and the second would need another preemption
    round once the first has taken it. A spot pod deleted for another reason (no preemption
    mark) is no one's room: it may still be answered."""
    for preempted, want in ((True, "old"), (False, "young")):
        young = _terminating(_spot("young", "2027-01-15T07:00:00Z"), preempted=preempted)
        old = _spot("old", "2027-01-14T08:00:00Z")
        ssn = _session([young, old], 4, POLICIES["intersect(sylas, priority, conformance)"])
        preemptor = next(t for j in ssn.jobs() for t in j.tasks.values() if t.name == "train-0")
        out = reclaim.reclaim(ssn, preemptor, {"n0": []})
        names = [t.name for t in map(ssn.task, out.victims.get("n0", [])) if t is not None]
        assert names == [want], (preempted, out)
