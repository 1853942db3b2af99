"""What every informer-event handler of the cache reads of an API object's metadata.

An object is the dict the informer delivered (``Obj``). Its name and uid are ``""`` when absent;
an event is *older* than the version the cache holds when both resourceVersions are numeric and
the event's is smaller (as every apiserver backed by etcd issues them; otherwise an event is
never considered older).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["Obj", "name_of", "older", "resource_version", "same_spec", "uid_of"]

Obj = Mapping[str, Any]


def name_of(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def uid_of(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def resource_version(obj: Obj | None) -> int | None:
    """The object's resourceVersion as a number, or None (absent or not numeric)."""
    raw = ((obj or {}).get("metadata") or {}).get("resourceVersion")
    return int(raw) if isinstance(raw, str) and raw.isdigit() else None


def older(new: Obj, current: Obj | None) -> bool:
    """``new`` is an older version than ``current`` (resourceVersions compared when numeric,
    as every apiserver backed by etcd issues them; otherwise never considered older)."""
    a, b = resource_version(new), resource_version(current)
    return a is not None and b is not None and a < b


def same_spec(obj: Obj, seen: Obj | None) -> bool:
    """``obj``, as just read, is the object ``seen`` was a version of, its spec unchanged since: the
    same uid and ``metadata.generation`` (the API bumps it on every change of the spec; the specs
    are compared where either has none). A writer that judged room on ``seen`` must not write what
    it judged onto a bigger quota, nor onto a new object of the same name."""
    if seen is None:
        return True
    if uid_of(obj) != uid_of(seen):
        return False
    a, b = (obj.get("metadata") or {}).get("generation"), (seen.get("metadata") or {}).get("generation")
    if a is not None and b is not None:
        return bool(a == b)
    return bool(obj.get("spec") == seen.get("spec"))
