"""``NumPDBViolations`` of reclaim's answer: never fewer than its own victims violate.

kube-scheduler's ``SelectVictimsOnNode`` sorts every lower-priority pod of the node most
important first (higher priority, then earlier start) and walks them, taking one from each
PodDisruptionBudget the pod matches: a pod reached when a budget it matches has none left is
*violating*. ``NumPDBViolations`` is how many of its victims are violating. reclaim chooses its
own victims among those same pods, so kube-scheduler's count describes another set; the
extender does not watch PodDisruptionBudgets, so it answers the most that its victims can
violate given that count (:func:`extender.actions.reclaim.pdb_violations`). Before, it passed
kube-scheduler's count through: victims of its own, outside the proposal and protected by a
budget, were answered as 0 violations.

The oracle models the budgets (each pod in at most one, as the eviction API requires) and
kube-scheduler's classification; the proposal is any set of lower-priority pods, its count the
oracle's.
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

NOW = dt.datetime(2026, 11, 29, 9, 0, tzinfo=dt.UTC).timestamp()  # an hour after 08:00


def _spot(i: int, gpu: int, priority: int, minute: int) -> dict[str, Any]:
    pod = b.pod(
        f"s{i}",
        namespace="batch",
        group=f"g{i}",
        gpu=gpu,
        hca=None,
        extra={wellknown.RESOURCE_SPOT_GPU: str(gpu)},
        node="n0",
        phase="Running",
        priority=priority,
    )
    pod["status"]["startTime"] = f"2026-11-29T08:{minute:02d}:00Z"
    return pod


def _session(pods: list[dict[str, Any]], gpu: int) -> tuple[Session, TaskInfo]:
    objs: list[dict[str, Any]] = [
        b.queue("research"),
        b.node("n0", extra_allocatable={wellknown.RESOURCE_SPOT_GPU: "8"}),
        b.quota("q0", gpu=gpu, hca=1, status={"phase": "QuotaBound", "nodeName": "n0"}),
        b.pod("train-0", quota="q0", gpu=gpu, hca=1, priority=100),
        *pods,
    ]
    objs += [b.podgroup(f"g{i}", namespace="batch", min_member=1) for i in range(len(pods))]
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, objs)
    assert not cache.conversion_errors
    ssn = Session(cache.snapshot(NOW), default_policy())
    return ssn, next(t for j in ssn.jobs() for t in j.tasks.values() if t.name == "train-0")


def violating(ssn: Session, preemptor: TaskInfo, budget_of: dict[str, tuple[int, int]]) -> set[str]:
    """kube-scheduler's violating pods among the node's lower-priority ones. ``budget_of``: pod
    name → (its budget's id, disruptions the budget allows)."""
    node = ssn.node("n0")
    assert node is not None
    lower = [t for t in map(ssn.task, node.tasks) if t is not None and t.priority < preemptor.priority]
    lower.sort(key=lambda t: (-t.priority, t.started, t.name))  # most important first
    allowed = dict(budget_of.values())
    out = set()
    for t in lower:
        if t.name in budget_of:
            pdb = budget_of[t.name][0]
            allowed[pdb] -= 1
            if allowed[pdb] < 0:
                out.add(t.uid)
    return out


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[str, tuple[int, int]], int]:
    pods: list[dict[str, Any]] = []
    budget_of: dict[str, tuple[int, int]] = {}
    budgets = [draw(st.integers(0, 2)) for _ in range(2)]
    free = 8
    for i in range(draw(st.integers(1, 6))):
        gpu = draw(st.integers(1, 3))
        if gpu > free:
            break
        free -= gpu
        pods.append(_spot(i, gpu, draw(st.sampled_from([0, 10, 500])), draw(st.integers(0, 59))))
        pdb = draw(st.sampled_from([None, 0, 1]))
        if pdb is not None:
            budget_of[f"s{i}"] = (pdb, budgets[pdb])
    return pods, budget_of, draw(st.sampled_from([2, 4, 6, 8]))


@PROPERTY
@given(cases(), st.data())
def test_the_answered_count_covers_the_victims_violations(
    case: tuple[list[dict[str, Any]], dict[str, tuple[int, int]], int], data: st.DataObject
) -> None:
    pods, budget_of, gpu = case
    ssn, preemptor = _session(pods, gpu)
    bad = violating(ssn, preemptor, budget_of)
    node = ssn.node("n0")
    assert node is not None
    lower = sorted(t.uid for t in map(ssn.task, node.tasks) if t is not None and t.priority < preemptor.priority)
    proposed = data.draw(st.lists(st.sampled_from(lower), unique=True) if lower else st.just([]))
    reported = len(bad & set(proposed))
    out = reclaim.reclaim(ssn, preemptor, {"n0": proposed}, {"n0": reported})
    if "n0" not in out.victims:
        assert "n0" not in out.pdb
        return
    victims = out.victims["n0"]
    answered = out.pdb["n0"]
    assert len(bad & set(victims)) <= answered <= len(victims)
    if set(victims) == set(proposed):
        assert answered == reported  # kube-scheduler's own count, when the victims are its own


def test_a_protected_victim_outside_the_proposal_is_counted() -> None:
    """kube-scheduler proposes s0 (no budget: 0 violations); reclaim evicts s1, the spot pod that
    has run for the shortest time (sylas' default runtime order), whose budget allows no
    disruption: the answer says 1, not kube-scheduler's 0."""
    pods = [_spot(0, 4, 0, 0), _spot(1, 4, 0, 30)]
    ssn, preemptor = _session(pods, 4)
    uid = {t.name: t.uid for j in ssn.jobs() for t in j.tasks.values()}
    assert violating(ssn, preemptor, {"s1": (0, 0)}) == {uid["s1"]}
    out = reclaim.reclaim(ssn, preemptor, {"n0": [uid["s0"]]}, {"n0": 0})
    assert out.victims == {"n0": [uid["s1"]]}, out
    assert out.pdb == {"n0": 1}
