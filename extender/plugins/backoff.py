"""``backoff``: a job whose quotas were released for being unschedulable waits before retrying.

The release_quota action computes the back-off (exponential per job) and the scheduler keeps it
across cycles in the snapshot (``Snapshot.backoff``); this plugin only reads it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from extender.framework.plugin import NoArgs
from extender.framework.session import Session
from extender.framework.status import SUCCESS, Reason, Status
from extender.model.job import JobInfo

NAME: Final = "backoff"
BACKOFF_MESSAGE: Final = "quotas released after the job could not be placed; waiting out the back-off"
Args = NoArgs


class Plugin:
    NAME: Final = NAME
    Args = Args
    STAGES: Final = frozenset({"job.valid"})

    def __init__(self, args: NoArgs) -> None:
        self.args = args

    def open(self, ssn: Session) -> dict[str, Callable[..., Any]]:
        backoff = ssn.snap.backoff

        def valid(job: JobInfo) -> Status:
            until = backoff.get(job.key)
            if until is not None and ssn.now < until:
                # no countdown in the message: it stays the same while the back-off lasts, so its
                # Event is one object whose count grows (the time left is in /diagnose)
                return Status.unschedulable(Reason.BACKOFF, BACKOFF_MESSAGE)
            return SUCCESS

        return {"job.valid": valid}
