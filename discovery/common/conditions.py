"""One log line per condition, not one per round.

An agent that polls every 10 s would otherwise repeat "lldpcli not found" 360 times an hour. A
:class:`ConditionLog` logs a condition when it first appears (or when its message changes), stays
quiet while it persists, and logs once more when it goes away::

    conditions.begin_round()
    conditions.report("lldpcli", "lldpcli not found on PATH ...")
    ...
    conditions.end_round()   # conditions not reported this round are logged as resolved
"""

from __future__ import annotations

import logging

__all__ = ["ConditionLog"]


class ConditionLog:
    def __init__(self, logger: logging.Logger) -> None:
        self._log = logger
        self._active: dict[str, str] = {}
        self._seen: set[str] = set()

    @property
    def active(self) -> dict[str, str]:
        """Conditions currently in force: key → message."""
        return dict(self._active)

    def begin_round(self) -> None:
        self._seen = set()

    def report(self, key: str, message: str, level: int = logging.WARNING) -> None:
        """Log ``message`` unless the same condition was already logged with the same message."""
        self._seen.add(key)
        if self._active.get(key) != message:
            self._active[key] = message
            self._log.log(level, message)

    def resolve(self, key: str, message: str | None = None) -> None:
        """The condition is over: log it once (INFO) if it had been reported."""
        if key in self._active:
            old = self._active.pop(key)
            self._log.info(message or f"resolved: {old}")

    def end_round(self) -> None:
        """Resolve every condition that was not reported since :meth:`begin_round`."""
        for key in [k for k in self._active if k not in self._seen]:
            self.resolve(key)
