"""``conformance``: never pick critical pods as victims (system priority classes, kube-system)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from extender.framework.plugin import NoArgs
from extender.framework.session import Session
from extender.model.task import TaskInfo

NAME: Final = "conformance"
Args = NoArgs

_CRITICAL_CLASSES: Final = frozenset({"system-cluster-critical", "system-node-critical"})
_SYSTEM_NAMESPACES: Final = frozenset({"kube-system"})


def is_critical(task: TaskInfo) -> bool:
    if task.namespace in _SYSTEM_NAMESPACES:
        return True
    return task.priority_class in _CRITICAL_CLASSES or task.priority >= 2_000_000_000


class Plugin:
    NAME: Final = NAME
    Args = Args
    STAGES: Final = frozenset({"job.victims"})

    def __init__(self, args: NoArgs) -> None:
        self.args = args

    def open(self, ssn: Session) -> dict[str, Callable[..., Any]]:
        def victims(preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> frozenset[str]:
            return frozenset(t.uid for t in candidates if not is_critical(t))

        return {"job.victims": victims}
