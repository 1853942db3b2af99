"""Statement: the only way to change session state (seed 四 ③, Volcano's Statement).

Each operation is recorded; :meth:`Statement.discard` undoes them in reverse order and leaves the
session exactly as before (invariant 4); :meth:`Statement.commit` keeps them and returns the write
intents they imply. Plugins following allocations (zone trackers, DRF shares) get an
:class:`Event` for every operation and every undo.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from extender.framework.intents import (
    BindQuota,
    BindTask,
    ClaimQuota,
    EvictTask,
    Intent,
    ReleaseClaim,
    ReleaseQuota,
)
from extender.model.enums import Enum
from extender.model.quota import QuotaPhase
from extender.model.task import TaskStatus

if TYPE_CHECKING:
    from extender.framework.session import Session

__all__ = ["Event", "EventKind", "Statement", "StatementError"]


class StatementError(RuntimeError):
    """An operation the session's state does not allow (the action has a bug, or state drifted)."""


class EventKind(Enum):
    CLAIM = "claim"  # task → quota
    UNCLAIM = "unclaim"
    BIND_QUOTA = "bind_quota"  # quota → node
    RELEASE_QUOTA = "release_quota"
    ALLOCATE = "allocate"  # task → node
    EVICT = "evict"


class Event(NamedTuple):  # immutable like a frozen dataclass, and three times as quick to make
    kind: EventKind
    task: str = ""  # task uid
    quota: str = ""
    node: str = ""
    undo: bool = False


@dataclass(slots=True)
class _Op:
    kind: EventKind
    task: str = ""
    quota: str = ""
    node: str = ""
    prev_status: TaskStatus | None = None
    prev_node: str = ""
    prev_phase: QuotaPhase | None = None
    reason: str = ""
    claim: Any = None


