"""``storage``: storage-aware placement (seed 六 6.2).

A pod lists the mount points it needs in the annotation ``required-mount-points``; a node's
storage daemon reports each ready mount point as a node condition ``infiniai-fs-<id>``. A mount
point is ready when its condition is ``True`` and its heartbeat is not older than the node's
Ready transition (old daemons heartbeat less often: a tolerance, default 90 s, is allowed).
Checked at all three hops: a task claiming a bound quota (TQ), a quota with such claimants (QN)
and the final placement (TN). The scheduler only reads these conditions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

from pydantic import Field

from extender import wellknown
from extender.framework.plugin import ArgsModel
from extender.framework.session import Event, EventKind, Session
from extender.framework.status import SUCCESS, Reason, Status
from extender.model.node import NodeInfo
from extender.model.quota import QuotaInfo
from extender.model.task import TaskInfo

NAME: Final = "storage"


class StorageArgs(ArgsModel):
    heartbeat_tolerance_seconds: float = Field(90.0, ge=0)


Args = StorageArgs


def not_ready(node: NodeInfo, mount_points: Iterable[str], tolerance: float) -> list[str]:
    """The mount points not ready on ``node``: no ``infiniai-fs-<id>`` condition, not ``True``, or a
    heartbeat older than the node's Ready transition by more than ``tolerance`` seconds."""
    missing = []
    for mp in mount_points:
        cond = node.conditions.get(wellknown.STORAGE_CONDITION_PREFIX + mp)
        if cond is None or cond.status != "True" or cond.heartbeat + tolerance < node.ready_since:
            missing.append(mp)
    return missing


def describe_missing(mount_points: list[str]) -> str:
    """The failure's detail; it does not name the node (per-node reports key by node, and
    aggregates count the nodes: ``StorageNotReady(3 nodes: mount point fs1 not ready)``)."""
    noun = "mount point" if len(mount_points) == 1 else "mount points"
    return f"{noun} {', '.join(mount_points)} not ready"


class Plugin:
    NAME: Final = NAME
    Args = StorageArgs
    STAGES: Final = frozenset({"tq.predicate", "qn.predicate", "tn.predicate", "events"})
    EVENT_KINDS: Final = frozenset({EventKind.CLAIM, EventKind.UNCLAIM})  # the statement events its handler follows

    def __init__(self, args: StorageArgs) -> None:
        self.args = args

    def open(self, ssn: Session) -> dict[str, Callable[..., Any]]:
        tol = self.args.heartbeat_tolerance_seconds
        needs: dict[str, tuple[str, ...]] = {}
        by_keys: dict[tuple[tuple[object, ...], ...], tuple[str, ...]] = {}

        def check(node: NodeInfo, mps: Iterable[str]) -> Status:
            missing = not_ready(node, mps, tol)
            if missing:
                return Status.unresolvable(Reason.STORAGE_NOT_READY, describe_missing(missing))
            return SUCCESS

        def mount_points(quota: QuotaInfo) -> tuple[str, ...]:
            mps = needs.get(quota.name)
            if mps is None:
                keys = ssn.claimant_keys(quota)  # claimants that read alike need alike
                mps = by_keys.get(keys)
                if mps is None:
                    wanted = {mp for t in ssn.claimants(quota) for mp in t.mount_points}
                    mps = by_keys[keys] = tuple(sorted(wanted))
                needs[quota.name] = mps
            return mps

        def on_event(ev: Event) -> None:
            if ev.kind in (EventKind.CLAIM, EventKind.UNCLAIM):
                needs.pop(ev.quota, None)  # its claimants changed: so may the mount points

        def predicate_qn(quota: QuotaInfo, node: NodeInfo) -> Status:
            mps = mount_points(quota)
            return check(node, mps) if mps else SUCCESS

        def predicate_tq(task: TaskInfo, quota: QuotaInfo) -> Status:
            if not task.mount_points or not quota.node_name:
                return SUCCESS
            node = ssn.node(quota.node_name)
            return SUCCESS if node is None else check(node, task.mount_points)

        def predicate_tn(task: TaskInfo, node: NodeInfo) -> Status:
            return check(node, task.mount_points) if task.mount_points else SUCCESS

        return {
            "tq.predicate": predicate_tq,
            "qn.predicate": predicate_qn,
            "tn.predicate": predicate_tn,
            "events": on_event,
        }
