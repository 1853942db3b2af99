"""Requests no node could ever hold: the largest allocatable of each resource across nodes.

A quota is bound only to a node whose quota-idle covers its whole request, so a quota that asks
more of some resource than the largest node's allocatable can never be bound, whatever is freed.
That is not a wait but a mistake in the quota (or a missing node), and it is said as such.
"""

from __future__ import annotations

from collections.abc import Iterable

from extender.model.node import NodeInfo
from extender.model.resources import Resource, format_quantity

__all__ = ["largest_allocatable", "unholdable"]


def largest_allocatable(nodes: Iterable[NodeInfo]) -> dict[str, int]:
    """Resource name → the most any one node has allocatable of it (resources no node has: absent)."""
    out: dict[str, int] = {}
    for node in nodes:
        for name, units in node.allocatable.q.items():
            if units > out.get(name, 0):
                out[name] = units
    return out


def unholdable(request: Resource, largest: dict[str, int]) -> str:
    """Why no node could ever hold ``request`` (e.g. ``"no node has more than 8 nvidia.com/gpu
    (asks 16)"``), naming the first such resource by name; "" when some node is large enough for
    every resource, or when there are no nodes at all (nothing is known yet)."""
    if not largest:
        return ""
    for name in sorted(request.q):
        want = request.q[name]
        have = largest.get(name, 0)
        if want > have:
            if not have:
                return f"no node has any {name} (asks {format_quantity(name, want)})"
            return f"no node has more than {format_quantity(name, have)} {name} (asks {format_quantity(name, want)})"
    return ""