class Statement:
    """A transaction over a session: record, then commit (→ intents) or discard (→ exact undo)."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.ops: list[_Op] = []
        self._open = True

    def _check_open(self) -> None:
        if not self._open:
            raise StatementError("statement already committed or discarded")

    # --- hop ①: task → quota -----------------------------------------------------------------
    def allocate_task_to_quota(self, task_uid: str, quota_name: str) -> None:
        self._check_open()
        ssn = self.ssn
        task = ssn._mut_task(task_uid)
        if task.quota:
            raise StatementError(f"task {task.key} already claims quota {task.quota}")
        if task.node:
            raise StatementError(f"task {task.key} is already on node {task.node}: it cannot claim a quota now")
        quota = ssn._mut_quota(quota_name)
        prev = task.status
        task.transition(TaskStatus.ALLOCATED_TO_QUOTA)
        try:
            claim = quota.add_claim(task)
        except Exception:
            task.status = prev
            raise
        task.quota = quota_name
        ssn._claims_changed(quota_name)
        self.ops.append(_Op(EventKind.CLAIM, task=task_uid, quota=quota_name, prev_status=prev, claim=claim))
        ssn._fire(Event(EventKind.CLAIM, task=task_uid, quota=quota_name))

    def unclaim(self, task_uid: str, reason: str) -> None:
        """Take a task's claim away (a loser of a race, or a claim that no longer fits)."""
        self._check_open()
        ssn = self.ssn
        task = ssn._mut_task(task_uid)
        if not task.quota:
            raise StatementError(f"task {task.key} claims no quota")
        if task.status not in (TaskStatus.PENDING, TaskStatus.ALLOCATED_TO_QUOTA):
            raise StatementError(f"task {task.key} is {task.status}: only a pending task may lose its claim")
        quota_name = task.quota
        quota = ssn._mut_quota(quota_name)
        claim = quota.remove_claim(task_uid)
        ssn._claims_changed(quota_name)
        prev = task.status
        task.status = TaskStatus.PENDING
        task.quota = ""
        self.ops.append(
            _Op(EventKind.UNCLAIM, task=task_uid, quota=quota_name, prev_status=prev, reason=reason, claim=claim)
        )
        ssn._fire(Event(EventKind.UNCLAIM, task=task_uid, quota=quota_name))

    # --- hop ②: quota → node -----------------------------------------------------------------
    def allocate_quota_to_node(self, quota_name: str, node_name: str, *, force: bool = False) -> None:
        """Bind a quota. ``force`` mirrors a fact (fix_quota_binding: its pods are already there)."""
        self._check_open()
        ssn = self.ssn
        quota = ssn._mut_quota(quota_name)
        if quota.node_name:
            raise StatementError(f"quota {quota_name} is already bound to {quota.node_name}")
        node = ssn._mut_node(node_name)
        node.add_quota(quota_name, quota.request, force=force)  # raises LedgerError when it does not fit
        prev_phase = quota.phase
        quota.node_name = node_name
        quota.phase = QuotaPhase.BOUND
        self.ops.append(_Op(EventKind.BIND_QUOTA, "", quota_name, node_name, None, "", prev_phase))
        event = Event(EventKind.BIND_QUOTA, "", quota_name, node_name)
        for handler in ssn._handlers[EventKind.BIND_QUOTA]:
            handler(event)

    def release_quota(self, quota_name: str, reason: str) -> None:
        self._check_open()
        ssn = self.ssn
        quota = ssn._mut_quota(quota_name)
        if not quota.node_name:
            raise StatementError(f"quota {quota_name} is not bound")
        node_name = quota.node_name
        node = ssn.node(node_name)
        if node is not None and node.has_quota(quota_name):
            ssn._mut_node(node_name).remove_quota(quota_name)
        prev_phase = quota.phase
        quota.node_name = ""
        quota.phase = QuotaPhase.EMPTY
        self.ops.append(
            _Op(EventKind.RELEASE_QUOTA, quota=quota_name, node=node_name, prev_phase=prev_phase, reason=reason)
        )
        ssn._fire(Event(EventKind.RELEASE_QUOTA, quota=quota_name, node=node_name))

    # --- hop ③ / TN path: task → node --------------------------------------------------------
    def allocate(self, task_uid: str, node_name: str) -> None:
        self._check_open()
        ssn = self.ssn
        task = ssn._mut_task(task_uid)
        if task.node:
            raise StatementError(f"task {task.key} is already on node {task.node}")
        prev_status, prev_node = task.status, task.node
        node = ssn._mut_node(node_name)
        task.transition(TaskStatus.ALLOCATED)
        task.node = node_name
        try:
            node.add_task(task)  # raises LedgerError when it does not fit idle
        except Exception:
            task.status, task.node = prev_status, prev_node
            raise
        self.ops.append(
            _Op(EventKind.ALLOCATE, task=task_uid, node=node_name, prev_status=prev_status, prev_node=prev_node)
        )
        ssn._fire(Event(EventKind.ALLOCATE, task=task_uid, node=node_name, quota=task.quota))

    def evict(self, task_uid: str, reason: str) -> None:
        self._check_open()
        ssn = self.ssn
        task = ssn._mut_task(task_uid)
        if not task.node:
            raise StatementError(f"task {task.key} is not on a node")
        current = ssn.node(task.node)
        if current is None or not current.has_task(task_uid):
            raise StatementError(f"task {task.key} is not accounted on node {task.node}")
        prev = task.status
        task.transition(TaskStatus.RELEASING)
        node = ssn._mut_node(task.node)
        node.update_task(task)
        self.ops.append(_Op(EventKind.EVICT, task=task_uid, node=task.node, prev_status=prev, reason=reason))
        ssn._fire(Event(EventKind.EVICT, task=task_uid, node=task.node))

    # --- end ---------------------------------------------------------------------------------
    def discard(self) -> None:
        """Undo every operation in reverse order; the session is exactly as before."""
        self._check_open()
        ssn = self.ssn
        for op in reversed(self.ops):
            k = op.kind
            if k is EventKind.CLAIM:
                task = ssn._mut_task(op.task)
                ssn._mut_quota(op.quota).remove_claim(op.task)
                ssn._claims_changed(op.quota)
                task.quota = ""
                task.status = op.prev_status or TaskStatus.PENDING
            elif k is EventKind.UNCLAIM:
                task = ssn._mut_task(op.task)
                ssn._mut_quota(op.quota).restore_claim(op.claim)
                ssn._claims_changed(op.quota)
                task.quota = op.quota
                task.status = op.prev_status or TaskStatus.ALLOCATED_TO_QUOTA
            elif k is EventKind.BIND_QUOTA:
                ssn._mut_node(op.node).remove_quota(op.quota)
                quota = ssn._mut_quota(op.quota)
                quota.node_name = ""
                quota.phase = op.prev_phase or QuotaPhase.EMPTY
            elif k is EventKind.RELEASE_QUOTA:
                quota = ssn._mut_quota(op.quota)
                node = ssn.node(op.node)
                if node is not None:
                    ssn._mut_node(op.node).add_quota(op.quota, quota.request, force=True)
                quota.node_name = op.node
                quota.phase = op.prev_phase or QuotaPhase.BOUND
            elif k is EventKind.ALLOCATE:
                task = ssn._mut_task(op.task)
                ssn._mut_node(op.node).remove_task(op.task)
                task.status = op.prev_status or TaskStatus.PENDING
                task.node = op.prev_node
            elif k is EventKind.EVICT:
                task = ssn._mut_task(op.task)
                task.status = op.prev_status or TaskStatus.RUNNING
                ssn._mut_node(op.node).update_task(task)
            ssn._fire(Event(k, task=op.task, quota=op.quota, node=op.node, undo=True))
        self.ops.clear()
        self._open = False

    def commit(self) -> list[Intent]:
        """Keep the operations; return (and add to the session) the writes they imply."""
        self._check_open()
        ssn = self.ssn
        out: list[Intent] = []
        for op in self.ops:
            k = op.kind
            if k is EventKind.BIND_QUOTA:  # the binder's bulk
                out.append(BindQuota(op.quota, op.node))
            elif k is EventKind.CLAIM:
                t = ssn.task(op.task)
                assert t is not None
                out.append(ClaimQuota(t.uid, t.namespace, t.name, op.quota))
            elif k is EventKind.UNCLAIM:
                t = ssn.task(op.task)
                assert t is not None
                out.append(ReleaseClaim(t.uid, t.namespace, t.name, op.quota, op.reason))
            elif k is EventKind.RELEASE_QUOTA:
                out.append(ReleaseQuota(op.quota, op.node, op.reason))
            elif k is EventKind.ALLOCATE:
                t = ssn.task(op.task)
                assert t is not None
                out.append(BindTask(t.uid, t.namespace, t.name, op.node, t.quota))
            elif k is EventKind.EVICT:
                t = ssn.task(op.task)
                assert t is not None
                out.append(EvictTask(t.uid, t.namespace, t.name, op.node, op.reason))
        self._open = False
        ssn.intents.extend(out)
        return out
