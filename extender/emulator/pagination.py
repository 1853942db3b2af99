"""Paginated lists (``limit`` and ``continue``): the continue token and the snapshots behind it.

A list truncated by ``limit`` keeps its whole result as a snapshot, so the next pages are
consistent with the first one (as etcd serves them at the first page's revision). The continue
token names the snapshot and the offset of the next page; the last page drops the snapshot. Only
the newest 64 snapshots are kept: a token of an older one answers ``410 Expired``.
"""

from __future__ import annotations

import base64
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import orjson

from extender.emulator import errors

__all__ = ["Snapshots"]

Obj = dict[str, Any]

_KEPT = 64


@dataclass(slots=True)
class _Snapshot:
    items: list[Obj]
    rv: int


class Snapshots:
    """The snapshots of the lists still being paged through, least recently used first."""

    def __init__(self) -> None:
        self._snapshots: OrderedDict[str, _Snapshot] = OrderedDict()

    def resume(self, token: str) -> tuple[list[Obj], int, int, str]:
        """``(items, list resourceVersion, offset, snapshot id)`` of the list a token continues."""
        snap_id, offset = _decode_continue(token)
        snap = self._snapshots.get(snap_id)
        if snap is None:
            raise errors.expired(
                "The provided continue parameter is too old to display a consistent list result. "
                "You can start a new list without the continue parameter."
            )
        self._snapshots.move_to_end(snap_id)
        return snap.items, snap.rv, offset, snap_id

    def page(
        self, items: list[Obj], rv: int, offset: int, snap_id: str, limit: int
    ) -> tuple[list[Obj], str | None, int | None]:
        """``(page, continue token, remainingItemCount)`` of ``items`` from ``offset``; ``snap_id``
        is empty for a first page (a snapshot is taken when more pages follow)."""
        if limit <= 0 or offset + limit >= len(items):
            if snap_id:
                self._snapshots.pop(snap_id, None)
            return items[offset:], None, None
        if not snap_id:
            snap_id = uuid.uuid4().hex
            self._snapshots[snap_id] = _Snapshot(items, rv)
            while len(self._snapshots) > _KEPT:
                self._snapshots.popitem(last=False)
        end = offset + limit
        token = base64.urlsafe_b64encode(orjson.dumps({"s": snap_id, "o": end, "rv": rv})).decode()
        return items[offset:end], token, len(items) - end


def _decode_continue(token: str) -> tuple[str, int]:
    try:
        data = orjson.loads(base64.urlsafe_b64decode(token.encode()))
        return str(data["s"]), int(data["o"])
    except (ValueError, KeyError, TypeError, orjson.JSONDecodeError):
        raise errors.bad_request(f"invalid continue token {token!r}") from None
