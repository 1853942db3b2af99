"""``reclaim`` — preemption restricted to the preemptor's own node (seed 五: no separate preempt
action; victims only on the preemptor's bound node, only spot pods of lower priority).

kube-scheduler proposes victims per candidate node (its in-tree dry run); this keeps only the
nodes where the preemptor's quota is bound and, there, only the victims the ``job.victims``
stage allows (spot, lower priority, not critical — ``intersect(sylas, priority, conformance)``
by default). A node whose allowed victims would not free enough room for the preemptor is
dropped, and a node is never returned with zero victims (kube-scheduler rejects that).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from extender.framework.session import Session
from extender.model.task import TaskInfo

NAME: Final = "reclaim"


@dataclass(slots=True)
class ReclaimOutcome:
    victims: dict[str, list[str]] = field(default_factory=dict)  # node → victim UIDs
    dropped: dict[str, str] = field(default_factory=dict)  # node → why it was dropped


def reclaim(ssn: Session, preemptor: TaskInfo, proposed: Mapping[str, Sequence[str]]) -> ReclaimOutcome:
    out = ReclaimOutcome()
    quota = ssn.quota(preemptor.quota) if preemptor.quota else None
    home = quota.node_name if quota is not None else ""
    for node_name, uids in proposed.items():
        if preemptor.spot:
            out.dropped[node_name] = "spot pods do not preempt"
            continue
        if not home:
            out.dropped[node_name] = "the preemptor's quota is not bound"
            continue
        if node_name != home:
            out.dropped[node_name] = f"the preemptor's quota is bound to {home}"
            continue
        node = ssn.node(node_name)
        if node is None:
            out.dropped[node_name] = "unknown node"
            continue
        candidates = [t for t in (ssn.task(u) for u in uids) if t is not None and t.node == node_name]
        allowed = ssn.stages.victims(preemptor, candidates)
        keep = [t for t in candidates if allowed is None or t.uid in set(allowed)]
        if not keep:
            out.dropped[node_name] = "no spot pod of lower priority among the proposed victims"
            continue
        freed = node.idle.clone()
        for t in keep:
            freed.iadd(t.request)
        if preemptor.request.shortfalls(freed):
            short = ", ".join(map(str, preemptor.request.shortfalls(freed)))
            out.dropped[node_name] = f"evicting the allowed victims would not free enough: {short}"
            continue
        # evict no more than needed: cheapest-first until the preemptor fits
        keep.sort(key=lambda t: (t.priority, -t.started, t.name))
        chosen: list[str] = []
        room = node.idle.clone()
        for t in keep:
            if not preemptor.request.shortfalls(room):
                break
            chosen.append(t.uid)
            room.iadd(t.request)
        out.victims[node_name] = chosen
    return out
