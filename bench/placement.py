"""Placement quality on a seeded workload (issue 16 item 7): the real scheduler against three
baselines written here, on the same arrivals. Prints one JSON document.

Cluster: 256 nodes of 8 GPUs (and 8 ``rdma/hca``) in 16 leaves of 16 nodes; in the last 4 leaves
the upper 8 nodes are H100, all others A100 (so those leaves hold two zones, one per model).
Workload (``--seed``): 450 gangs, 1–32 workers × 1–8 GPUs and one ``rdma/hca`` per worker (so
topology applies), durations of 5–40 steps, Poisson arrivals at an offered GPU load of 0.95
(``bench/placement_model.workload``). ``--launchers FRACTION`` (default 0): that share of the gangs
(a seeded choice that leaves the rest of the workload as it is) are MPIJobs — a launcher quota and
pod of rank 0 (one ``rdma/hca``, 2 CPUs, 8 GiB, no GPU: ``bench/binder_cycle.launcher``) before the
workers, minMember + 1. Every policy places the launcher too, under the same rules (a node with an
HCA, the CPU and the memory free; the gang's one GPU model; ``tree``: the whole gang, launcher
included, in the lowest switch level that holds it), and the fewest leaves count it
(``bench/placement_room``: nodes as ``tests.builders.node`` advertises them, 8 HCAs, 96 CPUs,
1 TiB). Each policy then also prints ``mpi``: the MPIJobs' own count, share over the fewest
leaves, mean leaves, waits, and how many have the launcher on a worker's node or alone in a leaf.

Policies and their queueing:

* ``sky`` — the real scheduler as a user runs it: ``Scheduler(policy).run_once`` on a
  ``ClusterCache`` with the default policy as shipped (distinct nodes while the zone has enough,
  the seed's rule). ``sky_pack_workers`` is the same with ``pack_workers: true`` (a node takes as
  many of a gang's workers as fit: the node rule of ``tree``), printed with its own
  ``sky_pack_workers_target_met``. Both run as the binder loop runs the scheduler. Each step,
  finished gangs' pods (phase Succeeded), quotas and PodGroup are deleted; arriving gangs are
  created as ``tests.builders.training_job`` builds them (a PodGroup with minMember = workers, one
  quota per worker, pods claiming their quota, as the webhook leaves them; creationTimestamp =
  arrival time); then ``--cycles-per-step`` binder cycles run (1 s of simulated time each, the
  binder's period: a step is that many seconds, so the policy's timers — back-offs, waits counted in
  cycles, holds — run at their real pace against the step), each cycle's write plan is fed back as
  informer updates and every pod whose quota is bound runs on its quota's node. The order in which
  waiting gangs are tried, and any holding back, is the scheduler's own (``job.order`` of the
  policy); a gang counts as placed in the step in which its last quota is bound. The driver replays
  the bind intents into its own ledger and checks it against the cache's ``quota_idle`` after every step.
* ``spread`` / ``bestfit`` / ``tree`` — ``placement_model.run_fifo_backfill``: each step one pass
  over the waiting gangs in arrival order, each placed whole if it fits now, else it keeps its place
  (backfill without reservations). ``spread``: each worker on the least-allocated node that fits;
  ``bestfit``: each worker on the fullest node that fits (both blind to leaves and models);
  ``tree``: Slurm topology/tree — the lowest switch level holding the whole gang (a leaf, else the
  root with the fewest leaves), best fit, one GPU model.

Per policy:

* ``gpu_allocation_mean`` / ``_p10`` — GPUs held by placed, running gangs / all GPUs, after each
  step's placements, over the busy window: from the first step by which the arrivals so far ask
  for every GPU of the cluster, to the last arrival (the same steps for every policy);
* ``share_over_min_leaves`` — placed gangs spanning more leaves than the fewest that could hold
  them at the moment they were placed (``placement_model.min_leaves``, exact, on the free room of
  each GPU model just before the gang's first quota was bound; for ``sky`` the cycle's bind intents
  are replayed in the order the scheduler committed them);
* ``mean_leaves_per_job``; ``wait_steps_by_workers`` — per gang size (number of workers): jobs,
  total and max of (placement step − arrival step); ``gpu_model_mixed_jobs``; ``unplaced_jobs`` (still waiting
  after ``--max-steps``);
* ``steps_waited_while_fitting`` — reason → gang-steps: a gang none of whose quotas is bound yet
  still waits at the end of a step although it fits in the room left (``fits_one_model``: one GPU
  model, any leaves), by the reason the step's last cycle gave. Room only shrinks within a step, so
  such a gang fitted when that cycle tried it: the only allowed reason is a hold
  (``NodeHeldForGang``, what holds cost the others). The baselines assert they leave none.

``target_met`` (for ``sky``; ``sky_pack_workers_target_met`` likewise): ``share_over_min_leaves`` = 0;
``gpu_allocation_mean`` ≥ tree's − 0.01; the max wait of the largest gangs (the most workers
in the workload, 32) ≤ tree's; no mixed-model gang; no gang that fits waits but for a hold.

Usage: ``python bench/placement.py [--seed 1] [--gangs 450] [--load 0.95] [--cycles-per-step 10]
[--launchers 0] [--policy FILE]`` (``--policy``: that policy as ``sky``, no ``sky_pack_workers``)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.binder_cycle import launcher
from bench.cache_writes import apply_plan, bumped, run_pods
from bench.placement_model import (
    POLICIES,
    Cluster,
    Gang,
    Placement,
    Room,
    Trace,
    bench_cluster,
    fits_one_model,
    metrics,
    min_leaves,
    mpi_metrics,
    run_fifo_backfill,
    workload,
)
from extender import heap, wellknown
from extender.binder.plan import plan_writes
from extender.cache.cache import ClusterCache
from extender.cache.convert import format_time
from extender.conf import default_policy, default_policy_text, load_policy_file, load_policy_text
from extender.framework.intents import BindQuota, ReleaseQuota
from extender.framework.policy import Policy
from extender.framework.status import Reason
from extender.scheduler import Scheduler
from tests import builders as b

T0 = 1_800_000_000.0
HELD = Reason.NODE_HELD_FOR_GANG.value  # the one reason a gang that fits may wait (a hold)


class SkyDriver:
    """The real scheduler on a cache, stepped as the module docstring says."""

    def __init__(self, cluster: Cluster, gangs: list[Gang], cycles_per_step: int, policy: Policy | None = None) -> None:
        self.cluster = cluster
        self.gangs = {g.name: g for g in gangs}
        self.cycles_per_step = cycles_per_step
        self.now = T0
        self.cache = ClusterCache(clock=lambda: self.now)
        objs: list[dict[str, Any]] = []
        for i in range(cluster.size):
            objs.append(b.node(f"n{i}", gpu=cluster.gpus[i], gpu_model=cluster.model[i], index=i))
            objs.append(b.topology(f"n{i}", [f"leaf-{cluster.leaf[i]}"]))
        b.feed(self.cache, objs)
        self.scheduler = Scheduler(policy or default_policy())
        self.free = Room.empty_nodes(cluster.gpus)  # replayed from the bind intents, checked against the cache
        self.first_min: dict[str, int] = {}  # gang → min leaves just before its first bind
        self.bound: dict[str, dict[str, int]] = {}  # gang → quota → node index
        self.pending_pods: set[str] = set()
        self.released = 0  # quotas the scheduler unbound again (none expected here)
        self.cycle_seconds = 0.0
        self.cycles = 0
        self.verdicts: dict[str, Any] = {}  # the last cycle's, job key → JobVerdict

    def submit(self, g: Gang, step: int) -> None:
        created = format_time(self.now)
        objs = b.training_job(g.name, g.workers, gpu=g.gpu, hca=1)
        if g.launcher:
            objs = launcher(objs, g.name)
        for o in objs:
            o["metadata"]["creationTimestamp"] = created
        b.feed(self.cache, objs)
        self.pending_pods.update(o["metadata"]["uid"] for o in objs if o["kind"] == "Pod")
        self.bound[g.name] = {}

    def finish(self, g: Gang) -> None:
        """The job ended: its pods succeed and the training operator deletes pods, quotas, group."""
        key = f"default/{g.name}"
        job = self.cache.jobs.get(key)
        for uid in list(job.tasks) if job is not None else []:
            obj = self.cache.pod(uid)
            assert obj is not None
            self.cache.on_pod_delete(bumped(obj, status={"phase": "Succeeded"}))
        for name in quota_names(g):
            q = self.cache.quota_object(name)
            assert q is not None
            self.cache.on_quota_delete(q)
        for name, i in self.bound.pop(g.name).items():
            self._take(g, name, i, -1)
        pg = self.cache.podgroup_object(key)
        assert pg is not None
        self.cache.on_podgroup_delete(pg)

    def _replay(self, intents: list[Any]) -> None:
        for it in intents:
            if not isinstance(it, BindQuota | ReleaseQuota):
                continue
            gang = it.quota[2:].rsplit("-", 1)[0]
            g = self.gangs[gang]
            node = int(it.node[1:])
            if isinstance(it, ReleaseQuota):
                self.released += 1
                if self.bound[gang].pop(it.quota, None) is not None:
                    self._take(g, it.quota, node, -1)
                continue
            if not self.bound[gang]:
                least = min_leaves(self.cluster, self.free, g.workers, g.gpu, g.launcher)
                assert least is not None, f"{gang} bound although it does not fit"
                self.first_min[gang] = least
            self.bound[gang][it.quota] = node
            self._take(g, it.quota, node, 1)

    def _take(self, g: Gang, quota: str, node: int, sign: int) -> None:
        """Bind (``sign`` 1) or free (−1) quota ``quota`` of gang ``g`` on ``node`` in the replay."""
        if quota.endswith(LAUNCHER_SUFFIX):
            self.free.launcher(node, sign)
        else:
            self.free.worker(node, g.gpu, sign)

    def cycle(self) -> None:
        with heap.paused():
            t = time.perf_counter()
            result = self.scheduler.run_once(self.cache.snapshot())
            plan = plan_writes(self.cache, result, extra_quotas=self.cache.take_dirty_quotas())
            self.cycle_seconds += time.perf_counter() - t
        self.cycles += 1
        self.verdicts = result.verdicts
        self._replay(result.intents)
        apply_plan(self.cache, plan)
        self.pending_pods.difference_update(run_pods(self.cache, sorted(self.pending_pods)))
        self.now += 1.0

    def check_ledgers(self) -> None:
        for i in range(self.cluster.size):
            idle = self.cache.nodes[f"n{i}"].quota_idle
            got = (idle.get(wellknown.RESOURCE_GPU) // 1000, idle.get(wellknown.RESOURCE_RDMA_HCA) // 1000)
            want = (self.free.gpu[i], self.free.hca[i])
            assert got == want, f"n{i}: cache quota_idle {got} GPUs, HCAs; replay {want}"
            got = (idle.get("cpu"), idle.get("memory") // 2**20)
            assert got == (self.free.cpu[i], self.free.mem[i]), f"n{i}: cache quota_idle {got} CPU, MiB"

    def _waited_while_fitting(self, trace: Trace) -> None:
        """Each gang still waiting at the end of a step although it fits in the room left (so it
        fitted when the step's last cycle tried it): the reason that cycle gave."""
        for name, quotas in self.bound.items():
            g = self.gangs[name]
            if not quotas and fits_one_model(self.cluster, self.free, g.workers, g.gpu, g.launcher):
                verdict = self.verdicts.get(f"default/{name}")
                reason = verdict.status.reason if verdict is not None else None
                trace.waited_while_fitting[reason.value if reason is not None else "no verdict"] += 1

    def run(self, max_steps: int) -> Trace:
        trace = Trace()
        arrivals = sorted(self.gangs.values(), key=lambda g: (g.arrival, g.name))
        ending: dict[int, list[Gang]] = {}
        nxt = 0
        for step in range(max_steps):
            for g in ending.pop(step, []):
                self.finish(g)
            while nxt < len(arrivals) and arrivals[nxt].arrival <= step:
                self.submit(arrivals[nxt], step)
                nxt += 1
            for _ in range(self.cycles_per_step):
                self.cycle()
            self.check_ledgers()
            self._waited_while_fitting(trace)
            running = 0
            for name, quotas in self.bound.items():
                g = self.gangs[name]
                if name not in trace.placements and len(quotas) == g.members:
                    nodes = placed_nodes(g, quotas)
                    trace.placements[name] = Placement(name, step, nodes, self.first_min[name])
                    ending.setdefault(step + g.duration, []).append(g)
                if name in trace.placements:
                    running += g.gpus
            trace.allocated.append(running)
            if nxt == len(arrivals) and len(trace.placements) == len(self.gangs):
                break
        return trace


LAUNCHER_SUFFIX = "-launcher"  # bench/binder_cycle.launcher names its quota q-<job>-launcher


def quota_names(g: Gang) -> list[str]:
    """The gang's quotas as ``tests.builders.training_job`` (and ``binder_cycle.launcher``) name them."""
    return [f"q-{g.name}{LAUNCHER_SUFFIX}"] * g.launcher + [f"q-{g.name}-{i}" for i in range(g.workers)]


def placed_nodes(g: Gang, quotas: dict[str, int]) -> tuple[int, ...]:
    """The gang's nodes as ``Placement.nodes`` has them: the launcher's first, then the workers' ascending."""
    head = [quotas[f"q-{g.name}{LAUNCHER_SUFFIX}"]] if g.launcher else []
    return (*head, *sorted(n for q, n in quotas.items() if not q.endswith(LAUNCHER_SUFFIX)))


def targets(sky: dict[str, Any], tree: dict[str, Any], largest: int) -> dict[str, bool]:
    """The targets of issue 16 item 7 for ``sky`` against ``tree``; ``largest``: the most workers
    of any gang in the workload (the wait target is that gang size's own, not a bucket's)."""

    def max_wait(m: dict[str, Any]) -> int:
        return int(m["wait_steps_by_workers"].get(str(largest), {}).get("max", 0))

    return {
        "share_over_min_leaves_zero": sky["share_over_min_leaves"] == 0 and sky["unplaced_jobs"] == 0,
        "gpu_allocation_mean_at_least_tree_minus_0.01": sky["gpu_allocation_mean"]
        >= tree["gpu_allocation_mean"] - 0.01,
        f"max_wait_{largest}_workers_at_most_tree": max_wait(sky) <= max_wait(tree) and sky["unplaced_jobs"] == 0,
        "no_gpu_model_mixed_jobs": sky["gpu_model_mixed_jobs"] == 0,
        "no_fitting_gang_waits_but_for_holds": set(sky["steps_waited_while_fitting"]) <= {HELD},
    }


def packing_policy() -> Policy:
    """The default policy with ``pack_workers: true``: a node takes as many of a gang's workers as
    fit, the node rule of the ``tree`` baseline (the default gives a gang distinct nodes while its
    zone has enough, the seed's rule)."""
    doc = yaml.safe_load(default_policy_text())
    doc["plugins"]["topology"]["pack_workers"] = True
    return load_policy_text(yaml.safe_dump(doc), "default_policy.yaml + pack_workers")


def sky_policies(policy_file: Path | None) -> dict[str, Policy]:
    """The real scheduler's runs, label → policy. ``sky``, whose targets are ``target_met``, is the
    scheduler as a user runs it: the default policy as shipped (or ``policy_file``); without a
    file, ``sky_pack_workers`` (:func:`packing_policy`) runs beside it with its own targets."""
    if policy_file is not None:
        return {"sky": load_policy_file(policy_file)}
    return {"sky": default_policy(), "sky_pack_workers": packing_policy()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--gangs", type=int, default=450)
    ap.add_argument("--load", type=float, default=0.95, help="offered GPU load of the arrivals")
    ap.add_argument("--cycles-per-step", type=int, default=10, help="binder cycles (1 s each) per step")
    ap.add_argument("--max-steps", type=int, default=2000)
    ap.add_argument(
        "--launchers", type=float, default=0.0, help="share of the gangs that are MPIJobs with a launcher (0–1)"
    )
    ap.add_argument(
        "--policy", type=Path, help="a scheduling policy file for sky (default: the built-in one, as shipped)"
    )
    args = ap.parse_args(argv)

    cluster = bench_cluster()
    gangs = workload(args.seed, cluster, args.gangs, args.load, args.launchers)
    out: dict[str, Any] = {
        "benchmark": "placement",
        "seed": args.seed,
        "nodes": cluster.size,
        "leaves": len(set(cluster.leaf)),
        "gpus": cluster.total_gpus,
        "gpu_models": {m: cluster.model.count(m) for m in cluster.models},
        "gangs": len(gangs),
        "offered_load": args.load,
        "last_arrival_step": max(g.arrival for g in gangs),
        "cycles_per_step": args.cycles_per_step,
        "step_seconds": float(args.cycles_per_step),
        "policies": {},
    }
    if args.launchers:
        out["mpi_jobs"] = sum(g.launcher for g in gangs)
    for label, policy in sky_policies(args.policy).items():
        t = time.perf_counter()
        driver = SkyDriver(cluster, gangs, args.cycles_per_step, policy)
        trace = driver.run(args.max_steps)
        out["policies"][label] = metrics(cluster, gangs, trace)
        if args.launchers:
            out["policies"][label]["mpi"] = mpi_metrics(cluster, gangs, trace)
        out["policies"][label]["quotas_released_again"] = driver.released
        out["policies"][label]["cycles"] = driver.cycles
        out["policies"][label]["cycle_seconds_total"] = round(driver.cycle_seconds, 2)
        out["policies"][label]["seconds"] = round(time.perf_counter() - t, 2)
    for name, place in POLICIES.items():
        trace = run_fifo_backfill(cluster, gangs, place, args.max_steps)
        out["policies"][name] = metrics(cluster, gangs, trace)
        if args.launchers:
            out["policies"][name]["mpi"] = mpi_metrics(cluster, gangs, trace)
    tree = out["policies"]["tree"]
    largest = max(g.workers for g in gangs)
    met = targets(out["policies"]["sky"], tree, largest)
    out["target_met"] = {**met, "all": all(met.values())}
    if "sky_pack_workers" in out["policies"]:
        met = targets(out["policies"]["sky_pack_workers"], tree, largest)
        out["sky_pack_workers_target_met"] = {**met, "all": all(met.values())}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
