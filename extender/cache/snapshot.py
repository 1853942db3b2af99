"""What a session gets from the cache: a :class:`Snapshot` of it, taken in O(1).

The snapshot *references* the cache's maps (a session reads them synchronously and never lives
across an ``await``, so they do not move under it) and the derived views the cache keeps until
its nodes or quotas change (node order, zones, quotas by queue, cluster total). The cache's
index sets — jobs pending, quotas that are release candidates, static, anti-affine, drifted —
are handed over as :class:`CopiedOnRead`: copied when a session first reads them, which most
extender requests never do.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import TYPE_CHECKING

from extender.framework.session import Snapshot

if TYPE_CHECKING:
    from extender.cache.cache import ClusterCache

__all__ = ["CopiedOnRead", "snapshot_of"]


class CopiedOnRead(Collection[str]):
    """One of the cache's index sets, as a snapshot holds it: copied on the first read.

    A session reads its snapshot synchronously (it never lives across an ``await``), so the copy
    shows the set as it was when the snapshot was taken; the copy keeps iteration safe from the
    cache changing later."""

    __slots__ = ("_copy", "_source")

    def __init__(self, source: set[str]) -> None:
        self._source: set[str] | None = source
        self._copy: frozenset[str] = frozenset()

    def _items(self) -> frozenset[str]:
        if self._source is not None:
            self._copy, self._source = frozenset(self._source), None
        return self._copy

    def __contains__(self, item: object) -> bool:
        return item in self._items()

    def __iter__(self) -> Iterator[str]:
        return iter(self._items())

    def __len__(self) -> int:
        return len(self._items())


def snapshot_of(cache: ClusterCache, now: float | None = None) -> Snapshot:
    """A view of the cache for one session (O(1): it references the cache's objects; the
    index sets are copied when a session first reads them — most extender requests never do)."""
    return Snapshot(
        now=cache.clock() if now is None else now,
        nodes=cache.nodes,
        node_order=cache.node_order(),
        quotas=cache.quotas,
        jobs=cache.jobs,
        task_job=cache.task_job,
        queues=cache.queues,
        jobqueues=cache.jobqueues,
        zones=cache.zones(),
        quotas_by_queue=cache.quotas_by_queue(),
        cluster_total=cache.cluster_total(),
        generation=cache.generation,
        gpu_resources=cache.opts.gpu_resources,
        spot_resource=cache.opts.spot_resource,
        pending_jobs=CopiedOnRead(cache.pending_jobs),
        quota_touched=cache.quota_touched,
        release_candidates=CopiedOnRead(cache.release_candidates),
        static_quotas=CopiedOnRead(cache.static_quotas),
        anti_affinity_quotas=CopiedOnRead(cache.anti_affinity_quotas),
        drifted_quotas=CopiedOnRead(cache.drifted),
    )
