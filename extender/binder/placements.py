"""Which tier each placement spans, for ``sky_gang_placements_total{tier}``, and how many
placements span more zones than they needed, for ``sky_topology_extra_leaves``.

A job counts as placed in the cycle that commits (writes successfully) a BindQuota of one of its
quotas and leaves every quota its pods claim bound. Its tier is the highest one its nodes span
(:func:`extender.model.topology.spanned_tier`): ``node`` for a job on one node, ``nvlink``,
``leaf``, ``spine``, ``core``, ``tier-N`` above, and ``cluster`` when its nodes share no tier
(nodes whose upper tiers nobody names).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from extender.framework.intents import BindQuota, Intent
from extender.model.job import JobInfo
from extender.model.topology import describe_tier, spanned_tier

if TYPE_CHECKING:
    from extender.cache.cache import ClusterCache

__all__ = ["committed_by_tier", "extra_leaves", "placement_tier", "placements_by_tier"]


def placement_tier(nodes: Sequence[str], node_tiers: Callable[[str], Sequence[str]]) -> str:
    """The metric label for a job on ``nodes`` (module docstring)."""
    distinct = sorted(set(nodes))
    if len(distinct) == 1:
        return "node"
    level = spanned_tier(node_tiers(n) for n in distinct)
    return describe_tier(level) if level is not None else "cluster"


def placements_by_tier(
    committed: Iterable[BindQuota],
    jobs: Iterable[JobInfo],
    quota_node: Callable[[str], str],
    node_tiers: Callable[[str], Sequence[str]],
) -> Counter[str]:
    """Tier label → jobs placed by this cycle's ``committed`` binds (``jobs``: those the cycle
    changed; ``quota_node``: a quota's node now, ``""`` when unbound)."""
    bound = {b.quota for b in committed}
    out: Counter[str] = Counter()
    if not bound:
        return out
    for job in jobs:
        quotas = {t.quota for t in job.alive_tasks() if t.quota}
        if not quotas & bound:
            continue
        nodes = [quota_node(q) for q in sorted(quotas)]
        if all(nodes):
            out[placement_tier(nodes, node_tiers)] += 1
    return out


def committed_by_tier(cache: ClusterCache, intents: Iterable[Intent]) -> Counter[str]:
    """:func:`placements_by_tier` of a cycle's ``intents`` against the cache after its writes
    (which holds every successful write's answer: a bind is committed when its quota is on its
    node)."""

    def quota_node(name: str) -> str:
        q = cache.quotas.get(name)
        return q.node_name if q is not None else ""

    def node_tiers(name: str) -> tuple[str, ...]:
        node = cache.nodes.get(name)
        return node.tiers if node is not None else ()

    committed = [i for i in intents if isinstance(i, BindQuota) and quota_node(i.quota) == i.node]
    keys: set[str] = set()
    for b in committed:
        quota = cache.quotas.get(b.quota)
        keys.update(cache.task_job[uid] for uid in (quota.claims if quota else ()) if uid in cache.task_job)
    jobs = [cache.jobs[k] for k in sorted(keys) if k in cache.jobs]
    return placements_by_tier(committed, jobs, quota_node, node_tiers)


def extra_leaves(cache: ClusterCache) -> int:
    """Topology jobs whose bound quotas span more zones than the gang needed.

    A gang of n quotas (one per node) needs ``ceil(n / largest zone of its GPU model)`` zones.
    """
    largest: dict[str, int] = {}
    for (spec, _zone), nodes in cache.zones().items():
        largest[spec] = max(largest.get(spec, 0), len(nodes))
    count = 0
    for job in cache.jobs.values():
        if not job.topology:
            continue
        names = {t.quota for t in job.alive_tasks() if t.quota}
        quotas = [cache.quotas.get(n) for n in names]
        if not quotas or any(q is None or not q.node_name for q in quotas):
            continue
        zones = set()
        spec = ""
        for q in quotas:
            node = cache.nodes.get(q.node_name) if q is not None else None
            if node is not None:
                zones.add(node.zone or node.name)
                spec = node.spec
        biggest = largest.get(spec, 1) or 1
        if len(zones) > -(-len(quotas) // biggest):
            count += 1
    return count
