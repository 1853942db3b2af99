"""The pure half of ``bench/placement.py``: cluster, workload, the FIFO-with-backfill step loop the
baselines share, and the metrics (the free room and the minimum number of leaves:
``placement_room``; the baselines: ``placement_baselines``; both re-exported here).

Everything here is a function of its arguments (no clock, no global state, randomness only through
an explicit ``random.Random(seed)``), so ``tests/bench/`` checks it on hand-made cases.

Model. A node has ``gpus`` GPUs of one ``model`` and sits under one ``leaf`` switch; nodes are
numbered 0…n−1 in index order (the scheduler's node index). A gang has ``workers`` workers of
``gpu`` GPUs each (and one ``rdma/hca`` each), and an MPIJob (``launcher``) a launcher of rank 0
beside them (one HCA, 2 CPUs, 8 GiB, no GPU). Several members of a gang may share a node. The free
room of the nodes is a ``placement_room.Room``; without launchers GPUs always run out first (nodes
have 8 HCAs and a worker at least one GPU), so a node holds ``free GPUs // gpu`` more workers.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from bench.placement_baselines import POLICIES, Place, place_bestfit, place_spread, place_tree
from bench.placement_room import Room, fits_one_model, min_leaves

__all__ = [
    "POLICIES",
    "Cluster",
    "Gang",
    "Placement",
    "Room",
    "Trace",
    "bench_cluster",
    "busy_window",
    "fits_one_model",
    "metrics",
    "min_leaves",
    "mpi_metrics",
    "place_bestfit",
    "place_spread",
    "place_tree",
    "run_fifo_backfill",
    "workload",
]


@dataclass(frozen=True, slots=True)
class Cluster:
    """Node *i*: ``leaf[i]`` (its leaf switch, 0…L−1), ``model[i]`` (GPU model), ``gpus[i]``."""

    leaf: tuple[int, ...]
    model: tuple[str, ...]
    gpus: tuple[int, ...]

    @property
    def size(self) -> int:
        return len(self.gpus)

    @property
    def total_gpus(self) -> int:
        return sum(self.gpus)

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(sorted(set(self.model)))


@dataclass(frozen=True, slots=True)
class Gang:
    name: str
    workers: int
    gpu: int  # GPUs per worker
    arrival: int  # step
    duration: int  # steps it runs once placed
    launcher: bool = False  # an MPIJob: a launcher quota of rank 0 before the workers

    @property
    def members(self) -> int:
        """Its quotas (the PodGroup's minMember): the workers and the launcher."""
        return self.workers + self.launcher

    @property
    def gpus(self) -> int:
        return self.workers * self.gpu


def bench_cluster(leaves: int = 16, per_leaf: int = 16, gpus: int = 8, second_model_leaves: int = 4) -> Cluster:
    """``leaves`` leaves of ``per_leaf`` nodes; in the last ``second_model_leaves`` leaves the upper
    half of the nodes carry a second GPU model (H100), the rest A100."""
    leaf, model = [], []
    for s in range(leaves):
        for j in range(per_leaf):
            leaf.append(s)
            second = s >= leaves - second_model_leaves and j >= per_leaf // 2
            model.append("H100" if second else "A100")
    return Cluster(tuple(leaf), tuple(model), (gpus,) * len(leaf))


WORKERS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)
WORKER_WEIGHTS = (25, 12, 5, 12, 5, 12, 5, 10, 4, 10)
GPUS = (1, 2, 4, 8)
GPU_WEIGHTS = (15, 15, 20, 50)


