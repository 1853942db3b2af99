"""The pure half of ``bench/placement.py``: cluster, workload, the minimum number of leaves, the
baseline policies, the FIFO-with-backfill step loop they share, and the metrics.

Everything here is a function of its arguments (no clock, no global state, randomness only through
an explicit ``random.Random(seed)``), so ``tests/bench/`` checks it on hand-made cases.

Model. A node has ``gpus`` GPUs of one ``model`` and sits under one ``leaf`` switch; nodes are
numbered 0…n−1 in index order (the scheduler's node index). A gang has ``workers`` workers of
``gpu`` GPUs each (and one ``rdma/hca`` each: nodes have 8 HCAs and a worker at least one GPU, so
GPUs always run out first and the baselines need not count HCAs). Several workers of a gang may
share a node. ``free[i]`` is node *i*'s free GPUs; a node holds ``free[i] // gpu`` more workers.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = [
    "POLICIES",
    "Cluster",
    "Gang",
    "Placement",
    "Trace",
    "bench_cluster",
    "busy_window",
    "metrics",
    "min_leaves",
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


def workload(seed: int, cluster: Cluster, gangs: int = 450, load: float = 0.95) -> list[Gang]:
    """``gangs`` gangs with shapes drawn from WORKERS × GPUS (weights above) and durations of 5–40
    steps; Poisson arrivals whose span makes the offered load Σ gpus·duration / (capacity · span)
    equal ``load``. Sorted by arrival (names ``g000``… in that order)."""
    rng = random.Random(seed)
    shapes = [
        (rng.choices(WORKERS, WORKER_WEIGHTS)[0], rng.choices(GPUS, GPU_WEIGHTS)[0], rng.randint(5, 40))
        for _ in range(gangs)
    ]
    span = sum(w * g * d for w, g, d in shapes) / (cluster.total_gpus * load)
    gaps = [rng.expovariate(1.0) for _ in range(gangs)]
    scale = span / sum(gaps)
    out, t = [], 0.0
    for i, (w, g, d) in enumerate(shapes):
        out.append(Gang(f"g{i:03d}", w, g, int(t), d))
        t += gaps[i] * scale
    return out


# --- the minimum number of leaves ----------------------------------------------------------------


def _leaf_capacity(cluster: Cluster, free: Sequence[int], gpu: int, model: str | None) -> dict[int, int]:
    """Workers of ``gpu`` GPUs each leaf can still take, on nodes of ``model`` (None: any model)."""
    cap: dict[int, int] = {}
    for i, f in enumerate(free):
        if model is None or cluster.model[i] == model:
            cap[cluster.leaf[i]] = cap.get(cluster.leaf[i], 0) + f // gpu
    return cap


def _fewest(caps: Sequence[int], workers: int) -> int | None:
    """Fewest of ``caps`` whose sum reaches ``workers``: take the largest first (any k leaves hold
    at most the k largest capacities, so this is exact). None: all of them are not enough."""
    total = 0
    for k, c in enumerate(sorted(caps, reverse=True), start=1):
        total += c
        if total >= workers:
            return k
    return None


def min_leaves(cluster: Cluster, free: Sequence[int], workers: int, gpu: int) -> int | None:
    """The fewest leaves that could hold the gang now: the minimum over GPU models of the fewest
    leaves whose free room *of that model* holds all workers. When no single model can hold it,
    the fewest leaves counting every model (a placement that mixes models); None: it does not fit."""
    best: int | None = None
    for model in cluster.models:
        k = _fewest(list(_leaf_capacity(cluster, free, gpu, model).values()), workers)
        if k is not None and (best is None or k < best):
            best = k
    if best is None:
        best = _fewest(list(_leaf_capacity(cluster, free, gpu, None).values()), workers)
    return best


def fits_one_model(cluster: Cluster, free: Sequence[int], workers: int, gpu: int) -> bool:
    """Whether the gang could be placed now under the placement rules: all its workers on nodes
    of one GPU model, each node taking ``free // gpu`` of them (any number of leaves)."""
    return any(
        _fewest(list(_leaf_capacity(cluster, free, gpu, model).values()), workers) is not None
        for model in cluster.models
    )


# --- baselines: each returns the node of every worker (ascending), or None; ``free`` is not changed


def _per_worker(free: Sequence[int], workers: int, gpu: int, key: Callable[[int, int], tuple[int, int]]) -> list[int]:
    left = list(free)
    nodes: list[int] = []
    for _ in range(workers):
        fits = [i for i, f in enumerate(left) if f >= gpu]
        if not fits:
            return []
        i = min(fits, key=lambda n: key(left[n], n))
        left[i] -= gpu
        nodes.append(i)
    return sorted(nodes)


