"""Prometheus metrics (prometheus_client; one registry per service instance, no globals).

* ``sky_extender_request_seconds{verb}`` / ``sky_extender_requests_total{verb,code}`` — the
  extender verbs (filter, prioritize, bind, preempt);
* ``sky_webhook_request_seconds`` / ``sky_webhook_requests_total{code}`` — admission reviews;
* ``sky_binder_action_seconds{action}`` and ``sky_binder_cycle_seconds`` — cycle time;
* ``sky_quotas{phase}`` — quotas by phase;
* ``sky_pending_jobs{reason}`` — jobs that did not progress, by the reason of their verdict;
* ``sky_topology_extra_leaves`` — placements that span more leaves than the gang needed;
* ``sky_gang_holds`` / ``sky_held_nodes`` — waiting gangs holding nodes, and the nodes they hold;
* ``sky_gang_placements_total{tier}`` — jobs placed, by the highest tier their nodes span (``node``,
  ``nvlink``, ``leaf``, ``spine``, ``core``, ``tier-N``, ``cluster``: extender/binder/placements.py);
* ``sky_binder_writes_total{kind,result}`` — API writes by the binder;
* ``sky_binder_leader`` — 1 while this replica holds the binder Lease;
* ``sky_cache_synced`` — 1 once every informer has listed;
* ``sky_policy_info{sha256,source}`` — 1 for the policy in effect;
* ``sky_policy_last_reload_timestamp_seconds`` — when the policy in effect was loaded;
* ``sky_policy_reload_total{result}`` — policy file changes seen: ``ok``, ``invalid``, ``unreadable``;
* ``sky_policy_reload_failing`` — 1 while the policy file cannot be applied (the old policy runs);
* ``sky_queue_allocated{queue,resource,spec}`` — Σ of what the claims on a queue's quotas request
  (Kueue's ``cluster_queue_resource_usage``), ``sky_queue_nominal{queue,resource,spec}`` — Σ of the
  queue's quotas, ``sky_queue_pending_jobs{queue}`` / ``sky_queue_running_jobs{queue}``: computed
  from the cache at scrape time (:class:`QueueCollector`), nothing to keep in step;
* ``sky_build_info{version,python}`` — 1, labelled with what runs;
* the ``process_*``, ``python_gc_*`` and ``python_info`` series of prometheus_client's collectors.

The five gauges above are the binder leader's, set after each of its cycles: a replica that stops
leading clears them (no ``sky_quotas`` / ``sky_pending_jobs`` series, the others 0) rather than
export what its last cycle saw (:meth:`Metrics.stop_leading`).

No ``*_created`` series: ``disable_created_metrics()`` (they double the series count and no
dashboard reads them).
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import (
    GC_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from extender import __version__
from extender.model.resources import is_byte_resource
from extender.model.task import ON_NODE

if TYPE_CHECKING:
    from extender.framework.session import Snapshot

__all__ = ["CONTENT_TYPE_LATEST", "POLICY_RELOAD_RESULTS", "Metrics", "QueueCollector"]

disable_created_metrics()  # type: ignore[no-untyped-call]
_ = GC_COLLECTOR  # the default registry's; ours gets its own below

POLICY_RELOAD_RESULTS = ("ok", "invalid", "unreadable")

_FAST = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
_CYCLE = (0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        ProcessCollector(registry=r)
        GCCollector(registry=r)
        PlatformCollector(registry=r)
        self.build_info = Gauge(
            "sky_build_info", "1, labelled with the build that runs", ["version", "python"], registry=r
        )
        self.build_info.labels(version=__version__, python=platform.python_version()).set(1)
        self.request_seconds = Histogram(
            "sky_extender_request_seconds", "Latency of the extender verbs", ["verb"], registry=r, buckets=_FAST
        )
        self.requests = Counter("sky_extender_requests", "Extender requests", ["verb", "code"], registry=r)
        self.webhook_seconds = Histogram(
            "sky_webhook_request_seconds", "Latency of admission reviews", registry=r, buckets=_FAST
        )
        self.webhook_requests = Counter("sky_webhook_requests", "Admission reviews by HTTP code", ["code"], registry=r)
        self._queues: QueueCollector | None = None
        self.action_seconds = Histogram(
            "sky_binder_action_seconds", "Time per action per binder cycle", ["action"], registry=r, buckets=_CYCLE
        )
        self.cycle_seconds = Histogram(
            "sky_binder_cycle_seconds", "Whole binder cycle, writes included", registry=r, buckets=_CYCLE
        )
        self.quotas = Gauge("sky_quotas", "Quotas by phase", ["phase"], registry=r)
        self.pending_jobs = Gauge("sky_pending_jobs", "Jobs that did not progress, by reason", ["reason"], registry=r)
        self.extra_leaves = Gauge(
            "sky_topology_extra_leaves", "Topology jobs placed on more leaves than they needed", registry=r
        )
        self.gang_holds = Gauge("sky_gang_holds", "Waiting gangs holding nodes (topology holds)", registry=r)
        self.held_nodes = Gauge("sky_held_nodes", "Nodes held for waiting gangs", registry=r)
        self.gang_placements = Counter(
            "sky_gang_placements",
            "Jobs placed by the binder, by the highest topology tier their nodes span",
            ["tier"],
            registry=r,
        )
        self.writes = Counter("sky_binder_writes", "API writes by the binder", ["kind", "result"], registry=r)
        self.leader = Gauge("sky_binder_leader", "1 while this replica holds the binder Lease", registry=r)
        self.synced = Gauge("sky_cache_synced", "1 once every informer has completed its first list", registry=r)
        self.policy_info = Gauge(
            "sky_policy_info", "1 for the scheduling policy in effect", ["sha256", "source"], registry=r
        )
        self.policy_loaded = Gauge(
            "sky_policy_last_reload_timestamp_seconds",
            "When the scheduling policy in effect was loaded (at start or by a reload)",
            registry=r,
        )
        self.policy_reloads = Counter(
            "sky_policy_reload",
            "Policy file changes seen by the reloader, by result (ok, invalid, unreadable)",
            ["result"],
            registry=r,
        )
        for result in POLICY_RELOAD_RESULTS:
            self.policy_reloads.labels(result=result)  # every result exported from the start, at 0
        self.policy_failing = Gauge(
            "sky_policy_reload_failing",
            "1 while the policy file cannot be applied (invalid or unreadable); the previous policy stays in effect",
            registry=r,
        )

    def stop_leading(self) -> None:
        """This replica no longer leads the binder: clear the gauges only a leader's cycles set."""
        self.quotas.clear()
        self.pending_jobs.clear()
        self.extra_leaves.set(0)
        self.gang_holds.set(0)
        self.held_nodes.set(0)

    def set_policy(self, sha256: str, source: str, loaded_at: float) -> None:
        """The policy in effect is now this one."""
        self.policy_info.clear()
        self.policy_info.labels(sha256=sha256, source=source).set(1)
        self.policy_loaded.set(loaded_at)

    def watch_queues(self, snapshot: Callable[[], Snapshot | None]) -> None:
        """Export the per-queue gauges, read from ``snapshot()`` at each scrape (None: not synced)."""
        if self._queues is None:
            self._queues = QueueCollector(snapshot)
            self.registry.register(self._queues)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class QueueCollector(Collector):
    """The per-queue gauges, computed from one cache snapshot per scrape.

    A queue's quotas are ``Snapshot.quotas_by_queue``; each quota adds its request to
    ``nominal`` and its claims' requests (``QuotaInfo.allocated``) to ``allocated``, under the
    quota's GPU spec (``""``: any model). A job is pending when one of its alive tasks is not on a
    node, running when every alive task is (a job without alive tasks is neither)."""

    def __init__(self, snapshot: Callable[[], Snapshot | None]) -> None:
        self.snapshot = snapshot

    def describe(self) -> Iterator[Metric]:
        return iter(self._families())

    def _families(self) -> list[GaugeMetricFamily]:
        labels = ["queue", "resource", "spec"]
        return [
            GaugeMetricFamily("sky_queue_allocated", "What the claims on a queue's quotas request", labels=labels),
            GaugeMetricFamily("sky_queue_nominal", "What a queue's quotas hold", labels=labels),
            GaugeMetricFamily("sky_queue_pending_jobs", "Jobs of a queue with a task not on a node", labels=["queue"]),
            GaugeMetricFamily("sky_queue_running_jobs", "Jobs of a queue with every task on a node", labels=["queue"]),
        ]

    def collect(self) -> Iterator[Metric]:
        allocated, nominal, pending, running = families = self._families()
        snap = self.snapshot()
        if snap is not None:
            for queue, names in sorted(snap.quotas_by_queue.items()):
                used: dict[tuple[str, str], int] = {}
                held: dict[tuple[str, str], int] = {}
                for name in names:
                    q = snap.quotas.get(name)
                    if q is None:
                        continue
                    for res, v in q.request.q.items():
                        held[res, q.spec] = held.get((res, q.spec), 0) + v
                    for res, v in q.allocated.q.items():
                        used[res, q.spec] = used.get((res, q.spec), 0) + v
                for (res, spec), v in sorted(held.items()):
                    nominal.add_metric([queue, res, spec], _units(res, v))
                    allocated.add_metric([queue, res, spec], _units(res, used.get((res, spec), 0)))
            counts: dict[str, list[int]] = {}
            for job in snap.jobs.values():
                alive = job.alive_tasks()
                if not alive:
                    continue
                c = counts.setdefault(job.queue, [0, 0])
                c[0 if any(t.status not in ON_NODE for t in alive) else 1] += 1
            for queue, (p, r) in sorted(counts.items()):
                pending.add_metric([queue], p)
                running.add_metric([queue], r)
        return iter(families)


def _units(resource: str, value: int) -> float:
    """A ledger value in the resource's own unit: bytes, or whole units (the ledger keeps thousandths)."""
    return float(value) if is_byte_resource(resource) else value / 1000
