"""What the binder loop's API writes and the rest of the cluster do to the cache, for benchmarks
that drive the real scheduler on a ``ClusterCache`` without an API server.

* :func:`apply_plan` — the binder wrote a cycle's plan; the answers (the new objects) reach the
  cache as informer updates, the way ``BinderLoop`` feeds its write answers back.
* :func:`run_pods` — kube-scheduler (through the extender) binds each pending pod whose quota
  is bound to its quota's node and the kubelet starts it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from extender.binder.plan import WritePlan
from extender.cache.cache import ClusterCache

__all__ = ["apply_plan", "bumped", "run_pods"]

Obj = dict[str, Any]


def bumped(obj: Mapping[str, Any], **changes: Any) -> Obj:
    """A copy of ``obj`` with the next resourceVersion and top-level ``changes`` applied."""
    rv = str(int(obj["metadata"]["resourceVersion"]) + 1)
    return {**obj, **changes, "metadata": {**obj["metadata"], **changes.get("metadata", {}), "resourceVersion": rv}}


def apply_plan(cache: ClusterCache, plan: WritePlan) -> None:
    for w in plan.quotas:
        obj = cache.quota_object(w.name)
        assert obj is not None, w.name
        status = {k: v for k, v in w.status.items() if v not in (None, "", [], {})}
        cache.on_quota_update(obj, bumped(obj, status=status))
    for p in plan.pods:
        obj = cache.pod(p.uid)
        assert obj is not None, p.name
        anno = {**(obj["metadata"].get("annotations") or {})}
        for k, v in p.annotations.items():
            if v is None:
                anno.pop(k, None)
            else:
                anno[k] = v
        cache.on_pod_update(obj, bumped(obj, metadata={"annotations": anno}))
    cache.take_dirty_quotas()


def run_pods(cache: ClusterCache, uids: list[str] | None = None) -> list[str]:
    """Every pending pod (of ``uids``; None: all) whose quota is bound runs on the quota's node.
    Returns the pods that started."""
    started: list[str] = []
    for uid in list(cache.task_job) if uids is None else uids:
        task = cache.task(uid)
        obj = cache.pod(uid)
        if task is None or obj is None or obj["spec"].get("nodeName"):
            continue
        quota = cache.quotas.get(task.quota)
        if quota is None or not quota.node_name:
            continue
        new = bumped(
            obj,
            spec={**obj["spec"], "nodeName": quota.node_name},
            status={"phase": "Running", "startTime": "2026-11-29T08:00:00Z"},
        )
        cache.on_pod_update(obj, new)
        started.append(uid)
    return started
