"""Watch events: committed changes, what a watcher's queue carries, and selection transitions.

Every write becomes one :class:`Change` (kept in its resource's watch history). A
:class:`Watcher` receives the :class:`WatchItem` that :func:`transition` derives from each change
for its selection, with the apiserver's semantics: an object that stops matching the selection is
``DELETED``, one that starts matching it is ``ADDED``. ``resourceVersion`` parameters are parsed
by :func:`parse_rv`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from extender.emulator import errors
from extender.emulator.resources import ResourceType
from extender.emulator.selection import Selection

if TYPE_CHECKING:
    from extender.emulator.storage import Storage

__all__ = ["Change", "EventType", "WatchItem", "Watcher", "parse_rv", "transition"]

Obj = dict[str, Any]
EventType = Literal["ADDED", "MODIFIED", "DELETED"]


@dataclass(frozen=True, slots=True)
class Change:
    """One committed write, as kept in the watch history."""

    type: EventType
    rv: int
    obj: Obj
    old: Obj | None


@dataclass(frozen=True, slots=True)
class WatchItem:
    """What a watcher's queue carries: an event, a bookmark, or the end of the stream."""

    type: Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR", "END", "DROP"]
    obj: Obj | None = None
    rv: int = 0


class Watcher:
    """An open watch: events are pushed into an asyncio queue owned by ``loop``."""

    def __init__(self, store: Storage, rt: ResourceType, selection: Selection, loop: asyncio.AbstractEventLoop) -> None:
        self.store = store
        self.rt = rt
        self.selection = selection
        self.loop = loop
        self.queue: asyncio.Queue[WatchItem] = asyncio.Queue()
        self.closed = False

    def push(self, item: WatchItem) -> None:
        """Enqueue from any thread (callers hold the store lock, which keeps the order)."""
        if self.closed:
            return
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)
        except RuntimeError:  # loop closed: the client is gone
            self.closed = True

    def offer(self, change: Change) -> None:
        item = transition(change, self.selection, self.rt)
        if item is not None:
            self.push(item)

    def stop(self) -> None:
        self.store.unwatch(self)


def transition(change: Change, selection: Selection, rt: ResourceType) -> WatchItem | None:
    """The event a watcher with ``selection`` sees for ``change`` (apiserver semantics:
    an object that stops matching is DELETED, one that starts matching is ADDED)."""
    if selection.trivial:
        return WatchItem(change.type, change.obj)
    now = selection.matches(change.obj, rt)
    if change.type != "MODIFIED" or change.old is None:
        return WatchItem(change.type, change.obj) if now else None
    before = selection.matches(change.old, rt)
    if now and before:
        return WatchItem("MODIFIED", change.obj)
    if now:
        return WatchItem("ADDED", change.obj)
    if before:
        return WatchItem("DELETED", change.obj)
    return None


def parse_rv(text: str) -> int:
    """A ``resourceVersion`` parameter: a non-negative integer, else 400."""
    try:
        value = int(text)
    except ValueError:
        raise errors.bad_request(f'resourceVersion: Invalid value: "{text}": must be an integer') from None
    if value < 0:
        raise errors.bad_request(f'resourceVersion: Invalid value: "{text}": must be non-negative')
    return value
