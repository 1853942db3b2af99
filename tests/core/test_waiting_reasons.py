"""What the extender's filter tells kube-scheduler, per node, about a pod whose quota is not bound
(DESIGN §6: "a reason string is what the user reads in kubectl describe pod: make it say what the
pod waits for"). kube-scheduler counts identical messages over the nodes
(``0/3 nodes are available: 1 NodeNotReady(…), 2 …``): when the binder judged each node for the
quota, each node carries its own reason, not the first one of the job's summary for all."""

from __future__ import annotations

from typing import Any

from extender.actions import bind as bind_action
from extender.cache.cache import ClusterCache
from extender.conf import default_policy
from extender.framework.session import Session
from extender.scheduler import Scheduler
from tests import builders as b

NOW = 1_800_000_000.0


def filter_reasons(objs: list[dict[str, Any]], pod: str) -> dict[str, str]:
    """One binder cycle, then the filter of ``pod`` over every node: node → message."""
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, objs)
    assert not cache.conversion_errors
    verdicts = Scheduler(default_policy()).run_once(cache.snapshot(NOW)).verdicts
    ssn = Session(cache.snapshot(NOW), default_policy())
    task = next(t for j in ssn.jobs() for t in j.tasks.values() if t.name == pod)
    names = [n.name for n in ssn.nodes()]
    out = bind_action.filter_quota_pod(ssn, task, names, verdicts)
    assert not out.passed, out
    return {**out.failed, **out.unresolvable}


def test_each_node_tells_its_own_reason_when_the_binder_judged_it() -> None:
    """A 2-worker whole-node gang (no topology) on n0 (fits), n1 (not Ready), n2 and n3
    (cordoned): the first quota takes n0, the second finds no node. Both pods' filter reports n1
    not Ready and n2, n3 cordoned, in one message (kube-scheduler counts them as 2) — not, for
    all four, the first reason of the summary."""
    objs: list[dict[str, Any]] = [b.queue("research"), b.node("n0"), b.node("n1", ready=False)]
    objs += [b.node(n, unschedulable=True) for n in ("n2", "n3")]
    objs += b.training_job("train", 2, gpu=8, hca=None)
    for pod in ("train-worker-0", "train-worker-1"):
        got = filter_reasons(objs, pod)
        assert got["n1"].startswith("NodeNotReady("), got
        assert got["n2"].startswith("NodeUnschedulable(") and got["n2"] == got["n3"], got
        assert got["n0"].startswith("InsufficientQuotaIdle("), got
        assert all("not bound" in m for m in got.values()), got


def test_a_topology_gang_refused_at_zone_selection_tells_each_node_its_own_reason() -> None:
    """The same for an RDMA gang the planner refuses as a whole: three whole-node workers on one
    leaf of n0, n1 (not Ready) and n2. The gang waits for n1 (with it the leaf would hold it), and
    /diagnose says so first; but per node, n1 is the one not Ready, while n0 and n2 take a worker
    each and wait for the zone — not ``NodeNotReady(… n1)`` on all three."""
    objs: list[dict[str, Any]] = [b.queue("research"), b.node("n0"), b.node("n1", ready=False), b.node("n2")]
    objs += [b.topology(n, ["s1"]) for n in ("n0", "n1", "n2")]
    objs += b.training_job("train", 3, gpu=8, hca=1)
    got = filter_reasons(objs, "train-worker-0")
    assert got["n1"].startswith("NodeNotReady("), got
    assert got["n0"].startswith("NoZoneFits(") and got["n0"] == got["n2"], got
    assert "no zone holds 3×8 GPU" in got["n0"], got
    assert all("not bound" in m for m in got.values()), got


def verdict_and_reasons(objs: list[dict[str, Any]], pod: str) -> tuple[str, dict[str, str]]:
    """The gang's verdict (``/diagnose``, the PodGroup condition) and :func:`filter_reasons`."""
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, objs)
    verdicts = Scheduler(default_policy()).run_once(cache.snapshot(NOW)).verdicts
    job = next(k for k in verdicts if k.endswith("train"))
    return str(verdicts[job].status), filter_reasons(objs, pod)


def _leaf(*nodes: str) -> list[dict[str, Any]]:
    return [b.queue("research"), *(b.node(n) for n in nodes), *(b.topology(n, ["s1"]) for n in nodes)]


def _running(quota: str, node: str, gpu: int) -> list[dict[str, Any]]:
    """A quota bound on ``node`` and the running pod that claims it."""
    return [
        b.quota(quota, gpu=gpu, hca=None, status={"phase": "QuotaBound", "nodeName": node}),
        b.pod(f"p-{quota}", group=f"job-{quota}", quota=quota, gpu=gpu, hca=None, node=node, phase="Running"),
        b.podgroup(f"job-{quota}", min_member=1),
    ]


def _with_affinity(objs: list[dict[str, Any]], affinity: dict[str, Any]) -> list[dict[str, Any]]:
    for obj in objs:
        if obj["kind"] == "Quota" and obj["metadata"]["name"].startswith("q-train-"):
            obj["spec"]["affinity"] = affinity
    return objs


def test_a_gang_repelled_by_anti_affinity_from_the_only_node_with_room_is_told_so() -> None:
    """n0 has room for the worker but holds ``other``, which the worker's quota repels; n1 is
    full. The gang waits for the anti-affinity rule, not for room: /diagnose leads with
    ``QuotaAntiAffinity``; n0 is told that, n1 (full) that no zone has room."""
    objs = _leaf("n0", "n1")
    objs += [*_running("other", "n0", 1), *_running("big", "n1", 8)]
    objs += _with_affinity(b.training_job("train", 1, gpu=4), {"quotaAntiAffinity": [{"quotaNames": ["other"]}]})
    verdict, got = verdict_and_reasons(objs, "train-worker-0")
    assert verdict.startswith("QuotaAntiAffinity("), verdict
    assert got["n0"].startswith("QuotaAntiAffinity(") and "other" in got["n0"], got
    assert got["n1"].startswith("NoZoneFits("), got


def test_a_gang_whose_affinity_partner_sits_on_a_full_node_is_told_so() -> None:
    """The worker's quota must share a node with ``partner``, bound on n1, which is full; n0 is
    empty. /diagnose leads with ``QuotaAffinityNotMatch`` (n0 has room, the rule keeps the gang
    off it); n0 is told that, n1 that no zone has room."""
    objs = _leaf("n0", "n1")
    objs += _running("partner", "n1", 8)
    objs += _with_affinity(b.training_job("train", 1, gpu=4), {"quotaAffinity": [{"quotaNames": ["partner"]}]})
    verdict, got = verdict_and_reasons(objs, "train-worker-0")
    assert verdict.startswith("QuotaAffinityNotMatch("), verdict
    assert got["n0"].startswith("QuotaAffinityNotMatch(") and "partner" in got["n0"], got
    assert got["n1"].startswith("NoZoneFits("), got
