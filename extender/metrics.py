"""Prometheus metrics (prometheus_client; one registry per service instance, no globals).

* ``sky_extender_request_seconds{verb}`` — latency of each extender / webhook verb;
* ``sky_binder_action_seconds{action}`` and ``sky_binder_cycle_seconds`` — cycle time;
* ``sky_quotas{phase}`` — quotas by phase;
* ``sky_pending_jobs{reason}`` — jobs that did not progress, by the reason of their verdict;
* ``sky_topology_extra_leaves`` — placements that span more leaves than the gang needed;
* ``sky_gang_placements_total{tier}`` — jobs placed, by the highest tier their nodes span (``node``,
  ``nvlink``, ``leaf``, ``spine``, ``core``, ``tier-N``, ``cluster``: extender/binder/placements.py);
* ``sky_binder_writes_total{kind,result}`` — API writes by the binder;
* ``sky_binder_leader`` — 1 while this replica holds the binder Lease;
* ``sky_cache_synced`` — 1 once every informer has listed;
* ``sky_policy_info{sha256,source}`` — 1 for the policy in effect;
* ``sky_policy_last_reload_timestamp_seconds`` — when the policy in effect was loaded;
* ``sky_policy_reload_total{result}`` — policy file changes seen: ``ok``, ``invalid``, ``unreadable``;
* ``sky_policy_reload_failing`` — 1 while the policy file cannot be applied (the old policy runs).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

__all__ = ["CONTENT_TYPE_LATEST", "POLICY_RELOAD_RESULTS", "Metrics"]

POLICY_RELOAD_RESULTS = ("ok", "invalid", "unreadable")

_FAST = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
_CYCLE = (0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.request_seconds = Histogram(
            "sky_extender_request_seconds", "Latency of extender and webhook verbs", ["verb"], registry=r, buckets=_FAST
        )
        self.requests = Counter("sky_extender_requests", "Extender and webhook requests", ["verb", "code"], registry=r)
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

    def set_policy(self, sha256: str, source: str, loaded_at: float) -> None:
        """The policy in effect is now this one."""
        self.policy_info.clear()
        self.policy_info.labels(sha256=sha256, source=source).set(1)
        self.policy_loaded.set(loaded_at)

    def render(self) -> bytes:
        return generate_latest(self.registry)
