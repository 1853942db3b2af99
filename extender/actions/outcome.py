"""What a per-pod action answers to the extender's filter: the candidates sorted into the three
maps of ``ExtenderFilterResult``, plus raw scores for prioritize."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from extender.framework.status import Code, Status

INLINE: Final = "inline-quota"
QUOTA: Final = "quota"
SPOT: Final = "spot"


@dataclass(slots=True)
class FilterOutcome:
    passed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # FailedNodes: preemption may help
    unresolvable: dict[str, str] = field(default_factory=dict)  # FailedAndUnresolvableNodes
    scores: dict[str, float] = field(default_factory=dict)  # raw scores of passed nodes (prioritize)
    path: str = QUOTA
    quota: str = ""  # the quota the pod uses (claimed, or chosen inline)

    def put(self, node: str, status: Status, *, may_preempt: bool = True) -> None:
        """Record ``node``'s verdict; a refusal goes in ``FailedNodes`` only when it is one that
        evicting pods could lift and the pod ``may_preempt`` (kube-scheduler runs its preemption
        dry run over those nodes alone)."""
        if status.ok:
            self.passed.append(node)
        elif status.code == Code.UNSCHEDULABLE and may_preempt:
            self.failed[node] = status.message()
        else:
            self.unresolvable[node] = status.message()
