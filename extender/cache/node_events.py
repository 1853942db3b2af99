"""Node and NodeTopology events into the cache's node ledgers.

A node's :class:`~extender.model.node.NodeInfo` is rebuilt from its Node and its NodeTopology
(either event) and then carries again everything placed on it: the pods the cache saw there and
the quotas bound to it. A NodeTopology status-only write (the discovery agents' heartbeat)
changes nothing a node is built from: no rebuild, no generation bump. Also here: which nodes'
``zone`` label differs from their NodeTopology's (:func:`zone_label_drift`). A node whose
``spot-shared`` annotation sizes no spot pool (:func:`extender.model.spot.pools`) is logged
once per value, and kept in ``cache.node_problems`` until it is fixed or the node goes.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from extender import wellknown
from extender.cache import convert
from extender.cache.convert import ConversionError
from extender.cache.meta import Obj, name_of
from extender.model.node import NodeInfo
from extender.model.spot import pools
from extender.model.task import ON_NODE, TaskInfo

if TYPE_CHECKING:
    from extender.cache.cache import ClusterCache

__all__ = [
    "on_node_add",
    "on_node_delete",
    "on_topology_add",
    "on_topology_delete",
    "on_topology_update",
    "zone_label_drift",
]

log = logging.getLogger(__name__)


def on_node_add(cache: ClusterCache, obj: Obj) -> None:
    cache._node_objs[name_of(obj)] = obj
    _rebuild_node(cache, name_of(obj))


def on_node_delete(cache: ClusterCache, obj: Obj) -> None:
    name = name_of(obj)
    cache._node_objs.pop(name, None)
    cache.nodes.pop(name, None)
    cache.node_problems.pop(name, None)
    for q in list(cache._quotas_on.get(name, ())):
        cache._touch(q)
    cache._bump(nodes=True)


def on_topology_add(cache: ClusterCache, obj: Obj) -> None:
    name = name_of(obj)
    cache._topos[name] = obj
    if name in cache._node_objs:
        _rebuild_node(cache, name)


def on_topology_update(cache: ClusterCache, old: Obj, new: Obj) -> None:
    name = name_of(new)
    if name in cache._topos and old.get("spec") == new.get("spec"):
        # a status-only write (the discovery agents' heartbeat): nothing the node is built
        # from changed, so no rebuild and no generation bump
        cache._topos[name] = new
        return
    on_topology_add(cache, new)


def on_topology_delete(cache: ClusterCache, obj: Obj) -> None:
    name = name_of(obj)
    cache._topos.pop(name, None)
    if name in cache._node_objs:
        _rebuild_node(cache, name)


def zone_label_drift(cache: ClusterCache) -> dict[str, str | None]:
    """Nodes whose ``zone`` label differs from their NodeTopology's (node → the label it should
    have; None: remove it). The discovery agents label the NodeTopology they own; the binder
    leader copies the label to the Node. A NodeTopology without the label but with switches was
    not written by an agent (by hand, an older agent): its node is left as it is; one without
    switches means the node lost every switch, and its label goes."""
    out: dict[str, str | None] = {}
    for name, topo in cache._topos.items():
        node = cache._node_objs.get(name)
        if node is None:
            continue
        want = ((topo.get("metadata") or {}).get("labels") or {}).get(wellknown.LABEL_ZONE)
        if want is None and any(convert.topology_switches(topo)):
            continue
        have = ((node.get("metadata") or {}).get("labels") or {}).get(wellknown.LABEL_ZONE)
        if have != want:
            out[name] = want
    return out


def _rebuild_node(cache: ClusterCache, name: str) -> None:
    obj = cache._node_objs[name]
    try:
        node = convert.node_from_api(obj, cache._topos.get(name), cache.opts)
    except (ConversionError, ValueError) as exc:
        cache._error(f"Node/{name}", exc)
        return
    cache._ok(f"Node/{name}")
    _check_spot_pools(cache, name, node)
    # re-attach everything this node carries
    for task in _tasks_on(cache, name):
        node.add_task(task, force=True)
    bound_here = [q for q in (cache.quotas.get(n) for n in sorted(cache._quotas_on.get(name, ()))) if q is not None]
    for q in bound_here:
        node.add_quota(q.name, q.request, force=True)
    cache.nodes[name] = node
    for q in bound_here:
        cache._touch(q.name)
    cache._bump(nodes=True)


def _check_spot_pools(cache: ClusterCache, name: str, node: NodeInfo) -> None:
    """Record (and log, once per message) why the node's spot pools cannot be read; forget it
    once they can. Spot pods avoid such a node with ``SpotPoolInvalid``: the operator sees why
    in the log, not only in a pending spot pod's events."""
    problem = pools(node, cache.opts.spot_resource)
    if not isinstance(problem, str):
        cache.node_problems.pop(name, None)
        return
    if cache.node_problems.get(name) != problem:
        log.warning("spot pods avoid node %s: %s", name, problem)
    cache.node_problems[name] = problem


def _tasks_on(cache: ClusterCache, node: str) -> list[TaskInfo]:
    """The pods the cache has seen placed on ``node`` (of any scheduler) that still are."""
    out = []
    for uid in cache._tasks_on_node.get(node, ()):
        t = cache.others.get(uid) or cache.task(uid)
        if t is not None and t.node == node and t.status in ON_NODE:
            out.append(t)
    return out
