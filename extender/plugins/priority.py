"""``priority``: higher-priority jobs and tasks first; only lower-priority pods may be victims."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from extender.framework.plugin import NoArgs
from extender.framework.session import Session
from extender.model.job import JobInfo
from extender.model.task import TaskInfo

NAME: Final = "priority"
Args = NoArgs


class Plugin:
    NAME: Final = NAME
    Args = Args
    STAGES: Final = frozenset({"job.order", "job.task_order", "job.victims"})

    def __init__(self, args: NoArgs) -> None:
        self.args = args

    def open(self, ssn: Session) -> dict[str, Callable[..., Any]]:
        def order(job: JobInfo) -> tuple[Any, ...]:
            return (-job.priority,)

        def task_order(task: TaskInfo) -> tuple[Any, ...]:
            return (-task.priority, task.index is None, task.index or 0)

        def victims(preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> frozenset[str]:
            return frozenset(t.uid for t in candidates if t.priority < preemptor.priority)

        return {"job.order": order, "job.task_order": task_order, "job.victims": victims}
