"""``nodeorder``: Kubernetes' standard preferences — preferred node affinity and PreferNoSchedule taints.

Each in [0, 1], averaged: the share of preferred-affinity weight a node matches (1 when nothing
is preferred) and 1 when the node has no PreferNoSchedule taint the quota (and its tasks) or the
task does not tolerate, else 0.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from extender.framework.plugin import NoArgs
from extender.framework.session import Session
from extender.model.node import NodeInfo
from extender.model.quota import QuotaInfo
from extender.model.selectors import NodeAffinity, Toleration, untolerated_taint
from extender.model.task import TaskInfo

NAME: Final = "nodeorder"
Args = NoArgs

_PREFER: Final = frozenset({"PreferNoSchedule"})


def preference_score(node: NodeInfo, affinity: NodeAffinity | None, tolerations: tuple[Toleration, ...]) -> float:
    aff = 1.0
    if affinity is not None and affinity.preferred:
        total = sum(w for w, _ in affinity.preferred)
        aff = affinity.preferred_score(node.name, node.labels) / total if total else 1.0
    taint = 1.0
    if node.taints and untolerated_taint(node.taints, tolerations, _PREFER) is not None:
        taint = 0.0
    return (aff + taint) / 2.0


class Plugin:
    NAME: Final = NAME
    Args = Args
    STAGES: Final = frozenset({"qn.node_order", "tn.node_order"})

    def __init__(self, args: NoArgs) -> None:
        self.args = args

    def open(self, ssn: Session) -> dict[str, Callable[..., Any]]:
        def node_order_qn(quota: QuotaInfo, node: NodeInfo) -> float:
            return preference_score(node, quota.node_affinity, quota.tolerations)

        def node_order_tn(task: TaskInfo, node: NodeInfo) -> float:
            return preference_score(node, task.node_affinity, task.tolerations)

        return {"qn.node_order": node_order_qn, "tn.node_order": node_order_tn}
