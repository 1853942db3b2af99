"""The cache's side of in-flight claims (the rule is :mod:`extender.cache.claims`).

The cache keeps, per quota, the in-flight entries its status lists (``_inflight``) and, for those
whose pod has since been seen claiming the quota, that pod's uid (``_arrived``: entry → pod; never
counted again — the pod's own claim is; one pod accounts for one entry). :func:`sync` makes a
quota's claims include exactly its entries that are unexpired and not arrived; it runs whenever
the quota's object or one of its pod claims changes, and every binder cycle for the quotas with
an expired or arrived entry (:func:`expire`), which then go dirty so that the leader rewrites
their status.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from extender.cache.claims import ADMISSION_PREFIX, ClaimEntry, entries_of
from extender.cache.meta import Obj

if TYPE_CHECKING:
    from extender.cache.cache import ClusterCache

__all__ = ["expire", "forget_quota", "read_entries", "sync"]


def read_entries(cache: ClusterCache, name: str, obj: Obj) -> None:
    """Take the in-flight entries of quota ``name`` from its object as just delivered."""
    entries = entries_of(obj)
    gone = cache._inflight.get(name, {}).keys() - entries.keys()
    for uid in gone:
        cache._arrived.pop(uid, None)
    if entries:
        cache._inflight[name] = entries
    else:
        cache._inflight.pop(name, None)


def forget_quota(cache: ClusterCache, name: str) -> None:
    """The quota was deleted: its entries, and what arrived of them, are forgotten."""
    for uid in cache._inflight.pop(name, {}):
        cache._arrived.pop(uid, None)


def sync(cache: ClusterCache, name: str) -> None:
    """The quota's claims include exactly its in-flight entries that are unexpired and whose
    pod has not been seen claiming it (extender.cache.claims)."""
    q = cache.quotas.get(name)
    if q is None:
        return
    entries = cache._inflight.get(name, {})
    have = [uid for uid in q.claims if uid.startswith(ADMISSION_PREFIX)]
    if not entries and not have:
        return
    now = cache.clock()
    pods = [c for c in q.claims.values() if not c.uid.startswith(ADMISSION_PREFIX)]
    want: dict[str, ClaimEntry] = {}
    taken = {cache._arrived[uid] for uid in entries if uid in cache._arrived}  # pods already matched
    for e in entries.values():
        if e.uid in cache._arrived or e.expired(now):
            continue
        pod = next((c for c in pods if c.uid not in taken and e.accounts_for(c)), None)
        if pod is not None:
            taken.add(pod.uid)
            cache._arrived[e.uid] = pod.uid
            cache.dirty_quotas.add(name)  # the entry is rewritten in the pod's form
            continue
        want[e.uid] = e
    changed = False
    for uid in have:
        if uid not in want:
            q.remove_claim(uid)
            changed = True
    for uid, e in want.items():
        if uid not in q.claims:
            q.restore_claim(e.claim())
            changed = True
    if changed:
        cache.dirty_quotas.add(name)
        cache._touch(name)
        cache._bump()


def expire(cache: ClusterCache, now: float) -> None:
    """Quotas with an entry that expired or whose pod arrived: synced, and dirty (the status
    still lists those entries: the leader removes them)."""
    for name, entries in list(cache._inflight.items()):
        if any(e.expired(now) or e.uid in cache._arrived for e in entries.values()):
            sync(cache, name)
            cache.dirty_quotas.add(name)  # the status still lists them: the leader removes them
