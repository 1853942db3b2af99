"""The writer's memory of the Events it posted, to aggregate repeats as client-go's recorder does.

This module does NOT write to the Kubernetes API (only :mod:`extender.kube.writer` does). A repeat
of an Event — same namespace, object, type, reason and message — within the window bumps the
first Event's ``count`` instead of creating another; this remembers, per such key, which Event
that is and how often it was seen, for the most recent :data:`EVENTS_REMEMBERED` keys.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["EVENTS_REMEMBERED", "EventKey", "EventMemory", "EventRecord", "event_key"]

EVENTS_REMEMBERED: Final = 4096

EventKey = tuple[str, ...]


def event_key(namespace: str, ref: Mapping[str, Any], type_: str, reason: str, message: str) -> EventKey:
    """What makes two Events repeats of one another."""
    return (namespace, str(ref.get("kind")), str(ref.get("name")), str(ref.get("uid", "")), type_, reason, message)


@dataclass(slots=True)
class EventRecord:
    """One posted Event: where it is, its ``count`` and ``firstTimestamp``, and when (on the
    writer's clock) it was last posted or bumped."""

    namespace: str
    name: str
    count: int
    first: str
    last_seen: float


class EventMemory:
    """The most recent :data:`EVENTS_REMEMBERED` posted Events by :func:`event_key`, the oldest
    forgotten first."""

    def __init__(self) -> None:
        self._records: OrderedDict[EventKey, EventRecord] = OrderedDict()

    def recent(self, key: EventKey, now: float, window: float) -> EventRecord | None:
        """The Event of ``key`` if it was last seen at most ``window`` seconds before ``now``."""
        record = self._records.get(key)
        if record is not None and now - record.last_seen <= window:
            return record
        return None

    def bumped(self, key: EventKey, record: EventRecord, count: int, now: float) -> None:
        """``record`` (of ``key``) was bumped to ``count`` at ``now``."""
        record.count = count
        record.last_seen = now
        self._records.move_to_end(key)

    def forget(self, key: EventKey) -> None:
        """The Event of ``key`` is gone (expired or deleted): the next repeat creates a new one."""
        del self._records[key]

    def remember(self, key: EventKey, record: EventRecord) -> None:
        """``record`` is the Event of ``key`` from now on."""
        self._records[key] = record
        while len(self._records) > EVENTS_REMEMBERED:
            self._records.popitem(last=False)
