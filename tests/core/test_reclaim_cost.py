"""``reclaim`` evicts the spot pods the sylas eviction cost predicts (seed 六 6.1: the score predicts
which spot pods must go, grouped by PodGroup and weighed by four strategies; "抢占由 reclaim 执行",
reclaim carries that eviction out), not whatever kube-scheduler's priority-only dry run proposes.

kube-scheduler proposes the victims its dry run keeps after reprieving the most important pods
(higher priority, then earlier start): among spot pods of one priority it evicts the latest
started. The extender may answer any pod of the node (kube-scheduler looks the UIDs up on that
node, research note §2.6), and the node was chosen for the quota on the cost of the victims sylas
predicted there: those are the ones to evict.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from extender import wellknown
from extender.actions import reclaim
from extender.cache.cache import ClusterCache
from extender.conf import default_policy
from extender.framework.session import Session
from extender.model.task import TaskInfo
from tests import builders as b
from tests.core.props import PROPERTY

START = dt.datetime.fromisoformat(b.TS.replace("Z", "+00:00")).timestamp()
NOW = START + 3 * 3600


def at(seconds: float) -> str:
    return dt.datetime.fromtimestamp(START + seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def spot_pod(name: str, job: str, gpu: int, started: float, priority: int = 0) -> dict[str, Any]:
    pod = b.running_spot_pod(name, group=job, gpu=gpu, priority=priority)
    pod["status"]["startTime"] = at(started)
    return pod


def session(spot: list[dict[str, Any]], groups: dict[str, int], *, gpu: int = 4) -> tuple[Session, TaskInfo]:
    """Node n0 (8 GPUs) running ``spot``; the preemptor, of ``gpu`` GPUs and priority 100, claims a
    quota bound to n0."""
    objs: list[dict[str, Any]] = [
        b.queue("research"),
        b.node("n0", extra_allocatable={wellknown.RESOURCE_SPOT_GPU: "8"}),
    ]
    objs.append(b.quota("q0", gpu=gpu, hca=1, status={"phase": "QuotaBound", "nodeName": "n0"}))
    objs += [b.podgroup(g, min_member=m) for g, m in groups.items()]
    objs.append(b.pod("train-0", quota="q0", gpu=gpu, hca=1, priority=100))
    objs += spot
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, objs)
    assert not cache.conversion_errors
    ssn = Session(cache.snapshot(NOW), default_policy())
    task = next(t for j in ssn.jobs() for t in j.tasks.values() if t.name == "train-0")
    return ssn, task


def uid(ssn: Session, name: str) -> str:
    return next(t.uid for j in ssn.jobs() for t in j.tasks.values() if t.name == name)


def test_reclaim_evicts_one_old_spot_pod_rather_than_a_young_four_pod_gang() -> None:
    """A 4-pod spot gang started 10 minutes ago and one 4-GPU spot pod started 3 hours ago share
    n0; a 4-GPU quota pod must evict one of them. kube-scheduler proposes the gang's four pods
    (it reprieves the earlier-started pod first); sylas prices the gang higher (four pods, and a
    gang loses all its work when one goes) and predicted the single pod: reclaim evicts that."""
    gang = [spot_pod(f"gang-{i}", "gang", 1, started=3 * 3600 - 600) for i in range(4)]
    single = [spot_pod("single-0", "single", 4, started=0)]
    ssn, task = session(gang + single, {"gang": 4, "single": 1})
    proposed = {"n0": [uid(ssn, f"gang-{i}") for i in range(4)]}
    out = reclaim.reclaim(ssn, task, proposed)
    assert out.victims == {"n0": [uid(ssn, "single-0")]}, out


@st.composite
def loads(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[str, int]]:
    pods: list[dict[str, Any]] = []
    groups: dict[str, int] = {}
    free = 8
    for j in range(draw(st.integers(1, 4))):
        size, gpu = draw(st.integers(1, 3)), draw(st.sampled_from([1, 2]))
        if size * gpu > free:
            break
        free -= size * gpu
        groups[f"j{j}"] = draw(st.sampled_from([1, size]))
        started = draw(st.integers(0, 3 * 3600))
        prio = draw(st.sampled_from([0, 0, 500]))
        pods += [spot_pod(f"j{j}-{i}", f"j{j}", gpu, started, prio) for i in range(size)]
    return pods, groups


@PROPERTY
@given(loads(), st.sampled_from([1, 2, 4, 8]))
def test_reclaim_evicts_enough_and_no_group_it_could_spare(
    load: tuple[list[dict[str, Any]], dict[str, int]], gpu: int
) -> None:
    """Whatever kube-scheduler proposed, the victims free room for the preemptor, and no job's
    victims could all be given back with the preemptor still fitting."""
    pods, groups = load
    ssn, task = session(pods, groups, gpu=gpu)
    node = ssn.node("n0")
    assert node is not None
    everyone = [t.uid for j in ssn.jobs() for t in j.tasks.values() if t.node == "n0"]
    out = reclaim.reclaim(ssn, task, {"n0": everyone})
    if "n0" not in out.victims:
        return
    victims = [ssn.task(u) for u in out.victims["n0"]]
    assert all(v is not None and v.preemptible and v.priority < task.priority for v in victims)
    room = node.idle.clone()
    for v in victims:
        assert v is not None
        room.iadd(v.request)
    assert not task.request.shortfalls(room), out
    for job in {v.job for v in victims if v is not None}:
        back = room.clone()
        for v in victims:
            if v is not None and v.job == job:
                back.isub(v.request)
        assert task.request.shortfalls(back), f"{job}'s pods need not go: {out}"
