"""``backfill`` — spot pods straight onto nodes (TN path), per pod, in the extender's filter.

Spot pods hold no quota: they fill gaps. Their candidates go through the TN bundle (node
predicates, the sylas pools) and, for prioritize, its scores (sylas prefers nodes whose GPUs no
quota holds, so that spot pods are less likely to be evicted soon).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from extender.actions.outcome import SPOT, FilterOutcome
from extender.framework.session import Session
from extender.framework.status import Reason, Status
from extender.model.task import TaskInfo

NAME: Final = "backfill"


def filter_spot_pod(ssn: Session, task: TaskInfo, candidates: Sequence[str]) -> FilterOutcome:
    out = FilterOutcome(path=SPOT)
    feasible = []
    for name in candidates:
        node = ssn.node(name)
        if node is None:
            out.unresolvable[name] = Status.unresolvable(Reason.NODE_NOT_FOUND, name).message()
            continue
        s = ssn.tn.predicate(task, node)
        out.put(name, s)
        if s.ok:
            feasible.append(node)
    if feasible and ssn.tn.has_scores:
        batch = ssn.tn.batch_node_order(task, feasible)
        for node in feasible:
            out.scores[node.name] = ssn.tn.node_order(task, node) + batch.get(node.name, 0.0)
    return out
