"""Volcano-uthelper-style scenarios through the real conversion, cache and scheduler (no HTTP).

Each scenario builds API objects (``tests/builders.py``), feeds them to a ``ClusterCache``, runs
``Scheduler(default_policy()).run_once`` and asserts on what the cycle decided: the committed
intents, the final state of the quotas it touched, the per-job verdicts and the session's
ledgers. Between cycles :func:`write_back` plays the binder: it writes the decisions into the
API objects and feeds them back as informer updates.

This module is the harness the ``test_scenarios_*`` modules share, with the clusters more than
one of them uses."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import yaml

from extender import wellknown
from extender.cache.cache import ClusterCache
from extender.conf import default_policy, default_policy_text, load_policy_text
from extender.framework.intents import BindQuota, ClaimQuota, ReleaseClaim
from extender.framework.policy import Policy
from extender.framework.session import Session
from extender.scheduler import CycleResult, Scheduler
from tests import builders as b

NOW = 1_800_000_000.0
POLICY = default_policy()

GPU = wellknown.RESOURCE_GPU
HCA = wellknown.RESOURCE_RDMA_HCA
QUEUE_ANNO = {wellknown.ANNO_QUEUE_NAME: "research"}


def policy_without(action: str) -> Policy:
    """The default policy with one action left out of its list (as an older policy file has it)."""
    text = default_policy_text()
    line = f"  - {action}\n"
    assert line in text, f"the default policy lists no plain {action!r}"
    return load_policy_text(text.replace(line, ""), f"default policy without {action}")


def policy_with_topology(args: Mapping[str, Any]) -> Policy:
    """The default policy with these ``topology`` plugin arguments set (``continuity_weight``,
    ``pack_workers``, hold knobs, …)."""
    doc = yaml.safe_load(default_policy_text())
    doc["plugins"]["topology"].update(args)
    return load_policy_text(yaml.safe_dump(doc), f"default policy with topology {dict(args)}")


def make_cache(objs: list[dict[str, Any]], now: float = NOW) -> ClusterCache:
    cache = ClusterCache(clock=lambda: now)
    b.feed(cache, objs)
    assert not cache.conversion_errors, cache.conversion_errors
    cache.check()
    return cache


def cycle(cache: ClusterCache, sched: Scheduler | None = None, now: float = NOW) -> CycleResult:
    sched = sched or Scheduler(POLICY)
    return sched.run_once(cache.snapshot(now))


def bound(result: CycleResult) -> dict[str, str]:
    """Quota → node for every quota the cycle bound (``""``: touched but left unbound)."""
    return {name: q.node_name for name, q in sorted(result.quotas.items())}


def binds(result: CycleResult) -> dict[str, str]:
    return {i.quota: i.node for i in result.intents if isinstance(i, BindQuota)}


def bumped(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of ``obj`` with the next resourceVersion (an informer's update of it)."""
    new = copy.deepcopy(dict(obj))
    meta = new["metadata"]
    meta["resourceVersion"] = str(int(meta.get("resourceVersion") or "1") + 1)
    return new


def write_back(cache: ClusterCache, result: CycleResult, *, bound_by: bool = False) -> None:
    """What the binder writes after a cycle, delivered back as informer updates (``bound_by``:
    with ``status.boundBy`` on the quotas it binds, as the binder writes it)."""
    for intent in result.intents:
        if isinstance(intent, ClaimQuota | ReleaseClaim):
            old = cache.pod(intent.task)
            assert old is not None
            new = bumped(old)
            annotations = new["metadata"].setdefault("annotations", {})
            if isinstance(intent, ClaimQuota):
                annotations[wellknown.ANNO_QUOTA_NAME] = intent.quota
            else:
                annotations.pop(wellknown.ANNO_QUOTA_NAME, None)
            cache.on_pod_update(old, new)
    for name, q in result.quotas.items():
        old = cache.quota_object(name)
        assert old is not None
        new = bumped(old)
        new["status"] = {**(old.get("status") or {}), "phase": str(q.phase), "nodeName": q.node_name}
        if bound_by:
            new["status"].pop("boundBy", None)
            if q.node_name:
                new["status"]["boundBy"] = wellknown.COMPONENT
        cache.on_quota_update(old, new)
    cache.check()


def uid_of(cache: ClusterCache, name: str) -> str:
    return next(t.uid for j in cache.jobs.values() for t in j.tasks.values() if t.name == name)


def quota_node(ssn: Session, name: str) -> str:
    """The node quota ``name`` is bound to in ``ssn`` ("" when none); the quota must exist."""
    quota = ssn.quota(name)
    assert quota is not None, f"no quota {name} in the session"
    return quota.node_name


def node_of(result: CycleResult, name: str) -> Any:
    n = result.session.node(name)
    assert n is not None
    return n


def three_free_nodes(topology: bool) -> list[dict[str, Any]]:
    """The seed cluster where five nodes already hold a running 4-GPU quota: only n5–n7 are free."""
    objs = b.seed_cluster()
    for i in range(5):
        objs.append(b.quota(f"busy-{i}", gpu=4, hca=None, status={"phase": "QuotaBound", "nodeName": f"n{i}"}))
        objs.append(
            b.pod(
                f"busy-{i}", quota=f"busy-{i}", gpu=4, hca=None, node=f"n{i}", phase="Running", annotations=QUEUE_ANNO
            )
        )
    return objs + b.training_job("four", 4, gpu=8, hca=8 if topology else None)


def drifted() -> list[dict[str, Any]]:
    """The seed job after the fact: every quota bound n0–n3, but worker-1 runs on n4."""
    objs = [*b.seed_cluster(), b.podgroup("train", min_member=4)]
    for i in range(4):
        objs.append(b.quota(f"q-train-{i}", status={"phase": "QuotaBound", "nodeName": f"n{i}"}))
        node = "n4" if i == 1 else f"n{i}"
        objs.append(
            b.pod(f"train-worker-{i}", group="train", quota=f"q-train-{i}", index=i, node=node, phase="Running")
        )
    return objs


def racing(free_quota: bool) -> list[dict[str, Any]]:
    objs = [*b.seed_cluster(leaves=1, per_leaf=2), b.quota("q1", gpu=1, hca=None)]
    if free_quota:
        objs.append(b.quota("q2", gpu=1, hca=None))
    objs += [
        b.pod("early", quota="q1", gpu=1, hca=None, annotations=QUEUE_ANNO, created="2026-11-29T08:00:00Z"),
        b.pod("late", quota="q1", gpu=1, hca=None, annotations=QUEUE_ANNO, created="2026-11-29T08:00:05Z"),
    ]
    return objs
