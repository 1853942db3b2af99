"""``release_idle_quota`` — give idle quotas back before hop ② plans (DESIGN §1).

The idle and lost-node cases of ``release_quota``, run right after hop ① (``allocate_job``) and
before ``allocate_zone`` / ``allocate_quota``: a bound quota that no task claims and no unexpired
reservation holds (its job finished, its reservations expired), or whose node no longer exists,
goes back to ``QuotaEmpty`` — only if the scheduler bound it (``status.boundBy``), never a static
one. Hop ① ran first, so a pending task could still claim such a quota (the bound tier); what is
left idle then will be released this cycle in any case, and hop ② plans with the room it held
(without this action, ``release_quota`` releases it at the end of the cycle, and a gang planned
in that cycle counts the room as taken: it may span more leaves than it needs).

The binder writes these releases before the binds of the same cycle (``extender/binder/loop.py``),
so that no instant on the API objects counts both on one node (invariant 1).
"""

from __future__ import annotations

from typing import Final

from extender.actions.release_quota import notes_of, release_idle
from extender.framework.plugin import NoArgs
from extender.framework.session import Session

NAME: Final = "release_idle_quota"
Args = NoArgs


class Action:
    NAME: Final = NAME
    Args = NoArgs

    def __init__(self, args: NoArgs) -> None:
        self.args = args

    def execute(self, ssn: Session) -> None:
        release_idle(ssn, notes_of(ssn))
