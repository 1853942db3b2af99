"""An RFC 6902 JSON Patch accumulator over one object (pure, no I/O).

:class:`Patch` records operations against the object the webhook was given and keeps a view
of what those operations did, so that callers state *intent* ("this annotation must be X")
and the patch contains only what changes:

* setting a value the object already has is no operation (a webhook called again on its own
  output answers an empty patch — idempotence, required with ``reinvocationPolicy: IfNeeded``);
* a member of a map that is absent (``metadata.annotations`` on a pod created without any) is
  preceded by ``add`` of the empty map: JSON Patch cannot add ``/a/b`` when ``/a`` does not exist;
* path tokens are escaped (``~`` → ``~0``, ``/`` → ``~1``), so
  ``scheduling.infini-ai.com/quota-name`` becomes ``…/scheduling.infini-ai.com~1quota-name``.

``add`` is used for members that exist too: on an object member it replaces the value (RFC 6902
§4.1), which is what the apiserver does with ``/spec/schedulerName`` (it is defaulted to
``default-scheduler`` before mutating webhooks run).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson

__all__ = ["Patch", "escape_token", "pointer"]

_MISSING: Final = object()


def escape_token(token: str) -> str:
    """RFC 6901 escaping of one reference token (``~`` first, then ``/``)."""
    return token.replace("~", "~0").replace("/", "~1")


def pointer(tokens: Sequence[str]) -> str:
    """A JSON Pointer from unescaped tokens: ``("metadata", "annotations", "a/b")`` → ``/metadata/annotations/a~1b``."""
    return "".join("/" + escape_token(t) for t in tokens)


class Patch:
    """Operations against ``obj`` (never modified), with a view of their effect.

    The view is a copy-on-write of the maps along the paths written to, so reading through it
    costs a walk and writing copies only what is touched. Only object members are addressed (no
    array indices): that is all a pod mutation needs.
    """

    __slots__ = ("_ops", "_owned", "_root")

    def __init__(self, obj: Mapping[str, Any]) -> None:
        self._ops: list[dict[str, Any]] = []
        self._root: dict[str, Any] = dict(obj)
        self._owned: set[int] = {id(self._root)}  # maps of the view that are ours to change

    # --- reading through the view --------------------------------------------------------------
    def get(self, tokens: Sequence[str]) -> Any:
        """The value at ``tokens`` after the operations so far (``None`` when absent)."""
        value = self._lookup(tokens)
        return None if value is _MISSING else value

    def _lookup(self, tokens: Sequence[str]) -> Any:
        node: Any = self._root
        for t in tokens:
            if not isinstance(node, Mapping) or t not in node:
                return _MISSING
            node = node[t]
        return node

    def _own(self, tokens: Sequence[str]) -> dict[str, Any]:
        """The view's map at ``tokens`` (which must be a map), copied into the view if needed."""
        node = self._root
        for t in tokens:
            child = node[t]
            if id(child) not in self._owned:
                child = dict(child)
                node[t] = child
                self._owned.add(id(child))
            node = child
        return node

    # --- writing -------------------------------------------------------------------------------
    def set(self, tokens: Sequence[str], value: Any) -> None:
        """Make the member at ``tokens`` equal ``value``; missing parent maps are created first."""
        if not tokens:
            raise ValueError("cannot replace the whole object")
        if self._lookup(tokens) == value:
            return
        self._ensure_map(tokens[:-1])
        self._emit(tokens, value)

    def remove(self, tokens: Sequence[str]) -> None:
        """Remove the member at ``tokens`` if it is there."""
        if not tokens:
            raise ValueError("cannot remove the whole object")
        if self._lookup(tokens) is _MISSING:
            return
        self._ops.append({"op": "remove", "path": pointer(tokens)})
        del self._own(tokens[:-1])[tokens[-1]]

    def set_entry(self, map_tokens: Sequence[str], key: str, value: str) -> None:
        """``map[key] = value`` for a string map such as ``metadata.annotations``."""
        self.set((*map_tokens, key), value)

    def remove_entry(self, map_tokens: Sequence[str], key: str) -> None:
        self.remove((*map_tokens, key))

    def _ensure_map(self, tokens: Sequence[str]) -> None:
        if not tokens or isinstance(self._lookup(tokens), Mapping):
            return
        # absent or null: create it (replacing a null is an "add" on an existing member)
        self._ensure_map(tokens[:-1])
        self._emit(tokens, {})

    def _emit(self, tokens: Sequence[str], value: Any) -> None:
        self._ops.append({"op": "add", "path": pointer(tokens), "value": value})
        if isinstance(value, Mapping):
            value = dict(value)
            self._owned.add(id(value))
        self._own(tokens[:-1])[tokens[-1]] = value

    # --- output --------------------------------------------------------------------------------
    @property
    def ops(self) -> list[dict[str, Any]]:
        return list(self._ops)

    def __bool__(self) -> bool:
        return bool(self._ops)

    def __len__(self) -> int:
        return len(self._ops)

    def to_json(self) -> bytes:
        return orjson.dumps(self._ops)
