"""Write intents: what a committed statement asks the API writer to make true.

Intents are plain values. Nothing in the framework performs them; the binder loop and the
extender hand them to ``extender.kube.writer`` (the one module that writes to the API).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BindQuota", "BindTask", "ClaimQuota", "EvictTask", "Intent", "ReleaseClaim", "ReleaseQuota"]


@dataclass(frozen=True, slots=True)
class ClaimQuota:
    """Pod annotation ``quota-name`` := quota (hop ①)."""

    task: str
    namespace: str
    name: str
    quota: str


@dataclass(frozen=True, slots=True)
class ReleaseClaim:
    """Remove the pod's ``quota-name`` annotation (a loser of a race; the loop re-assigns it)."""

    task: str
    namespace: str
    name: str
    quota: str
    reason: str


@dataclass(frozen=True, slots=True)
class BindQuota:
    """Quota status: ``nodeName`` := node, ``phase`` := QuotaBound (hop ②)."""

    quota: str
    node: str


@dataclass(frozen=True, slots=True)
class ReleaseQuota:
    """Quota status: back to QuotaEmpty without a node."""

    quota: str
    node: str
    reason: str


@dataclass(frozen=True, slots=True)
class BindTask:
    """Create the pod's Binding to node (hop ③)."""

    task: str
    namespace: str
    name: str
    node: str
    quota: str


@dataclass(frozen=True, slots=True)
class EvictTask:
    task: str
    namespace: str
    name: str
    node: str
    reason: str


Intent = ClaimQuota | ReleaseClaim | BindQuota | ReleaseQuota | BindTask | EvictTask
