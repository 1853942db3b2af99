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
