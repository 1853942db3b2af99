"""Reasons of the one vocabulary (seed 六 6.4) that users read in ``/diagnose``, PodGroup conditions
and the extender's answers, each produced by the smallest situation that calls for it and read
back from the stage that says it — the words a user sees are a contract, not an implementation
detail. (Reasons of placement, gangs, holds, storage and the wire have their own tests.)"""

from __future__ import annotations

from typing import Any

from extender import wellknown
from extender.cache.cache import ClusterCache
from extender.conf import default_policy
from extender.framework.session import Session
from extender.framework.status import Reason, Status
from extender.scheduler import Scheduler
from tests import builders as b
from tests.core.scenarios import binds, cycle, make_cache, policy_without, write_back

NOW = 1_800_000_000.0
Obj = dict[str, Any]
GPU_MODEL = "nvidia.com/gpu.product"


def _session(objs: list[Obj]) -> Session:
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, [b.queue("research"), *objs])
    assert not cache.conversion_errors
    return Session(cache.snapshot(NOW), default_policy())


def _task(ssn: Session, name: str) -> Any:
    return next(t for j in ssn.jobs() for t in j.tasks.values() if t.name == name)


def _reasons(status: Status) -> list[Reason]:
    return [f.reason for f in status.failures]


def test_tn_node_state_taints_selectors_and_affinity() -> None:
    taint = {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}]
            }
        }
    }
    picky = b.pod("picky", hca=None, node_selector={"pool": "a"})
    near = b.pod("near", hca=None)
    near["spec"]["affinity"] = affinity
    ssn = _session(
        [
            b.node("cordoned", unschedulable=True),
            b.node("tainted", taints=[taint], labels={"pool": "a"}),
            b.node("plain"),
            b.pod("any", hca=None),
            picky,
            near,
        ]
    )
    any_pod = _task(ssn, "any")
    node = ssn.node
    assert ssn.tn.predicate(any_pod, node("cordoned")).message() == "NodeUnschedulable(cordoned)"
    assert ssn.tn.predicate(any_pod, node("tainted")).message() == "TaintNotTolerated(dedicated=infra:NoSchedule)"
    assert ssn.tn.predicate(any_pod, node("plain")).ok
    assert ssn.tn.predicate(_task(ssn, "picky"), node("plain")).message() == "NodeSelectorMismatch(pool=a)"
    near_status = ssn.tn.predicate(_task(ssn, "near"), node("plain"))
    assert near_status.message() == "NodeAffinityMismatch(required node affinity)"


def test_qn_a_quota_of_one_gpu_model_is_kept_off_nodes_of_another() -> None:
    h100 = b.quota("q-h100", hca=None, node_selector={GPU_MODEL: "H100"})
    ssn = _session([b.node("a100", gpu_model="A100"), h100])
    quota = ssn.quota("q-h100")
    assert quota is not None and quota.spec == "H100"
    status = ssn.qn.select(quota, ssn.node("a100"))
    assert Reason.SPEC_MISMATCH in _reasons(status), status.message()
    assert "SpecMismatch(node is A100, quota is H100)" in status.message()


def test_tq_a_pod_asking_for_one_gpu_model_does_not_claim_a_quota_on_another() -> None:
    bound = b.quota("q-a100", hca=None, status={"phase": "QuotaBound", "nodeName": "a100"})
    ssn = _session([b.node("a100", gpu_model="A100"), bound, b.pod("p", hca=None, node_selector={GPU_MODEL: "H100"})])
    status = ssn.tq.predicate(_task(ssn, "p"), ssn.quota("q-a100"))
    assert Reason.QUOTA_SPEC_MISMATCH in _reasons(status), status.message()
    assert "QuotaSpecMismatch(quota q-a100 is A100, the pod asks for H100)" in status.message()


def test_tq_a_quota_pinned_to_a_node_that_is_down_is_not_claimed() -> None:
    pinned = b.quota("q-pin", hca=None, static_bind_node="down")
    pinned["status"] = {"phase": "QuotaEmpty", "staticBindStatus": {"nodeName": "down", "bound": False}}
    ssn = _session([b.node("down", ready=False), pinned, b.pod("p", hca=None)])
    status = ssn.tq.predicate(_task(ssn, "p"), ssn.quota("q-pin"))
    assert status.message() == "StaticBindNodeNotReady(quota q-pin is pinned to down)"


def test_a_closed_queue_admits_no_new_job() -> None:
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, [b.queue("research", state="Closed"), b.podgroup("late"), b.pod("late-0", group="late", hca=None)])
    ssn = Session(cache.snapshot(NOW), default_policy())
    job = ssn.job("default/late")
    assert job is not None
    assert ssn.stages.enqueueable(job).message() == "QueueClosed(queue research is closed)"


def test_a_quota_that_fits_once_an_idle_quota_is_released_says_so_and_the_release_makes_room() -> None:
    """n0's 8 GPUs are held by a bound quota nothing claims, and the policy gives idle quotas back
    only at the end of the cycle (no ``release_idle_quota``): the new quota is told
    QuotaIdleOnlyAfterRelease (a wait, not a refusal) in the cycle that releases the idle one,
    and binds there in the next. (With the default policy it binds in the first cycle:
    tests/core/test_release_idle.py.)"""
    idle = b.quota("q-idle", gpu=8, hca=None, status={"phase": "QuotaBound", "nodeName": "n0"})
    cache = make_cache([b.queue("research"), b.node("n0"), idle, b.quota("q-new", gpu=8, hca=None)])
    b.feed(cache, [b.pod("p", hca=None, gpu=8, quota="q-new")])
    sched = Scheduler(policy_without("release_idle_quota"))
    first = cycle(cache, sched)
    verdict = first.verdicts["default/p"]
    assert verdict.status.message() == "QuotaIdleOnlyAfterRelease(fits once idle quotas on the node are released)"
    assert first.quotas["q-idle"].node_name == ""  # released in the same cycle
    write_back(cache, first)
    assert binds(cycle(cache, sched, NOW + 1)) == {"q-new": "n0"}


def test_a_strict_order_gang_whose_next_rank_would_land_below_its_bound_one_waits_and_says_why() -> None:
    """Rank 0 is bound to n3 (the highest index); rank 1 needs a whole node and only n0–n2 are
    free: under strict rank order (enable-topology: "true") that would put task 1 below task 0."""
    objs = [b.queue("research"), *b.seed_cluster(leaves=1, per_leaf=4)]  # n0–n3 on s1
    job = b.training_job("t", 2, gpu=8, hca=8)
    for o in job:
        if o["kind"] == "Pod":
            o["metadata"]["annotations"][wellknown.ANNO_ENABLE_TOPOLOGY] = "true"
        elif o["metadata"]["name"] == "q-t-0":
            o["status"] = {"phase": "QuotaBound", "nodeName": "n3", "boundBy": wellknown.COMPONENT}
    result = cycle(make_cache(objs + job), Scheduler(default_policy()))
    assert binds(result) == {}
    verdict = result.verdicts["default/t"]
    assert verdict.status.message() == "TopologyOrder(task 1 would land on node index 0 < 3)"
