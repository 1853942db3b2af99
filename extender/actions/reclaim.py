"""``reclaim`` — preemption restricted to the preemptor's own node (seed 五: no separate preempt
action; victims only on the preemptor's bound node, only spot pods of lower priority).

kube-scheduler proposes victims per candidate node (its in-tree dry run, which knows only
priorities). This keeps only the node where the preemptor's quota is bound and, there, chooses
the victims itself among every pod of the node — kube-scheduler looks the answered UIDs up on
that node, proposed or not (research note §2.6):

* who *may* go: spot pods running on the node, of lower priority than the preemptor — the
  seed's rule ("victim 只在抢占者自己的绑定节点上找 spot task") and Kubernetes' (a pod preempts
  only pods of lower priority; kube-scheduler marks each victim "preempting to accommodate a
  higher priority pod"), whatever the policy says — narrowed by the ``job.victims`` stage (not
  critical: ``intersect(sylas, priority, conformance)`` by default; a stage no enabled plugin
  implements narrows nothing). One rule, :func:`extender.framework.victims.may_go`, which the
  filter uses too when it tells kube-scheduler that preemption can free a node;
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
from extender.framework.victims import may_go
from extender.model.node import NodeInfo
from extender.model.task import TaskInfo

NAME: Final = "reclaim"


@dataclass(slots=True)
class ReclaimOutcome:
    victims: dict[str, list[str]] = field(default_factory=dict)  # node → victim UIDs
    pdb: dict[str, int] = field(default_factory=dict)  # node → NumPDBViolations to answer
    dropped: dict[str, str] = field(default_factory=dict)  # node → why it was dropped


def reclaim(
    ssn: Session,
    preemptor: TaskInfo,
    proposed: Mapping[str, Sequence[str]],
    reported: Mapping[str, int] | None = None,
) -> ReclaimOutcome:
    """Victims per node of ``proposed`` (kube-scheduler's candidates: node → the UIDs it would
    evict), and for each the ``NumPDBViolations`` to answer (:func:`pdb_violations` of
    kube-scheduler's count in ``reported``)."""
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
                counted = (reported or {}).get(node_name, 0)
                out.pdb[node_name] = pdb_violations(chosen, proposed[node_name], counted)
    return out


def pdb_violations(chosen: Sequence[str], proposed: Sequence[str], reported: int) -> int:
    """The ``NumPDBViolations`` to answer for the victims ``chosen`` on a node where kube-scheduler
    proposed ``proposed`` and counted ``reported`` violations among them: the most ``chosen``
    can violate, as kube-scheduler counts them.

    kube-scheduler's preemption walks every lower-priority pod of the node, most important
    first, and calls a pod *violating* when a PodDisruptionBudget it matches has no disruption
    left by then; ``NumPDBViolations`` is how many victims are violating. That classification
    depends on the node's pods, not on which are chosen, so of the chosen pods kube-scheduler
    also proposed at most ``min(reported, their number)`` violate, and each chosen pod it did not
    propose may (the extender watches no budgets; kube-scheduler's dry run spares violating pods
    first, so those are the likely ones). Victims equal to the proposal keep ``reported``.

    Why the bound and not ``reported``: the count is kube-scheduler's first criterion when it
    picks among candidate nodes (fewest violations). reclaim answers one node only, so today
    nothing compares it; but a number below what the victims may violate would make the node
    look safer than it is, to a later extender or a kube-scheduler that compares. An
    over-estimate can only make a node look worse, the safe side."""
    mine = set(chosen)
    theirs = mine.intersection(proposed)
    return min(reported, len(theirs)) + len(mine) - len(theirs)


def victims_on(ssn: Session, preemptor: TaskInfo, node: NodeInfo) -> list[str] | str:
    """The pods (uids) to evict on ``node`` so that ``preemptor`` fits its ``idle``, or why none."""
    if not preemptor.request.shortfalls(node.idle):
        return "the preemptor fits without evicting anything"
    keep = may_go(ssn, preemptor, node)
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
