"""Cross-job zone affinity (``topology-affinity-key``, topology ``affinity_weight``) through
``run_once``: a gang prefers the zones where jobs of its key already hold quotas, before best fit,
unless ``affinity_weight`` is 0; and where its nodes go does not depend on which gang of which key
met its quota shape first in the cycle (the planner judges and scores nodes once per shape)."""

from __future__ import annotations

from typing import Any

from extender.cache.cache import ClusterCache
from extender.framework.policy import Policy
from extender.scheduler import Scheduler
from tests import builders as b
from tests.core.scenarios import policy_with_topology, quota_node

NOW = 1_800_000_000.0


def gang(job: str, workers: int, gpu: int, key: str, *, bound: list[str] | None = None) -> list[dict[str, Any]]:
    """A gang whose PodGroup names affinity key ``key``; with ``bound``, its quotas are bound
    there (a running job of that key)."""
    objs = b.training_job(job, workers, gpu=gpu, hca=1)
    objs[0]["spec"]["topology"] = {"affinityKey": key}
    for i, node in enumerate(bound or []):
        objs[1 + 2 * i]["status"] = {"phase": "QuotaBound", "nodeName": node, "boundBy": None}
        objs[2 + 2 * i]["spec"]["nodeName"] = node
        objs[2 + 2 * i]["status"] = {"phase": "Running"}
    return objs


def cluster() -> list[dict[str, Any]]:
    """Two leaves of four 8-GPU nodes, n0–n3 and n4–n7; key ``h`` runs on n0–n2, key ``g`` on
    n5–n7: only n3 (leaf s1) and n4 (leaf s2) are free."""
    objs: list[dict[str, Any]] = [b.queue("research")]
    for i in range(8):
        objs += [b.node(f"n{i}", index=i), b.topology(f"n{i}", ["s1" if i < 4 else "s2"])]
    objs += gang("run-h", 3, 8, "h", bound=["n0", "n1", "n2"])
    objs += gang("run-g", 3, 8, "g", bound=["n5", "n6", "n7"])
    return objs


def place(objs: list[dict[str, Any]], policy: Policy, job: str, workers: int) -> list[str]:
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, objs)
    assert not cache.conversion_errors
    ssn = Scheduler(policy).run_once(cache.snapshot(NOW)).session
    return [quota_node(ssn, f"q-{job}-{i}") for i in range(workers)]


def test_a_gang_s_nodes_do_not_depend_on_which_gang_met_its_shape_first() -> None:
    """Continuity picks the run n3–n4 for three 4-GPU workers of key ``g``. Which node takes two
    ranks must not depend on gang ``first`` (key ``h``, too large to fit, earlier in the queue)
    having met the same quota shape first: cross-job affinity is a zone's, weighed where zones are
    chosen, not in the node scores the planner keeps per shape (ties in the run: lower index)."""
    policy = policy_with_topology({"continuity_weight": 200.0, "affinity_weight": 10.0})
    alone = place([*cluster(), *gang("late", 3, 4, "g")], policy, "late", 3)
    first = gang("first", 5, 4, "h")
    for o in first:
        o["metadata"]["creationTimestamp"] = "2020-01-01T00:00:00Z"  # queued before "late"
    behind = place([*cluster(), *first, *gang("late", 3, 4, "g")], policy, "late", 3)
    assert behind == alone, behind
    assert alone == ["n3", "n3", "n4"], alone


def test_affinity_comes_before_best_fit_and_only_for_the_key() -> None:
    """Leaf s1 has two free nodes (best fit for a gang of two), s2 three, and key ``g`` runs on n4
    in s2: a gang of key ``g`` goes to s2; a gang of key ``h`` (nothing of it runs) to s1."""
    objs: list[dict[str, Any]] = [b.queue("research")]
    for i in range(8):
        objs += [b.node(f"n{i}", index=i), b.topology(f"n{i}", ["s1" if i < 4 else "s2"])]
    objs += gang("run-x", 2, 8, "x", bound=["n0", "n1"]) + gang("run-g", 1, 8, "g", bound=["n4"])
    policy = policy_with_topology({})
    assert place([*objs, *gang("pair", 2, 8, "g")], policy, "pair", 2) == ["n5", "n6"]
    assert place([*objs, *gang("pair", 2, 8, "h")], policy, "pair", 2) == ["n2", "n3"]
    unkeyed = policy_with_topology({"affinity_weight": 0.0})
    assert place([*objs, *gang("pair", 2, 8, "g")], unkeyed, "pair", 2) == ["n2", "n3"]
