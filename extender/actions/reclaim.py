"""``reclaim`` — preemption restricted to the preemptor's own node (seed 五: no separate preempt
action; victims only on the preemptor's bound node, only spot pods of lower priority).

kube-scheduler proposes victims per candidate node (its in-tree dry run, which knows only
priorities). This keeps only the node where the preemptor's quota is bound and, there, chooses
the victims itself among every pod of the node — kube-scheduler looks the answered UIDs up on
that node, proposed or not (research note §2.6):

* who *may* go is the ``job.victims`` stage (spot, lower priority, not critical —
  ``intersect(sylas, priority, conformance)`` by default);
* who *does* go is the ``job.evict`` stage: sylas evicts the spot pods its score predicted when
  the quota was bound there (seed 六 6.1: the cheapest groups by the four strategies; "抢占由
  reclaim 执行"), not the latest-started ones kube-scheduler's dry run would. Without a plugin
  that chooses, the allowed pods go lowest priority first, then the latest started, no more than
  needed.

A node whose allowed victims would not free enough room for the preemptor is dropped, and a node
is never returned with zero victims (kube-scheduler rejects that).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from extender.framework.session import Session
from extender.model.node import NodeInfo
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
    for node_name in proposed:
        if preemptor.spot:
            out.dropped[node_name] = "spot pods do not preempt"
        elif not home:
            out.dropped[node_name] = "the preemptor's quota is not bound"
        elif node_name != home:
            out.dropped[node_name] = f"the preemptor's quota is bound to {home}"
        else:
            node = ssn.node(node_name)
            if node is None:
                out.dropped[node_name] = "unknown node"
                continue
            chosen = victims_on(ssn, preemptor, node)
            if isinstance(chosen, str):
                out.dropped[node_name] = chosen
            else:
                out.victims[node_name] = chosen
    return out


def victims_on(ssn: Session, preemptor: TaskInfo, node: NodeInfo) -> list[str] | str:
    """The pods (uids) to evict on ``node`` so that ``preemptor`` fits its ``idle``, or why none."""
    if not preemptor.request.shortfalls(node.idle):
        return "the preemptor fits without evicting anything"
    candidates = [t for t in map(ssn.task, node.tasks) if t is not None and t.node == node.name]
    allowed = ssn.stages.victims(preemptor, candidates)
    keep = [t for t in candidates if allowed is None or t.uid in set(allowed)]
    if not keep:
        return "no spot pod of lower priority on the node"
    freed = node.idle.clone()
    for t in keep:
        freed.iadd(t.request)
    short = preemptor.request.shortfalls(freed)
    if short:
        return "evicting the allowed victims would not free enough: " + ", ".join(map(str, short))
    chosen = ssn.stages.evict(preemptor, node, frozenset(t.uid for t in keep))
    if chosen is not None:
        return list(chosen) or "the preemptor fits without evicting anything"
    # no plugin chooses: lowest priority, then latest started, until the preemptor fits
    keep.sort(key=lambda t: (t.priority, -t.started, t.name))
    picked: list[str] = []
    room = node.idle.clone()
    for t in keep:
        if not preemptor.request.shortfalls(room):
            break
        picked.append(t.uid)
        room.iadd(t.request)
    return picked
