"""Shared pieces of the core property tests: the hypothesis profile and state fingerprints.

The profile ``sky-core`` runs every property test of this package with at least 500 examples and
no deadline (CI uses it as is). Set ``SKY_CORE_HYPOTHESIS_PROFILE=sky-core-quick`` for a fast local
run, or ``sky-core-soak`` (10,000 examples each) to hunt for rare counter-examples before a
release. The decorator :data:`PROPERTY` applies the chosen profile to one test only, so that
loading it never changes the settings of other test packages.
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, settings

from extender.cache.cache import ClusterCache
from extender.framework.session import Session
from extender.model.job import QueueInfo
from extender.model.resources import Resource

settings.register_profile(
    "sky-core",
    max_examples=500,
    deadline=None,
    stateful_step_count=40,
    suppress_health_check=(HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much),
)
settings.register_profile("sky-core-quick", parent=settings.get_profile("sky-core"), max_examples=50)
settings.register_profile("sky-core-soak", parent=settings.get_profile("sky-core"), max_examples=10_000)

PROFILE = os.environ.get("SKY_CORE_HYPOTHESIS_PROFILE", "sky-core")
PROPERTY = settings(settings.get_profile(PROFILE))
"""Decorator: the core property profile (≥ 500 examples unless a quick profile was asked for)."""

MIN_EXAMPLES = 500


def plain(r: Resource) -> dict[str, int]:
    """A resource vector as a plain dict without zero entries (for equality with a reference)."""
    return {k: v for k, v in r.q.items() if v}


def session_state(ssn: Session) -> dict[str, Any]:
    """Everything a statement may change, read through the session (overlay first), field by field."""
    return {
        "nodes": {n.name: n.ledger_state() for n in ssn.nodes()},
        "quotas": {q.name: q.state() for q in ssn.quotas()},
        "tasks": {t.uid: (t.status, t.quota, t.node) for j in ssn.jobs() for t in j.tasks.values()},
    }


def plugin_state(ssn: Session) -> dict[str, Any]:
    """What the plugins that follow statement events answer (DRF shares, JobQueue admission)."""
    jobs = sorted(ssn.jobs(), key=lambda j: j.key)
    queues = sorted({j.queue for j in jobs})
    return {
        "order": {j.key: ssn.stages.order(j) for j in jobs},
        "enqueueable": {j.key: ssn.stages.enqueueable(j).message() for j in jobs},
        "queue_order": {q: ssn.stages.queue_order(ssn.snap.queues.get(q) or QueueInfo(q)) for q in queues},
    }


def cache_state(cache: ClusterCache) -> dict[str, Any]:
    """The cache's own objects (what a session must never mutate: it is copy-on-write)."""
    return {
        "nodes": {name: (n.ledger_state(), n.allocatable, dict(n.quota_allocated)) for name, n in cache.nodes.items()},
        "quotas": {name: (q.state(), q.request, dict(q.claims)) for name, q in cache.quotas.items()},
        "tasks": {t.uid: (t.status, t.quota, t.node, t.request) for j in cache.jobs.values() for t in j.tasks.values()},
        "jobs": {k: tuple(sorted(j.tasks)) for k, j in cache.jobs.items()},
    }
