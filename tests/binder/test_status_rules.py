"""The status rules of ``extender.binder.status``, on jobs built by the real cache from API objects."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from extender.binder import status as st
from extender.cache.cache import ClusterCache
from extender.framework.session import FitStage, JobVerdict
from extender.framework.status import Reason, Status
from extender.model.job import by_precedence, governing_jobqueue
from extender.model.quota import QuotaInfo
from tests import builders as b

NOW = "2027-01-15T08:00:00Z"
LATER = "2027-01-15T09:00:00Z"


def _cache(objs: list[dict[str, Any]]) -> ClusterCache:
    cache = ClusterCache(clock=lambda: 1_800_000_000.0)
    b.feed(cache, objs)
    return cache


def _job(n: int, *, min_member: int, phases: list[str], nodes: list[str | None], bound: int = 0) -> ClusterCache:
    objs: list[dict[str, Any]] = [*b.seed_cluster(), b.queue("research"), b.podgroup("j", min_member=min_member)]
    for i in range(n):
        status = {"phase": "QuotaBound", "nodeName": f"n{i}"} if i < bound else None
        objs.append(b.quota(f"q{i}", status=status))
        objs.append(b.pod(f"j-{i}", group="j", quota=f"q{i}", index=i, phase=phases[i], node=nodes[i]))
    return _cache(objs)


def _verdict(stage: FitStage, reason: Reason, detail: str = "x") -> JobVerdict:
    return JobVerdict(stage, Status.unschedulable(reason, detail))


@pytest.mark.parametrize(
    ("phases", "nodes", "verdict", "want"),
    [
        (["Running"] * 3, ["n0", "n1", "n2"], None, "Running"),
        (["Running", "Running", "Pending"], ["n0", "n1", None], None, "Unknown"),  # 2 of minMember 3
        (["Pending"] * 3, [None] * 3, None, "Inqueue"),  # tasks hold quotas
        (
            ["Pending"] * 3,
            [None] * 3,
            _verdict(FitStage.NODE_PREDICATES, Reason.INSUFFICIENT_QUOTA_IDLE),
            st.UNSCHEDULABLE,
        ),
        (["Pending"] * 3, [None] * 3, _verdict(FitStage.JOB_QUEUE, Reason.BACKOFF), st.UNSCHEDULABLE),
        (["Pending"] * 3, [None] * 3, _verdict(FitStage.JOB_QUEUE, Reason.JOB_BLOCKED_BY_JOB_QUEUE), "Pending"),
        (["Pending"] * 3, [None] * 3, _verdict(FitStage.GANG, Reason.GANG_NOT_READY), "Pending"),
        (["Pending"] * 3, [None] * 3, _verdict(FitStage.GANG, Reason.WAITING_FOR_GANG), st.UNSCHEDULABLE),
    ],
)
def test_phase_rules(phases: list[str], nodes: list[str | None], verdict: JobVerdict | None, want: str) -> None:
    cache = _job(3, min_member=3, phases=phases, nodes=nodes)
    assert st.job_phase(cache.jobs["default/j"], verdict) == want


def test_pending_without_quotas_and_completed_after_the_pods_finish() -> None:
    cache = _cache(
        [b.queue("research"), b.podgroup("j", min_member=2), b.pod("j-0", group="j"), b.pod("j-1", group="j")]
    )
    job = cache.jobs["default/j"]
    assert st.job_phase(job, None) == "Pending"
    for name in ("j-0", "j-1"):
        pod = cache.pod_by_name("default", name)
        assert pod is not None
        done = copy.deepcopy(pod)
        done["status"]["phase"] = "Succeeded" if name == "j-0" else "Failed"
        cache.on_pod_delete(done)  # what the informer delivers (terminal pods leave the selector)
    assert st.job_phase(job, None) == "Completed"
    status = st.podgroup_status(job, cache.quotas, None, {}, NOW)
    assert (status["succeeded"], status["failed"], status["running"]) == (1, 1, 0)
    # restarted: the cache forgot the finished pods; the stored status keeps the counts and phase
    fresh = _cache([b.queue("research"), b.podgroup("j", min_member=2)])
    again = st.podgroup_status(fresh.jobs["default/j"], fresh.quotas, None, status, LATER)
    assert again == status


def test_podgroup_status_counts_and_condition_transitions() -> None:
    cache = _job(3, min_member=3, phases=["Running", "Pending", "Pending"], nodes=["n0", None, None], bound=2)
    job = cache.jobs["default/j"]
    blocked = _verdict(FitStage.NODE_PREDICATES, Reason.INSUFFICIENT_QUOTA_IDLE, "nvidia.com/gpu 8 > 7")
    first = st.podgroup_status(job, cache.quotas, blocked, {}, NOW)
    assert first["running"] == 1 and first["boundQuotas"] == 2 and first["queue"] == "research"
    (cond,) = first["conditions"]
    assert cond["type"] == "Unschedulable" and cond["status"] == "True"
    assert cond["reason"] == "InsufficientQuotaIdle" and cond["message"].startswith("NodePredicates: ")
    assert cond["lastTransitionTime"] == NOW
    # same verdict an hour later: nothing changes, so nothing is written
    assert st.podgroup_status(job, cache.quotas, blocked, first, LATER) == first
    # unblocked: the condition flips to False, with a new transition time
    cleared = st.podgroup_status(job, cache.quotas, None, first, LATER)
    (cond,) = cleared["conditions"]
    assert (cond["status"], cond["reason"], cond["lastTransitionTime"]) == ("False", "Scheduled", LATER)
    # fields of the status this module does not own are kept
    assert st.podgroup_status(job, cache.quotas, None, {**cleared, "extra": 1}, LATER)["extra"] == 1


def test_queue_status_sums_placed_tasks_per_gpu_spec_and_counts_jobs() -> None:
    objs: list[dict[str, Any]] = [
        b.node("a0", gpu_model="A100"),
        b.node("h0", gpu_model="H100"),
        b.queue("research", state="Closed"),
        b.podgroup("run", min_member=2),
        b.pod("run-0", group="run", gpu=2, hca=None, node="a0", phase="Running"),
        b.pod("run-1", group="run", gpu=4, hca=None, node="h0", phase="Running"),
        b.podgroup("wait", min_member=1),
        b.pod("wait-0", group="wait", gpu=1, hca=None),
    ]
    cache = _cache(objs)
    queue = cache.queues["research"]
    jobs = list(cache.jobs.values())
    phases = {j.key: st.job_phase(j, None) for j in jobs}
    status = st.queue_status(queue, jobs, phases, cache.nodes, {})
    assert status["allocated"] == {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "6"}
    specs = status["specAllocated"]
    assert {k: v["nvidia.com/gpu"] for k, v in specs.items()} == {
        cache.nodes["a0"].spec: "2",
        cache.nodes["h0"].spec: "4",
    }
    assert (status["running"], status["pending"], status["state"]) == (1, 1, "Closing")


def test_jobqueue_counts_admitted_blocked_and_pending_jobs() -> None:
    objs: list[dict[str, Any]] = [b.queue("research"), b.quota("q0")]
    objs += [b.podgroup("a", labels={"team": "x"}), b.pod("a-0", group="a", quota="q0")]
    objs += [b.podgroup("b", labels={"team": "x"}), b.pod("b-0", group="b")]
    objs += [b.podgroup("c", labels={"team": "x"}), b.pod("c-0", group="c")]
    objs += [b.podgroup("other", labels={"team": "y"}), b.pod("other-0", group="other")]
    objs.append(b.jobqueue("jq", selector={"matchLabels": {"team": "x"}}, max_running=2))
    cache = _cache(objs)
    jq = cache.jobqueues["jq"]
    governed = [j for j in cache.jobs.values() if governing_jobqueue(j, [jq]) is jq]
    assert sorted(j.name for j in governed) == ["a", "b", "c"]
    status = st.jobqueue_status(jq, governed, {})
    assert (status["runningJobs"], status["pendingJobs"], status["blockedJobs"]) == (1, 2, 0)
    full = st.jobqueue_status(type(jq)(jq.name, jq.selector, max_running=1), governed, {})
    assert (full["runningJobs"], full["pendingJobs"], full["blockedJobs"]) == (1, 0, 2)
    closed = st.jobqueue_status(type(jq)(jq.name, jq.selector, open=False), governed, {})
    assert (closed["pendingJobs"], closed["blockedJobs"]) == (0, 2)


def _bound(cache: ClusterCache, name: str) -> QuotaInfo:
    return cache.quotas[name]


def test_quota_reason_is_never_empty() -> None:
    objs: list[dict[str, Any]] = [
        *b.seed_cluster(),
        b.quota("free"),
        b.quota("claimed-unbound"),
        b.quota("claimed", status={"phase": "QuotaBound", "nodeName": "n0"}),
        b.quota("idle", status={"phase": "QuotaBound", "nodeName": "n1"}),
        b.quota("pinned", static_bind_node="n2", status={"phase": "QuotaBound", "nodeName": "n2"}),
        b.pod("p0", quota="claimed-unbound"),
        b.pod("p1", quota="claimed"),
    ]
    cache = _cache(objs)
    now = 1_800_000_000.0
    got = {name: st.quota_reason(q, now) for name, q in cache.quotas.items()}
    assert got == {
        "free": "Unclaimed",
        "claimed-unbound": "QuotaNotBound",
        "claimed": "Claimed",
        "idle": "Idle",
        "pinned": "StaticBind",
    }
    assert st.quota_reason(cache.quotas["free"], now, "NoZoneFits(no zone)") == "NoZoneFits"


def test_a_job_counts_in_the_jobqueue_of_highest_priority_then_first_name() -> None:
    objs: list[dict[str, Any]] = [b.queue("research"), b.podgroup("a", labels={"team": "x"}), b.pod("a-0", group="a")]
    objs += [
        b.jobqueue("low", selector={}, priority=1),
        b.jobqueue("high-b", selector={"matchLabels": {"team": "x"}}, priority=5),
        b.jobqueue("high-a", selector={"matchLabels": {"team": "x"}}, priority=5),
    ]
    cache = _cache(objs)
    ordered = by_precedence(cache.jobqueues.values())
    assert [q.name for q in ordered] == ["high-a", "high-b", "low"]
    jq = governing_jobqueue(cache.jobs["default/a"], ordered)
    assert jq is not None and jq.name == "high-a"


def test_gpus_summary_lists_the_configured_gpu_resources_in_order() -> None:
    """status.gpus (the GPUS column): only configured GPU resources, in configured order."""
    from extender.binder.plan import desired_quota_status, gpu_summary
    from extender.cache.convert import ConvertOptions
    from extender.model.resources import Resource

    req = Resource.from_list({"amd.com/gpu": "8", "gpu.intel.com/i915": "2", "rdma/hca": "8", "cpu": "4"})
    assert gpu_summary(req, ("amd.com/gpu",)) == "8 amd.com/gpu"
    assert gpu_summary(req, ("gpu.intel.com/i915", "amd.com/gpu")) == "2 gpu.intel.com/i915, 8 amd.com/gpu"
    assert gpu_summary(req, ("nvidia.com/gpu",)) == ""
    assert gpu_summary(req, ("amd.com/gpu", "amd.com/gpu")) == "8 amd.com/gpu"
    # from the quota's spec.request, with the cache's configured resources
    objs = [*b.seed_cluster(), b.queue("research"), b.quota("q0", gpu=None, request={"amd.com/gpu": "4"})]
    cache = ClusterCache(clock=lambda: 1_800_000_000.0, opts=ConvertOptions(gpu_resources=("amd.com/gpu",)))
    b.feed(cache, objs)
    assert desired_quota_status(cache, cache.quotas["q0"], 1_800_000_000.0)["gpus"] == "4 amd.com/gpu"
    default = _cache(objs)  # default --gpu-resources: nvidia.com/gpu only
    assert desired_quota_status(default, default.quotas["q0"], 1_800_000_000.0)["gpus"] == ""


def test_the_hold_is_recorded_while_it_lasts_and_read_back_by_the_cache() -> None:
    from extender.plugins.topology.holds import Hold

    cache = _job(2, min_member=2, phases=["Pending", "Pending"], nodes=[None, None])
    job = cache.jobs["default/j"]
    waiting = _verdict(FitStage.ZONE_SELECTION, Reason.NO_ZONE_FITS)
    held = st.podgroup_status(job, cache.quotas, waiting, {}, NOW, hold=Hold(("n2", "n3"), 1_800_000_000.0))
    assert held["hold"] == {"nodes": ["n2", "n3"], "since": "2027-01-15T08:00:00Z"}
    found = cache.podgroup_object("default/j")
    assert found is not None
    group = copy.deepcopy(dict(found))
    group["status"] = held
    cache.on_podgroup_update(group, group)
    assert cache.recorded_holds == {"default/j": (("n2", "n3"), 1_800_000_000.0)}
    # the hold ended: the field goes, and so does what the cache read of it
    ended = st.podgroup_status(job, cache.quotas, None, held, LATER)
    assert "hold" not in ended
    group["status"] = ended
    cache.on_podgroup_update(group, group)
    assert cache.recorded_holds == {}


@pytest.mark.parametrize(
    "hold",
    [{"nodes": [], "since": NOW}, {"nodes": ["n2"]}, {"nodes": [3], "since": NOW}, "n2", {"nodes": "n2", "since": NOW}],
)
def test_an_unreadable_recorded_hold_is_no_hold(hold: object) -> None:
    cache = _job(1, min_member=1, phases=["Pending"], nodes=[None])
    found = cache.podgroup_object("default/j")
    assert found is not None
    group = copy.deepcopy(dict(found))
    group["status"] = {"hold": hold}
    cache.on_podgroup_update(group, group)
    assert cache.recorded_holds == {}
    assert "default/j" in cache.jobs  # the PodGroup itself is read as before


def _lone_cache() -> ClusterCache:
    """A job of one pod (no PodGroup), ``default/solo``, claiming the quota ``q-solo``."""
    objs = [*b.seed_cluster(), b.queue("research"), b.quota("q-solo", gpu=8), b.pod("solo", quota="q-solo", gpu=8)]
    return _cache(objs)


def _with_quota_status(cache: ClusterCache, name: str, status: dict[str, Any]) -> None:
    found = cache.quota_object(name)
    assert found is not None
    obj = copy.deepcopy(dict(found))
    obj["status"] = status
    obj["metadata"]["resourceVersion"] = str(int(obj["metadata"].get("resourceVersion") or 0) + 1)
    cache.on_quota_update(obj, obj)


def test_the_hold_of_a_job_of_one_pod_is_recorded_on_its_quota_and_read_back() -> None:
    from extender.plugins.topology.holds import Hold

    cache = _lone_cache()
    assert not cache.jobs["default/solo"].has_podgroup
    hold = Hold(("n2",), 1_800_000_000.0)
    held = st.quota_hold_status({"phase": "QuotaEmpty"}, "default/solo", hold)
    assert held == {"phase": "QuotaEmpty", "hold": {"job": "default/solo", "nodes": ["n2"], "since": NOW}}
    _with_quota_status(cache, "q-solo", held)
    assert cache.quota_holds == {"q-solo": ("default/solo", ("n2",), 1_800_000_000.0)}
    assert cache.holds_on_record() == {"default/solo": (("n2",), 1_800_000_000.0)}
    # removing another job's hold leaves this record alone; removing this job's takes it away
    assert st.quota_hold_status(held, "default/other", None) == held
    ended = st.quota_hold_status(held, "default/solo", None)
    assert ended == {"phase": "QuotaEmpty"}
    _with_quota_status(cache, "q-solo", ended)
    assert cache.quota_holds == {} and cache.holds_on_record() == {}


def test_a_quota_record_naming_a_gang_does_not_count_and_a_deleted_quota_takes_its_record() -> None:
    cache = _job(1, min_member=1, phases=["Pending"], nodes=[None])  # default/j has a PodGroup
    name = next(iter(cache.quotas))
    _with_quota_status(cache, name, {"hold": {"job": "default/j", "nodes": ["n1"], "since": NOW}})
    assert cache.quota_holds[name][0] == "default/j"
    assert cache.holds_on_record() == {}  # a gang's hold is its PodGroup's to record
    _with_quota_status(cache, name, {"hold": {"job": "default/lone", "nodes": ["n1"], "since": NOW}})
    assert cache.holds_on_record() == {"default/lone": (("n1",), 1_800_000_000.0)}
    obj = cache.quota_object(name)
    assert obj is not None
    cache.on_quota_delete(obj)
    assert cache.holds_on_record() == {}


@pytest.mark.parametrize(
    "hold",
    [
        {"nodes": ["n2"], "since": NOW},  # no job
        {"job": "solo", "nodes": ["n2"], "since": NOW},  # not namespace/name
        {"job": "default/solo", "nodes": [], "since": NOW},
        {"job": "default/solo", "nodes": ["n2"]},
        {"job": 7, "nodes": ["n2"], "since": NOW},
        "n2",
    ],
)
def test_an_unreadable_quota_hold_is_no_hold(hold: object) -> None:
    cache = _lone_cache()
    _with_quota_status(cache, "q-solo", {"phase": "QuotaEmpty", "hold": hold})
    assert cache.quota_holds == {} and cache.holds_on_record() == {}
    assert "q-solo" in cache.quotas  # the quota itself is read as before