def workload(seed: int, cluster: Cluster, gangs: int = 450, load: float = 0.95, launchers: float = 0.0) -> list[Gang]:
    """``gangs`` gangs with shapes drawn from WORKERS × GPUS (weights above) and durations of 5–40
    steps; Poisson arrivals whose span makes the offered load Σ gpus·duration / (capacity · span)
    equal ``load``. Sorted by arrival (names ``g000``… in that order). ``launchers``: that share of
    the gangs (rounded; drawn by a generator of its own, so the rest of the workload is the same
    whatever the share) are MPIJobs with a launcher."""
    rng = random.Random(seed)
    shapes = [
        (rng.choices(WORKERS, WORKER_WEIGHTS)[0], rng.choices(GPUS, GPU_WEIGHTS)[0], rng.randint(5, 40))
        for _ in range(gangs)
    ]
    span = sum(w * g * d for w, g, d in shapes) / (cluster.total_gpus * load)
    gaps = [rng.expovariate(1.0) for _ in range(gangs)]
    scale = span / sum(gaps)
    mpi = set(random.Random(f"launchers-{seed}").sample(range(gangs), round(launchers * gangs)))
    out, t = [], 0.0
    for i, (w, g, d) in enumerate(shapes):
        out.append(Gang(f"g{i:03d}", w, g, int(t), d, i in mpi))
        t += gaps[i] * scale
    return out


# --- the step loop and what it records -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Placement:
    gang: str
    step: int
    nodes: tuple[int, ...]  # the launcher's first (an MPIJob), then one per worker
    min_leaves: int  # the minimum at the moment it was placed


@dataclass(slots=True)
class Trace:
    """What one policy did: the placements, the GPUs allocated after each step's placements."""

    placements: dict[str, Placement] = field(default_factory=dict)
    allocated: list[int] = field(default_factory=list)  # step → GPUs held by running gangs
    # why a gang that fitted (``fits_one_model``) in the room left at the end of a step still
    # waited that step → how many such gang-steps
    waited_while_fitting: Counter[str] = field(default_factory=Counter)


def run_fifo_backfill(
    cluster: Cluster,
    gangs: Sequence[Gang],
    place: Place,
    max_steps: int,
) -> Trace:
    """Each step: gangs whose duration elapsed free their GPUs; the step's arrivals join the back
    of the queue; then one pass over the queue in arrival order places every gang that fits now,
    whole (gang scheduling), and leaves the others waiting in place (backfill without reservations:
    a later gang that fits starts even while an earlier one waits). Stops when every gang was
    placed or after ``max_steps``."""
    free = Room.empty_nodes(cluster.gpus)
    trace = Trace()
    arrivals = sorted(gangs, key=lambda g: (g.arrival, g.name))
    queue: list[Gang] = []
    ending: dict[int, list[Placement]] = {}
    by_name = {g.name: g for g in gangs}
    nxt = 0
    for step in range(max_steps):
        for p in ending.pop(step, []):
            _bind(free, by_name[p.gang], p.nodes, -1)
        while nxt < len(arrivals) and arrivals[nxt].arrival <= step:
            queue.append(arrivals[nxt])
            nxt += 1
        waiting: list[Gang] = []
        for g in queue:
            nodes = place(cluster, free, g.workers, g.gpu, g.launcher)
            if nodes is None:
                waiting.append(g)
                continue
            least = min_leaves(cluster, free, g.workers, g.gpu, g.launcher)
            assert least is not None, "placed a gang that does not fit"
            assert len(nodes) == g.members
            _bind(free, g, nodes, 1)
            p = Placement(g.name, step, tuple(nodes), least)
            trace.placements[g.name] = p
            ending.setdefault(step + g.duration, []).append(p)
        queue = waiting
        # room only shrinks during the pass: a gang fitting now fitted at its turn, and was placed
        assert not any(fits_one_model(cluster, free, g.workers, g.gpu, g.launcher) for g in queue), (
            "a fitting gang waits"
        )
        trace.allocated.append(cluster.total_gpus - sum(free.gpu))
        if nxt == len(arrivals) and not queue:
            break
    return trace


def _bind(room: Room, g: Gang, nodes: Sequence[int], sign: int) -> None:
    """Bind (``sign`` 1) or free (−1) the gang on ``nodes`` (the launcher's first, if it has one)."""
    if g.launcher:
        room.launcher(nodes[0], sign)
    for i in nodes[g.launcher :]:
        room.worker(i, g.gpu, sign)


