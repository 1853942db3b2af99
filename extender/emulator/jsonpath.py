"""The JSONPath subset of printer columns and selectable fields.

Supported: ``.a.b``, ``.a['x.y']`` / ``.a["x.y"]``, escaped dots ``.a.b\\.c``, indices
``.items[0]`` and ``[-1]``, the wildcard ``[*]`` (all elements), filters comparing a field of
each element with a literal (``[?(@.type=="Ready")]``, ``[?(@.level==1)]``, ``!=`` too; the
field may be a dotted path), and an optional surrounding ``{…}`` as kubectl writes it. Other
filters, slices and recursive descent are not supported: a CRD using them is rejected when it is
created.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["JSONPath", "JSONPathError"]


class JSONPathError(ValueError):
    """A JSONPath outside the supported subset, or malformed."""


_WILDCARD = object()


@dataclass(frozen=True, slots=True)
class _Filter:
    """``[?(@.path op literal)]``: the elements of a list whose field at ``path`` compares."""

    path: tuple[str, ...]
    equal: bool
    value: object

    def matches(self, element: Any) -> bool:
        current = element
        for key in self.path:
            if not isinstance(current, dict) or key not in current:
                return False  # a missing field compares with nothing (client-go skips the element)
            current = current[key]
        same = current == self.value and isinstance(current, bool) == isinstance(self.value, bool)
        return same if self.equal else not same


Step = str | int | object

_FILTER = re.compile(
    r"^\?\(\s*@((?:\.[A-Za-z0-9_\-]+)+)\s*(==|!=)\s*"
    r"(\"[^\"]*\"|'[^']*'|-?\d+(?:\.\d+)?|true|false|null)\s*\)$"
)


def _parse_filter(text: str, inner: str) -> _Filter:
    m = _FILTER.match(inner)
    if m is None:
        raise JSONPathError(
            f"JSONPath {text!r}: only filters of the form [?(@.field==literal)] / != are supported, got [{inner}]"
        )
    raw = m.group(3)
    value: object
    if raw[0] == "'":
        value = raw[1:-1]
    elif raw in ("true", "false", "null") or raw[0] == '"':
        value = json.loads(raw)
    else:
        value = float(raw) if "." in raw else int(raw)
    return _Filter(tuple(m.group(1).split(".")[1:]), m.group(2) == "==", value)


@dataclass(frozen=True, slots=True)
class JSONPath:
    text: str
    steps: tuple[Step, ...]

    @classmethod
    def parse(cls, text: str) -> JSONPath:
        body = text.strip()
        if body.startswith("{") and body.endswith("}"):
            body = body[1:-1].strip()
        if body.startswith("$"):
            body = body[1:]
        if not body.startswith((".", "[")):
            raise JSONPathError(f"JSONPath {text!r}: must start with '.'")
        return cls(text, tuple(_parse_steps(text, body)))

    def find(self, obj: Any) -> list[Any]:
        """All values the path selects (missing keys select nothing)."""
        current: list[Any] = [obj]
        for step in self.steps:
            nxt: list[Any] = []
            for value in current:
                if step is _WILDCARD:
                    if isinstance(value, list):
                        nxt.extend(value)
                    elif isinstance(value, dict):
                        nxt.extend(value.values())
                elif isinstance(step, _Filter):
                    if isinstance(value, list):
                        nxt.extend(v for v in value if step.matches(v))
                elif isinstance(step, int):
                    if isinstance(value, list) and -len(value) <= step < len(value):
                        nxt.append(value[step])
                elif isinstance(value, dict) and step in value:
                    nxt.append(value[step])
            current = nxt
            if not current:
                break
        return current

    @property
    def filtered(self) -> bool:
        """True when a step is a filter (allowed in printer columns, not in selectable fields)."""
        return any(isinstance(step, _Filter) for step in self.steps)

    def first(self, obj: Any) -> Any:
        found = self.find(obj)
        return found[0] if found else None


def _parse_steps(text: str, body: str) -> Sequence[Step]:
    steps: list[Step] = []
    i = 0
    n = len(body)
    while i < n:
        c = body[i]
        if c == ".":
            i += 1
            if i < n and body[i] == ".":
                raise JSONPathError(f"JSONPath {text!r}: recursive descent '..' is not supported")
            name: list[str] = []
            while i < n and body[i] not in ".[":
                if body[i] == "\\" and i + 1 < n:
                    name.append(body[i + 1])
                    i += 2
                    continue
                name.append(body[i])
                i += 1
            key = "".join(name)
            if not key:
                if i >= n:
                    break  # a lone "." (or a trailing one) selects the object itself
                continue
            steps.append(_WILDCARD if key == "*" else key)
        elif c == "[":
            end = _closing_bracket(text, body, i)
            inner = body[i + 1 : end].strip()
            i = end + 1
            if inner == "*":
                steps.append(_WILDCARD)
            elif inner.startswith("?"):
                steps.append(_parse_filter(text, inner))
            elif len(inner) >= 2 and inner[0] == inner[-1] and inner[0] in "'\"":
                steps.append(inner[1:-1])
            else:
                try:
                    steps.append(int(inner))
                except ValueError:
                    raise JSONPathError(
                        f"JSONPath {text!r}: only [index], ['key'] and [*] are supported, got [{inner}]"
                    ) from None
        else:
            raise JSONPathError(f"JSONPath {text!r}: unexpected {c!r} at {i}")
    return steps


def _closing_bracket(text: str, body: str, start: int) -> int:
    quote = ""
    for j in range(start + 1, len(body)):
        ch = body[j]
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "]":
            return j
    raise JSONPathError(f"JSONPath {text!r}: unclosed '['")
