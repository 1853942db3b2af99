"""A node's spot pools, as its annotation sizes them (pure: the cache reads them to report a bad
annotation, the ``sylas`` plugin to lend them to spot pods).

Each node lends its spot resource in two pools: ``shared`` (several pods share GPUs), sized by
the node annotation ``scheduling.infini-ai.com/spot-shared``, and ``exclusive``, the rest.
"""

from __future__ import annotations

from extender import wellknown
from extender.model.node import NodeInfo
from extender.model.resources import to_units

__all__ = ["pools"]


def pools(node: NodeInfo, resource: str) -> tuple[int, int] | str:
    """(shared, exclusive) capacity of the node's spot resource, in milli-units: the shared pool
    is the ``spot-shared`` annotation (none: 0), the exclusive pool the rest. An annotation that
    is no quantity between 0 and what the node has of ``resource`` (an operator's typo: ``two``,
    ``-2``, ``80`` on a node of 8) sizes no pool: the answer is why (a str), which the predicate
    gives spot pods as their reason — as kube-apiserver refuses an out-of-range value rather than
    clamp it, never a guess (0, or the whole node) that moves GPUs from one pool to the other."""
    total = node.allocatable.get(resource)
    raw = node.annotations.get(wellknown.ANNO_SPOT_SHARED)
    if not raw:
        return 0, total
    try:
        shared = to_units(resource, raw)
    except ValueError:
        shared = -1
    if shared < 0:
        return f"node annotation {wellknown.ANNO_SPOT_SHARED}: {raw!r} is not a quantity of {resource}"
    if shared > total:
        return (
            f"node annotation {wellknown.ANNO_SPOT_SHARED}: {raw!r} is more than the node's {total / 1000:g} {resource}"
        )
    return shared, total - shared