def busy_window(cluster: Cluster, gangs: Sequence[Gang]) -> tuple[int, int]:
    """Steps [first, last] over which allocation is averaged, the same for every policy: from the
    first step by which the gangs arrived so far ask for at least every GPU of the cluster (it could
    be full) to the last arrival (after it the queue only drains)."""
    total, first = 0, None
    for g in sorted(gangs, key=lambda g: g.arrival):
        total += g.gpus
        if total >= cluster.total_gpus:
            first = g.arrival
            break
    last = max(g.arrival for g in gangs)
    return (last if first is None else first), last


def _p10(values: Sequence[float]) -> float:
    """The 10th percentile, nearest rank."""
    ordered = sorted(values)
    return ordered[max(0, -(-len(ordered) * 10 // 100) - 1)]


def metrics(cluster: Cluster, gangs: Sequence[Gang], trace: Trace) -> dict[str, object]:
    """The per-policy figures of the benchmark (see ``bench/placement.py``)."""
    first, last = busy_window(cluster, gangs)
    window = [
        trace.allocated[t] / cluster.total_gpus if t < len(trace.allocated) else 0.0 for t in range(first, last + 1)
    ]
    placed = list(trace.placements.values())
    leaves = [len({cluster.leaf[i] for i in p.nodes}) for p in placed]
    waits: dict[str, dict[str, int]] = {}
    for g in gangs:
        p = trace.placements.get(g.name)
        if p is None:
            continue
        w = waits.setdefault(str(g.workers), {"jobs": 0, "total": 0, "max": 0})
        w["jobs"] += 1
        w["total"] += p.step - g.arrival
        w["max"] = max(w["max"], p.step - g.arrival)
    return {
        "placed_jobs": len(placed),
        "unplaced_jobs": len(gangs) - len(placed),
        # not rounded: the targets compare these (a rounding could meet one by up to 0.00005)
        "gpu_allocation_mean": sum(window) / len(window),
        "gpu_allocation_p10": _p10(window),
        "share_over_min_leaves": sum(n > p.min_leaves for n, p in zip(leaves, placed, strict=True))
        / max(1, len(placed)),
        "mean_leaves_per_job": round(sum(leaves) / max(1, len(placed)), 4),
        "wait_steps_by_workers": {w: waits[w] for w in sorted(waits, key=int)},
        "gpu_model_mixed_jobs": sum(len({cluster.model[i] for i in p.nodes}) > 1 for p in placed),
        "steps_waited_while_fitting": dict(sorted(trace.waited_while_fitting.items())),
        "steps": len(trace.allocated),
    }


def mpi_metrics(cluster: Cluster, gangs: Sequence[Gang], trace: Trace) -> dict[str, object]:
    """The MPIJobs' own figures (``--launchers``): how many there are and were placed, the share of
    them over the fewest leaves, their mean leaves and waits, and how many have their launcher
    beside a worker (same node) or alone in a leaf none of their workers use."""
    placed = [(g, trace.placements[g.name]) for g in gangs if g.launcher and g.name in trace.placements]
    leaves = [len({cluster.leaf[i] for i in p.nodes}) for _, p in placed]
    waits = [p.step - g.arrival for g, p in placed]
    return {
        "jobs": sum(g.launcher for g in gangs),
        "placed_jobs": len(placed),
        "share_over_min_leaves": sum(n > p.min_leaves for n, (_, p) in zip(leaves, placed, strict=True))
        / max(1, len(placed)),
        "mean_leaves_per_job": round(sum(leaves) / max(1, len(placed)), 4),
        "wait_steps": {"total": sum(waits), "max": max(waits, default=0)},
        "launcher_beside_a_worker": sum(p.nodes[0] in p.nodes[1:] for _, p in placed),
        "launcher_alone_in_a_leaf": sum(
            cluster.leaf[p.nodes[0]] not in {cluster.leaf[i] for i in p.nodes[1:]} for _, p in placed
        ),
    }
