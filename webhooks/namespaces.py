"""Where the webhook learns namespace labels (``scheduling.infini-ai.com/inject=enabled``).

The service's cluster cache does not watch namespaces; the webhook only needs their labels.
:class:`NamespaceLabels` is the one method it calls. :class:`NamespaceLabelStore` implements
it as a dict fed by a namespace informer (its ``on_namespace_add/update/delete`` handlers have
the cache's handler shape), and doubles as the test double (construct it from a dict).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

__all__ = ["NamespaceLabelStore", "NamespaceLabels"]


@runtime_checkable
class NamespaceLabels(Protocol):
    def labels(self, namespace: str) -> Mapping[str, str] | None:
        """The namespace's labels, or ``None`` when the namespace is not known (yet)."""
        ...


class NamespaceLabelStore:
    """Namespace name → labels, kept by informer events (or given as a dict in tests)."""

    __slots__ = ("_labels",)

    def __init__(self, initial: Mapping[str, Mapping[str, str]] | None = None) -> None:
        self._labels: dict[str, Mapping[str, str]] = {k: dict(v) for k, v in (initial or {}).items()}

    def labels(self, namespace: str) -> Mapping[str, str] | None:
        return self._labels.get(namespace)

    def set(self, namespace: str, labels: Mapping[str, str]) -> None:
        self._labels[namespace] = dict(labels)

    # informer handlers (raw API objects)
    def on_namespace_add(self, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            return
        raw = meta.get("labels")
        labels = {str(k): str(v) for k, v in raw.items()} if isinstance(raw, Mapping) else {}
        self._labels[name] = labels

    def on_namespace_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        self.on_namespace_add(new)

    def on_namespace_delete(self, obj: Mapping[str, Any]) -> None:
        name = (obj.get("metadata") or {}).get("name")
        if isinstance(name, str):
            self._labels.pop(name, None)

    def __len__(self) -> int:
        return len(self._labels)
