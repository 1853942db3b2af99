"""Benchmark of one binder cycle at scale (issue 4): 5,000 nodes in 40 leaves of two GPU models,
2,000 RDMA jobs of 8 workers, 16,000 quotas claimed by their pods (as the webhook leaves them)
and not yet bound.

Measured, on the real cache and scheduler (the same code the binder loop runs; API writes are
not included — they are I/O, see ``write_plan_seconds`` for the planning of them):

* ``full_cycle_seconds`` — ``Scheduler.run_once`` that places all 16,000 quotas, run as the
  binder loop runs it: after the heap was settled once (the service does that when its cache has
  synced) and with automatic collection paused inside the cycle (``extender.heap``);
* ``deferred_collection_seconds`` — a full ``gc.collect()`` right after a cycle: an upper bound of
  the collector work the pause put off (the frozen cache is not walked);
* ``write_plan_seconds`` — turning that cycle into the list of API writes;
* ``idle_cycle_seconds`` — a cycle with nothing to do (every pod running on its quota's node,
  cache unchanged since the previous cycle);
* ``peak_rss_mib``.

Usage: ``python bench/binder_cycle.py [--nodes 5000] [--jobs 2000] [--workers 8] [--repeat 3]``;
prints one JSON document.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from extender import heap, wellknown
from extender.binder.plan import plan_writes
from extender.cache.cache import ClusterCache
from extender.conf import default_policy
from extender.model.quota import QuotaPhase
from extender.scheduler import Scheduler
from tests import builders as b


def build(nodes: int, leaves: int, jobs: int, workers: int) -> ClusterCache:
    cache = ClusterCache(clock=lambda: 1_000_000.0)
    per_leaf = nodes // leaves
    objs: list[dict[str, Any]] = []
    for leaf in range(leaves):
        model = "A100" if leaf % 2 == 0 else "H100"
        for i in range(per_leaf):
            name = f"n{leaf * per_leaf + i}"
            objs.append(b.node(name, gpu_model=model))
            objs.append(b.topology(name, [f"leaf-{leaf}"]))
    for j in range(jobs):
        gpu = (1, 2, 2, 1)[j % 4]
        objs += b.training_job(f"job{j}", workers, gpu=gpu, hca=1)
    b.feed(cache, objs)
    return cache


def apply_plan(cache: ClusterCache, plan: Any) -> None:
    """What the loop does with the answers of its writes: the cache takes the new objects."""
    for w in plan.quotas:
        obj = cache.quota_object(w.name)
        assert obj is not None
        rv = str(int(obj["metadata"]["resourceVersion"]) + 1)
        status = {k: v for k, v in w.status.items() if v not in (None, "", [], {})}
        cache.on_quota_update(obj, {**obj, "metadata": {**obj["metadata"], "resourceVersion": rv}, "status": status})
    for p in plan.pods:
        obj = cache.pod(p.uid)
        assert obj is not None
        anno = {**(obj["metadata"].get("annotations") or {})}
        for k, v in p.annotations.items():
            if v is None:
                anno.pop(k, None)
            else:
                anno[k] = v
        rv = str(int(obj["metadata"]["resourceVersion"]) + 1)
        cache.on_pod_update(obj, {**obj, "metadata": {**obj["metadata"], "annotations": anno, "resourceVersion": rv}})
    cache.take_dirty_quotas()


def run_pods(cache: ClusterCache) -> None:
    """What kube-scheduler (through the extender) and the kubelets do next: every pod runs on its
    quota's node. The idle cycle is measured on that steady state."""
    for job in list(cache.jobs.values()):
        for task in list(job.tasks.values()):
            quota = cache.quotas.get(task.quota)
            obj = cache.pod(task.uid)
            if quota is None or not quota.node_name or obj is None:
                continue
            rv = str(int(obj["metadata"]["resourceVersion"]) + 1)
            new = {
                **obj,
                "metadata": {**obj["metadata"], "resourceVersion": rv},
                "spec": {**obj["spec"], "nodeName": quota.node_name},
                "status": {"phase": "Running", "startTime": "2026-11-29T08:00:00Z"},
            }
            cache.on_pod_update(obj, new)
    cache.take_dirty_quotas()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--leaves", type=int, default=40)
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    cache = build(args.nodes, args.leaves, args.jobs, args.workers)
    build_s = time.perf_counter() - t0
    policy = default_policy()

    full: list[float] = []
    plan_s: list[float] = []
    result = None
    settle_s = heap.settle()  # what the service does once its cache has synced
    deferred: list[float] = []
    for _ in range(args.repeat):
        sched = Scheduler(policy)
        # as BinderLoop.run_cycle runs it: no automatic full collection inside the cycle
        with heap.paused():
            t = time.perf_counter()
            result = sched.run_once(cache.snapshot())
            full.append(time.perf_counter() - t)
            t = time.perf_counter()
            plan = plan_writes(cache, result)
            plan_s.append(time.perf_counter() - t)
        # what the pause put off: the collection of everything not frozen (young objects only)
        t = time.perf_counter()
        gc.collect()
        deferred.append(time.perf_counter() - t)
    assert result is not None
    bound = sum(1 for q in result.quotas.values() if q.phase is QuotaPhase.BOUND)
    timings = dict(result.timings)

    apply_plan(cache, plan)
    run_pods(cache)
    sched = Scheduler(policy)
    # the first cycle after the pods started refreshes every quota's status.tasks (pod phases)
    first = sched.run_once(cache.snapshot())
    apply_plan(cache, plan_writes(cache, first, extra_quotas=cache.take_dirty_quotas()))
    idle: list[float] = []
    for _ in range(args.repeat + 2):
        t = time.perf_counter()
        r = sched.run_once(cache.snapshot())
        plan = plan_writes(cache, r, extra_quotas=cache.take_dirty_quotas())
        idle.append(time.perf_counter() - t)
    assert not r.intents, "the idle cycle changed something"
    assert plan.empty(), "the idle cycle wants to write"

    out = {
        "benchmark": "binder_cycle",
        "nodes": len(cache.nodes),
        "leaves": args.leaves,
        "gpu_models": 2,
        "jobs": args.jobs,
        "quotas": len(cache.quotas),
        "quotas_bound_in_cycle": bound,
        "build_seconds": round(build_s, 3),
        "full_cycle_seconds": round(min(full), 4),
        "full_cycle_seconds_all": [round(x, 4) for x in full],
        "full_cycle_actions": {k: round(v, 4) for k, v in timings.items()},
        "write_plan_seconds": round(min(plan_s), 4),
        "deferred_collection_seconds": round(max(deferred), 4),
        "heap_settle_seconds": round(settle_s, 4),
        "idle_cycle_seconds": round(min(idle), 5),
        "idle_cycle_seconds_all": [round(x, 5) for x in idle],
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "targets": {"full_cycle_seconds": 0.5, "idle_cycle_seconds": 0.02},
        "python": sys.version.split()[0],
        "zone_key_example": wellknown.ZONE_PREFIX_ROCE + "leaf-0",
    }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