def place_spread(cluster: Cluster, free: Sequence[int], workers: int, gpu: int) -> list[int] | None:
    """Each worker in turn on the least-allocated node that fits (most free GPUs; ties: lower index).
    Blind to leaves and GPU models."""
    if sum(f // gpu for f in free) < workers:
        return None
    return _per_worker(free, workers, gpu, lambda f, i: (-f, i)) or None


def place_bestfit(cluster: Cluster, free: Sequence[int], workers: int, gpu: int) -> list[int] | None:
    """Each worker in turn on the fullest node that fits (fewest free GPUs ≥ gpu; ties: lower index).
    Blind to leaves and GPU models."""
    if sum(f // gpu for f in free) < workers:
        return None
    return _per_worker(free, workers, gpu, lambda f, i: (f, i)) or None


def _fill(
    cluster: Cluster, free: Sequence[int], leaves: Sequence[int], *, model: str, workers: int, gpu: int
) -> list[int]:
    """Workers onto the nodes of ``model`` in ``leaves``, leaf by leaf in the order given, each leaf
    best fit (fullest node first, ties lower index; a node takes as many workers as fit)."""
    nodes: list[int] = []
    for s in leaves:
        room = [i for i in range(cluster.size) if cluster.leaf[i] == s and cluster.model[i] == model]
        for i in sorted(room, key=lambda n: (free[n], n)):
            take = min(free[i] // gpu, workers - len(nodes))
            nodes += [i] * take
            if len(nodes) == workers:
                return sorted(nodes)
    raise AssertionError("the chosen leaves cannot hold the gang")  # callers checked capacity


def place_tree(cluster: Cluster, free: Sequence[int], workers: int, gpu: int) -> list[int] | None:
    """Slurm topology/tree with one leaf level under a root, one GPU model per gang.

    Per model: if some leaf holds the whole gang, the best-fit leaf (fewest free GPUs of that
    model; ties lower leaf). Otherwise the root: the leaves with the most room first until the gang
    fits (the fewest leaves), the last of them replaced by the best-fit leaf that holds the rest.
    Across models: fewest leaves, then fewest free GPUs in the chosen leaves, then model name.
    Inside the chosen leaves the nodes are filled best fit (see ``_fill``)."""
    best: tuple[int, int, str, list[int]] | None = None
    for model in cluster.models:
        cap = _leaf_capacity(cluster, free, gpu, model)
        room = dict.fromkeys(cap, 0)
        for i, f in enumerate(free):
            if cluster.model[i] == model:
                room[cluster.leaf[i]] += f
        order = sorted(cap, key=lambda s: (-cap[s], s))
        k = _fewest([cap[s] for s in order], workers)
        if k is None:
            continue
        chosen = order[: k - 1]
        rest = workers - sum(cap[s] for s in chosen)
        last = min((s for s in cap if s not in chosen and cap[s] >= rest), key=lambda s: (room[s], s))
        leaves = [*chosen, last]
        cand = (k, sum(room[s] for s in leaves), model, leaves)
        if best is None or cand[:3] < best[:3]:
            best = cand
    if best is None:
        return None
    return _fill(cluster, free, best[3], model=best[2], workers=workers, gpu=gpu)


POLICIES: dict[str, Callable[[Cluster, Sequence[int], int, int], list[int] | None]] = {
    "spread": place_spread,
    "bestfit": place_bestfit,
    "tree": place_tree,
}


# --- the step loop and what it records -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Placement:
    gang: str
    step: int
    nodes: tuple[int, ...]  # one per worker
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
    place: Callable[[Cluster, Sequence[int], int, int], list[int] | None],
    max_steps: int,
) -> Trace:
    """Each step: gangs whose duration elapsed free their GPUs; the step's arrivals join the back
    of the queue; then one pass over the queue in arrival order places every gang that fits now,
    whole (gang scheduling), and leaves the others waiting in place (backfill without reservations:
    a later gang that fits starts even while an earlier one waits). Stops when every gang was
    placed or after ``max_steps``."""
    free = list(cluster.gpus)
    trace = Trace()
    arrivals = sorted(gangs, key=lambda g: (g.arrival, g.name))
    queue: list[Gang] = []
    ending: dict[int, list[Placement]] = {}
    by_name = {g.name: g for g in gangs}
    nxt = 0
    for step in range(max_steps):
        for p in ending.pop(step, []):
            for i in p.nodes:
                free[i] += by_name[p.gang].gpu
        while nxt < len(arrivals) and arrivals[nxt].arrival <= step:
            queue.append(arrivals[nxt])
            nxt += 1
        waiting: list[Gang] = []
        for g in queue:
            nodes = place(cluster, free, g.workers, g.gpu)
            if nodes is None:
                waiting.append(g)
                continue
            least = min_leaves(cluster, free, g.workers, g.gpu)
            assert least is not None, "placed a gang that does not fit"
            for i in nodes:
                free[i] -= g.gpu
                assert free[i] >= 0
            p = Placement(g.name, step, tuple(nodes), least)
            trace.placements[g.name] = p
            ending.setdefault(step + g.duration, []).append(p)
        queue = waiting
        # room only shrinks during the pass: a gang fitting now fitted at its turn, and was placed
        assert not any(fits_one_model(cluster, free, g.workers, g.gpu) for g in queue), "a fitting gang waits"
        trace.allocated.append(cluster.total_gpus - sum(free))
        if nxt == len(arrivals) and not queue:
            break
    return trace


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
