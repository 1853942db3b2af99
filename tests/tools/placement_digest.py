"""A digest of where gangs of mixed sizes land over several cycles, to show that a change meant
only for speed moves no placement: run it before and after the change and compare the lines.

Thirty small clusters (3–8 leaves, A100 and H100 leaves) take six waves of random gangs (1–12
workers of 1–8 GPUs, seven in ten of them MPIJobs with a launcher: ``bench/binder_cycle.launcher``)
through the real scheduler on a ``ClusterCache``, the write plans fed back and the pods run
(``bench/cache_writes``), with holds early (``reserve_after_cycles`` 3–4) and, for half of the
clusters, ``pack_workers``. Prints one hash per cluster of every quota's node after each wave,
and one of them all.

Usage: ``PYTHONPATH=. python tests/tools/placement_digest.py > before.txt`` (then after, and diff).
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.binder_cycle import launcher
from bench.cache_writes import apply_plan, run_pods
from extender.binder.plan import plan_writes
from extender.cache.cache import ClusterCache
from extender.conf import default_policy_text, load_policy_text
from extender.scheduler import Scheduler
from tests import builders as b

Placed = list[list[tuple[str, str]]]


def run(seed: int, nodes: int, leaves: int, pack: bool) -> Placed:
    """Every quota's node (sorted by quota) after each of six waves of arrivals."""
    rng = random.Random(seed)
    cache = ClusterCache(clock=lambda: 1_000_000.0)
    per = nodes // leaves
    objs = []
    for leaf in range(leaves):
        for i in range(per):
            objs.append(b.node(f"n{leaf * per + i}", gpu_model="A100" if leaf % 3 else "H100"))
            objs.append(b.topology(f"n{leaf * per + i}", [f"leaf-{leaf}"]))
    b.feed(cache, objs)
    extra = ", pack_workers: true, reserve_after_cycles: 3}" if pack else ", reserve_after_cycles: 4}"
    policy = load_policy_text(default_policy_text().replace("affinity_weight: 10}", "affinity_weight: 10" + extra))
    out: Placed = []
    job = 0
    for wave in range(6):
        arrivals = []
        for _ in range(rng.randint(4, 12)):
            gang = b.training_job(f"job{job}", rng.choice([1, 2, 3, 4, 6, 8, 12]), gpu=rng.choice([1, 2, 4, 8]), hca=1)
            arrivals += launcher(gang, f"job{job}") if rng.random() < 0.7 else gang
            job += 1
        b.feed(cache, arrivals)
        for _ in range(2 if wave < 5 else 8):
            result = Scheduler(policy).run_once(cache.snapshot())
            apply_plan(cache, plan_writes(cache, result))
            run_pods(cache)
        out.append(sorted((q.name, q.node_name) for q in cache.quotas.values()))
    return out


def main() -> None:
    total = hashlib.sha256()
    for pack in (False, True):
        for seed in range(5):
            for nodes, leaves in ((24, 3), (64, 4), (160, 8)):
                digest = hashlib.sha256(json.dumps(run(seed, nodes, leaves, pack)).encode()).hexdigest()[:12]
                total.update(digest.encode())
                print(seed, nodes, leaves, pack, digest)
    print("all", total.hexdigest()[:16])


if __name__ == "__main__":
    main()
