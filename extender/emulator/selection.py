"""Label and field selectors of list and watch requests."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from extender.emulator import errors
from extender.emulator.jsonpath import JSONPath
from extender.emulator.resources import ResourceType
from extender.model.selectors import LabelSelector, SelectorError

__all__ = ["FieldRequirement", "Selection", "parse_field_selector"]


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    field: str
    op: str  # "=" or "!="
    value: str


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts: list[str] = []
    cur: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            cur.append(text[i : i + 2])
            i += 2
            continue
        if ch == sep:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    parts.append("".join(cur))
    return parts


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            out.append(text[i + 1])
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def parse_field_selector(text: str) -> tuple[FieldRequirement, ...]:
    """``fields.ParseSelector``: ``a=b``, ``a==b``, ``a!=b`` joined by commas (``\\`` escapes)."""
    reqs: list[FieldRequirement] = []
    for raw in _split_unescaped(text, ","):
        part = raw.strip()
        if not part:
            continue
        for op, norm in (("!=", "!="), ("==", "="), ("=", "=")):
            idx = _find_unescaped(part, op)
            if idx >= 0:
                field = part[:idx].strip()
                value = _unescape(part[idx + len(op) :].strip())
                if not field:
                    raise errors.bad_request(f"invalid field selector {text!r}: empty field name")
                reqs.append(FieldRequirement(field, norm, value))
                break
        else:
            raise errors.bad_request(
                f"invalid field selector {text!r}: {part!r} is not one of field=value, field!=value"
            )
    return tuple(reqs)


def _find_unescaped(text: str, op: str) -> int:
    i = 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text.startswith(op, i):
            return i
        i += 1
    return -1


def _field_value(obj: Mapping[str, Any], field: str, rt: ResourceType) -> str:
    for name, path in rt.selectable_fields:
        if name == field:
            value = JSONPath.parse(path).first(obj)
            return "" if value is None else (str(value).lower() if isinstance(value, bool) else str(value))
    cur: Any = obj
    for part in field.split("."):
        if not isinstance(cur, Mapping):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    if field == "source" and isinstance(cur, Mapping):  # events: source.component
        return str(cur.get("component", ""))
    return str(cur)


@dataclass(frozen=True, slots=True)
class Selection:
    """The namespace, label selector and field selector of one list or watch."""

    namespace: str | None = None
    labels: LabelSelector | None = None
    fields: tuple[FieldRequirement, ...] = ()

    @classmethod
    def parse(
        cls, rt: ResourceType, namespace: str | None, label_selector: str | None, field_selector: str | None
    ) -> Selection:
        labels = None
        if label_selector:
            try:
                labels = LabelSelector.parse(label_selector)
            except SelectorError as exc:
                raise errors.bad_request(f"unable to parse requirement: {exc}") from None
            if labels.is_empty():
                labels = None
        fields = parse_field_selector(field_selector) if field_selector else ()
        for req in fields:
            if req.field not in rt.field_selectors:
                raise errors.bad_request(
                    f'field label not supported: {req.field} (resource "{rt.plural}" supports: '
                    + ", ".join(rt.field_selectors)
                    + ")"
                )
        return cls(namespace if rt.namespaced else None, labels, fields)

    @property
    def trivial(self) -> bool:
        return self.namespace is None and self.labels is None and not self.fields

    def matches(self, obj: Mapping[str, Any], rt: ResourceType) -> bool:
        meta = obj.get("metadata") or {}
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return False
        if self.labels is not None and not self.labels.matches(meta.get("labels") or {}):
            return False
        for req in self.fields:
            have = _field_value(obj, req.field, rt)
            if (have == req.value) != (req.op == "="):
                return False
        return True
