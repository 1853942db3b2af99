"""The task state machine (seed 2.5): every legal edge works, every other edge raises.

The expected edges are written out here, independently of ``extender.model.task``; the full
product of statuses is enumerated.
"""

from __future__ import annotations

import itertools

import pytest

from extender.model.resources import Resource
from extender.model.task import ALIVE, ON_NODE, IllegalTransition, TaskInfo, TaskStatus

S = TaskStatus

LEGAL: dict[TaskStatus, set[TaskStatus]] = {
    # hop ① claims a quota; the spot / TN path goes straight to a node; Pipelined waits for releases
    S.PENDING: {S.ALLOCATED_TO_QUOTA, S.ALLOCATED, S.PIPELINED},
    S.ALLOCATED_TO_QUOTA: {S.PENDING, S.ALLOCATED, S.PIPELINED},
    S.ALLOCATED: {S.PENDING, S.ALLOCATED_TO_QUOTA, S.BINDING},
    S.PIPELINED: {S.PENDING, S.ALLOCATED_TO_QUOTA, S.ALLOCATED},
    S.BINDING: {S.BOUND, S.PENDING, S.ALLOCATED_TO_QUOTA},  # a failed bind goes back
    S.BOUND: {S.RUNNING, S.RELEASING, S.SUCCEEDED, S.FAILED},
    S.RUNNING: {S.RELEASING, S.SUCCEEDED, S.FAILED},
    S.RELEASING: {S.RUNNING, S.BOUND},  # an eviction undone by discard()
    S.SUCCEEDED: set(),
    S.FAILED: set(),
}

PAIRS = list(itertools.product(list(S), list(S)))


def task(status: TaskStatus) -> TaskInfo:
    return TaskInfo("uid-1", "ns", "worker-0", "ns/job", Resource({"cpu": 1000}), status=status)


def test_the_table_covers_every_status() -> None:
    assert set(LEGAL) == set(S)


@pytest.mark.parametrize(("frm", "to"), PAIRS, ids=[f"{a.value}->{b.value}" for a, b in PAIRS])
def test_transition(frm: TaskStatus, to: TaskStatus) -> None:
    t = task(frm)
    if to is frm or to in LEGAL[frm]:
        t.transition(to)
        assert t.status is to
    else:
        with pytest.raises(IllegalTransition) as err:
            t.transition(to)
        assert t.status is frm  # a refused transition changes nothing
        msg = str(err.value)
        assert "ns/worker-0" in msg
        assert frm.value in msg
        assert to.value in msg


def test_the_seed_chain_is_walkable() -> None:
    t = task(S.PENDING)
    for to in (S.ALLOCATED_TO_QUOTA, S.ALLOCATED, S.BINDING, S.BOUND, S.RUNNING, S.SUCCEEDED):
        t.transition(to)
    assert t.status is S.SUCCEEDED
    assert not t.is_alive()


def test_terminal_states_have_no_way_out() -> None:
    for terminal in (S.SUCCEEDED, S.FAILED):
        for to in S:
            if to is terminal:
                continue
            with pytest.raises(IllegalTransition):
                task(terminal).transition(to)


def test_a_pod_on_a_node_never_goes_back_to_the_quota_stages() -> None:
    for frm in (S.BOUND, S.RUNNING, S.RELEASING):
        for to in (S.PENDING, S.ALLOCATED_TO_QUOTA, S.ALLOCATED, S.PIPELINED):
            with pytest.raises(IllegalTransition):
                task(frm).transition(to)


def test_status_sets() -> None:
    assert {S.ALLOCATED, S.BINDING, S.BOUND, S.RUNNING, S.RELEASING} == ON_NODE
    assert set(S) - {S.SUCCEEDED, S.FAILED} == ALIVE
    assert S.PIPELINED not in ON_NODE  # pipelined tasks count in the node's `pipelined`, not `used`
    assert str(S.ALLOCATED_TO_QUOTA) == "AllocatedToQuota"
