"""Quota bindings in flight: a quota a writer of this replica has bound to a node, whose write the
API has not answered yet — the extender's inline bind (``extender/api/binding.py``) or a binder
cycle's plan (``extender/binder/loop.py``).

The rule (kube-scheduler's *assume*, for quotas): from the moment a writer decides a binding until
the answer of its write is applied or the write fails, the cache counts the quota on its node, as
``status.nodeName`` will say once the write lands. Every judge that reads the cache meanwhile —
another bind, the next cycle, a filter — sees that room taken, so two writers of one replica never
both take the same room of a node (DESIGN §4 invariant 1 on the API objects: kube-scheduler binds
pods in parallel, and the binder's writes of a cycle take seconds at 16,000 quotas).

A delivery of the quota's object keeps the binding in flight while the object shows no node; it
ends it when the object shows a node — ours (the write was answered: the object counts from then
on) or another (someone else bound it first: the object wins) — or is another object of that
name (deleted and created again). :func:`forget` ends it when the write failed or was skipped
(the quota is as its object says again), :func:`expire` when its writer never came back
(``ClusterCache.assume_ttl``). Deliveries are :mod:`~extender.cache.quota_events`' to judge
(``_in_flight``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from extender.cache import quota_events
from extender.cache.meta import uid_of
from extender.model.node import LedgerError

if TYPE_CHECKING:
    from extender.cache.cache import ClusterCache

__all__ = ["InFlight", "assume", "expire", "forget"]


@dataclass(frozen=True, slots=True)
class InFlight:
    """A binding of a quota to ``node`` written for the object of ``uid``, assumed until ``expires``."""

    node: str
    uid: str
    expires: float


def assume(cache: ClusterCache, name: str, node_name: str, *, force: bool = False) -> None:
    """Count quota ``name`` as bound to ``node_name`` until its write is answered. Raises
    ``KeyError`` for an unknown quota, :class:`LedgerError` for an unknown node, a quota bound
    elsewhere, or (unless ``force``: a binding that mirrors a fact) one that does not fit."""
    quota = cache.quotas[name]
    if quota.node_name:
        if quota.node_name == node_name:
            return  # bound there already (its object says so, or another write of ours does)
        raise LedgerError(f"quota {name} is bound to {quota.node_name}, not {node_name}")
    node = cache.nodes.get(node_name)
    if node is None:
        raise LedgerError(f"node {node_name} is not in the cache")
    node.add_quota(name, quota.request, force=force)
    quota = cache.quotas[name] = quota.clone()  # stored quotas are replaced, never edited (on_quota_add)
    quota.bind_in_flight(node_name)
    cache._quotas_on[node_name].add(name)
    uid = uid_of(cache._quota_objs.get(name) or {})
    cache.bindings[name] = InFlight(node_name, uid, cache.clock() + cache.assume_ttl)
    cache._touch(name)
    cache._bump()


def forget(cache: ClusterCache, name: str) -> None:
    """The write of the binding failed or was skipped: the quota is as its object says again."""
    if cache.bindings.pop(name, None) is None:
        return
    obj = cache._quota_objs.get(name)
    if obj is not None:
        quota_events.apply_object(cache, obj)


def expire(cache: ClusterCache) -> list[str]:
    """Forget the bindings whose writer never came back; returns their quotas."""
    now = cache.clock()
    gone = [name for name, b in cache.bindings.items() if b.expires <= now]
    for name in gone:
        forget(cache, name)
    return gone
