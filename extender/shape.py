"""Structural checks of untrusted JSON before any code reads it: the wire's type rules, declared once.

Every HTTP endpoint that parses a body the caller controls (the extender verbs, the admission
webhook) checks its document against a :data:`Shape` first, so that code further in can read
``obj["metadata"]["labels"].items()`` without a ``TypeError`` on a list where a map was due —
the difference between a clear 400 / ``Error`` naming the field and a 500. ::

    problem = check(doc, POD, "request.object")
    if problem:                         # "request.object.spec.containers[0].resources: expected an object, got list"
        ...

The rules are those of Kubernetes' JSON: ``null`` equals absent (every field may be null; an
array's items may not — the apiserver never sends one, and readers iterate them),
unknown keys are ignored (the reader does not look at them), numbers are not booleans. A shape
lists only the fields some reader of this project reads, with the type every reader expects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

__all__ = [
    "ANY",
    "BOOL",
    "INT",
    "POD",
    "QUANTITY",
    "STR",
    "STR_MAP",
    "ListOf",
    "MapOf",
    "Obj",
    "Scalar",
    "Shape",
    "check",
]


_EXACT: dict[tuple[type, ...], frozenset[type]] = {}


@dataclass(frozen=True, slots=True)
class Scalar:
    """A JSON scalar of one of ``types`` (``bool`` is never an ``int`` here)."""

    types: tuple[type, ...]
    name: str

    @property
    def exact(self) -> frozenset[type]:
        """The types a value may be exactly (no subclass: ``bool`` is an ``int`` subclass)."""
        return _EXACT.setdefault(self.types, frozenset(self.types))


@dataclass(frozen=True, slots=True)
class Obj:
    """A JSON object; ``fields`` are checked when present, other keys are ignored."""

    fields: Mapping[str, Shape]


@dataclass(frozen=True, slots=True)
class ListOf:
    item: Shape


@dataclass(frozen=True, slots=True)
class MapOf:
    """A JSON object of any keys whose every value has the shape ``value``."""

    value: Shape


Shape: TypeAlias = Scalar | Obj | ListOf | MapOf | None
"""``None``: anything (the reader copes with every JSON value)."""

ANY: Final[Shape] = None
STR: Final = Scalar((str,), "a string")
INT: Final = Scalar((int,), "an integer")
BOOL: Final = Scalar((bool,), "a boolean")
QUANTITY: Final = Scalar((str, int, float), "a quantity (string or number)")
STR_MAP: Final = MapOf(STR)

_RESOURCE_LIST: Final = MapOf(QUANTITY)
_REQUIREMENT: Final = Obj({"key": STR, "operator": STR, "values": ListOf(STR)})
_NODE_TERM: Final = Obj({"matchExpressions": ListOf(_REQUIREMENT), "matchFields": ListOf(_REQUIREMENT)})
_CONTAINER: Final = Obj(
    {
        "name": STR,
        "restartPolicy": STR,
        "resources": Obj({"requests": _RESOURCE_LIST, "limits": _RESOURCE_LIST}),
    }
)

POD: Final = Obj(
    {
        "apiVersion": STR,
        "kind": STR,
        "metadata": Obj(
            {
                "name": STR,
                "generateName": STR,
                "namespace": STR,
                "uid": STR,
                "resourceVersion": STR,
                "creationTimestamp": STR,
                "deletionTimestamp": STR,
                "labels": STR_MAP,
                "annotations": STR_MAP,
            }
        ),
        "spec": Obj(
            {
                "nodeName": STR,
                "schedulerName": STR,
                "priorityClassName": STR,
                "priority": INT,
                "preemptionPolicy": STR,
                "containers": ListOf(_CONTAINER),
                "initContainers": ListOf(_CONTAINER),
                "overhead": _RESOURCE_LIST,
                "resources": Obj({"requests": _RESOURCE_LIST, "limits": _RESOURCE_LIST}),
                "nodeSelector": STR_MAP,
                "tolerations": ListOf(
                    Obj({"key": STR, "operator": STR, "value": STR, "effect": STR, "tolerationSeconds": INT})
                ),
                "affinity": Obj(
                    {
                        "nodeAffinity": Obj(
                            {
                                "requiredDuringSchedulingIgnoredDuringExecution": Obj(
                                    {"nodeSelectorTerms": ListOf(_NODE_TERM)}
                                ),
                                "preferredDuringSchedulingIgnoredDuringExecution": ListOf(
                                    Obj({"weight": INT, "preference": _NODE_TERM})
                                ),
                            }
                        )
                    }
                ),
            }
        ),
        "status": Obj({"phase": STR, "startTime": STR}),
    }
)
"""A Pod as far as ``extender.cache.convert`` and the webhook read one."""


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    return "number"


def _expected(shape: Shape) -> str:
    if isinstance(shape, Scalar):
        return shape.name
    return "an array" if isinstance(shape, ListOf) else "an object"


def check(value: Any, shape: Shape, path: str) -> str | None:
    """The first place where ``value`` is not of ``shape`` (``"<path>: expected …, got …"``), or None.

    Recursion follows the shape, not the document, so its depth is the shape's (a deeply nested
    document cannot exhaust the stack); the cost is linear in the checked part's size, and the
    path is spelled only for the answer."""
    found = _mismatch(value, shape)
    if found is None:
        return None
    where, problem = found
    return f"{path}{''.join(reversed(where))}: {problem}"


def _mismatch(v: Any, s: Shape) -> tuple[list[str], str] | None:
    """``(path segments innermost first, what is wrong)`` of the first mismatch, or None."""
    if s is None or v is None:
        return None
    if type(s) is Scalar:
        if isinstance(v, bool) and bool not in s.types:
            return [], f"expected {s.name}, got boolean"
        return None if isinstance(v, s.types) else ([], f"expected {s.name}, got {_kind(v)}")
    if type(v) is not dict and type(s) is not ListOf:
        return [], f"expected an object, got {_kind(v)}"
    if type(s) is Obj:
        for name, sub in s.fields.items():
            item = v.get(name)
            if item is None or sub is None:
                continue
            if type(sub) is Scalar and type(item) in sub.exact:
                continue  # the common case, without a call
            found = _mismatch(item, sub)
            if found is not None:
                found[0].append(f".{name}")
                return found
        return None
    if type(s) is MapOf:
        if s.value is not None:
            for key, item in v.items():
                found = _mismatch(item, s.value)
                if found is not None:
                    found[0].append(f".{key}")
                    return found
        return None
    assert type(s) is ListOf
    if type(v) is not list:
        return [], f"expected an array, got {_kind(v)}"
    if s.item is not None:
        for i, item in enumerate(v):
            found = ([], f"expected {_expected(s.item)}, got null") if item is None else _mismatch(item, s.item)
            if found is not None:
                found[0].append(f"[{i}]")
                return found
    return None
