"""``predicates``: Kubernetes node filters — readiness, taints/tolerations, node selector and affinity.

For a quota (QN) the node must suit the quota *and* every task claiming it: a quota bound to a
node its pods cannot run on would only move the failure to hop ③. For a task (TN) the node must
suit the task.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from extender.framework.plugin import NoArgs
from extender.framework.session import Event, EventKind, Session
from extender.framework.status import SUCCESS, Reason, Status
from extender.model.node import NodeInfo
from extender.model.quota import QuotaInfo
from extender.model.selectors import NodeAffinity, Toleration, untolerated_taint
from extender.model.task import TaskInfo

NAME: Final = "predicates"
Args = NoArgs

_BLOCKING: Final = frozenset({"NoSchedule", "NoExecute"})


@dataclass(slots=True)  # not frozen: made once per quota on the hot path, never changed
class _Constraints:
    tolerations: tuple[tuple[Toleration, ...], ...]  # each set must tolerate every blocking taint
    selectors: tuple[Mapping[str, str], ...]
    affinities: tuple[NodeAffinity, ...]


def node_state(node: NodeInfo) -> Status:
    if not node.ready:
        return Status.unresolvable(Reason.NODE_NOT_READY, node.name)
    if node.unschedulable:
        return Status.unresolvable(Reason.NODE_UNSCHEDULABLE, node.name)
    return SUCCESS


def _check(c: _Constraints, node: NodeInfo) -> Status:
    if not node.ready or node.unschedulable:
        return node_state(node)
    if node.taints:
        for tols in c.tolerations:
            taint = untolerated_taint(node.taints, tols, _BLOCKING)
            if taint is not None:
                return Status.unresolvable(Reason.TAINT_NOT_TOLERATED, str(taint))
    labels = node.labels
    for sel in c.selectors:
        for k, v in sel.items():
            if labels.get(k) != v:
                return Status.unresolvable(Reason.NODE_SELECTOR_MISMATCH, f"{k}={v}")
    for aff in c.affinities:
        if not aff.required_matches(node.name, labels):
            return Status.unresolvable(Reason.NODE_AFFINITY_MISMATCH, "required node affinity")
    return SUCCESS


class Plugin:
    NAME: Final = NAME
    Args = Args
    STAGES: Final = frozenset({"qn.predicate", "tn.predicate", "events"})
    EVENT_KINDS: Final = frozenset({EventKind.CLAIM, EventKind.UNCLAIM})  # the statement events its handler follows

    def __init__(self, args: NoArgs) -> None:
        self.args = args

    def open(self, ssn: Session) -> dict[str, Callable[..., Any]]:
        cache: dict[str, _Constraints] = {}
        # quotas whose spec and claimants read alike (Session.filter_key) share their constraints
        by_key: dict[tuple[object, ...], _Constraints] = {}

        def constraints(quota: QuotaInfo) -> _Constraints:
            c = cache.get(quota.name)
            if c is not None:
                return c
            key = ssn.filter_key(quota)
            c = by_key.get(key)
            if c is None:
                tols: list[tuple[Toleration, ...]] = [quota.tolerations]
                sels: list[Mapping[str, str]] = []
                affs: list[NodeAffinity] = [quota.node_affinity] if quota.node_affinity else []
                for t in ssn.claimants(quota):
                    if t.tolerations != quota.tolerations:
                        tols.append(t.tolerations)
                    if t.node_selector:
                        sels.append(t.node_selector)
                    if t.node_affinity is not None:
                        affs.append(t.node_affinity)
                c = by_key[key] = _Constraints(tuple(dict.fromkeys(tols)), tuple(sels), tuple(affs))
            cache[quota.name] = c
            return c

        def on_event(ev: Event) -> None:
            if ev.kind in (EventKind.CLAIM, EventKind.UNCLAIM):
                cache.pop(ev.quota, None)  # its claimants changed: so may the constraints

        def predicate_qn(quota: QuotaInfo, node: NodeInfo) -> Status:
            return _check(constraints(quota), node)

        def predicate_tn(task: TaskInfo, node: NodeInfo) -> Status:
            c = _Constraints(
                (task.tolerations,),
                (task.node_selector,) if task.node_selector else (),
                (task.node_affinity,) if task.node_affinity else (),
            )
            return _check(c, node)

        return {"qn.predicate": predicate_qn, "tn.predicate": predicate_tn, "events": on_event}
