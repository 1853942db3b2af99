"""The baselines of ``bench/placement.py``: ``spread``, ``bestfit`` and ``tree`` (Slurm
topology/tree). Each takes the free room (``placement_room.Room``, or a sequence of free GPUs) and
a gang — ``workers`` workers of ``gpu`` GPUs, and with ``launcher`` an MPIJob's launcher (rank 0:
one HCA, CPU and memory, no GPU; ``placement_room``) — and returns its nodes: the launcher's
first, then one per worker ascending; None when it does not place the gang now. The room is not
changed. A node takes as many of the gang's workers as its room holds, and may take the launcher
beside them.

The launcher is placed first (it is rank 0), on a node after which the rest of the room the
policy looks at still holds the workers (so a baseline never refuses a gang it can hold), by the
policy's own node rule; then the workers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from bench.placement_room import Room, as_room, fewest, leaf_room

if TYPE_CHECKING:
    from bench.placement_model import Cluster

__all__ = ["POLICIES", "Place", "place_bestfit", "place_spread", "place_tree"]

Place = Callable[["Cluster", Sequence[int] | Room, int, int, bool], list[int] | None]
NodeKey = Callable[[Room, int], tuple[int, ...]]


def _launcher_node(room: Room, nodes: Sequence[int], workers: int, gpu: int, key: NodeKey) -> int | None:
    """The node of ``nodes`` for the launcher: of those that take it and leave ``nodes`` room for
    the ``workers`` workers, the least by (its loss, ``key``); None: there is none."""
    total = sum(room.workers(i, gpu) for i in nodes)
    fits = [(lost, i) for i in nodes if (lost := room.loss(i, gpu)) is not None and total - lost >= workers]
    if not fits:
        return None
    return min(fits, key=lambda li: (li[0], *key(room, li[1])))[1]


def _per_worker(
    cluster: Cluster, free: Sequence[int] | Room, workers: int, gpu: int, *, launcher: bool, key: NodeKey
) -> list[int] | None:
    room = as_room(free)
    everywhere = range(cluster.size)
    head: list[int] = []
    if launcher:
        j = _launcher_node(room, everywhere, workers, gpu, key)
        if j is None:
            return None
        room = room.copy()
        room.launcher(j)
        head = [j]
    elif sum(room.workers(i, gpu) for i in everywhere) < workers:
        return None
    else:
        room = room.copy()
    nodes: list[int] = []
    for _ in range(workers):
        fits = [i for i in everywhere if room.workers(i, gpu) > 0]
        i = min(fits, key=lambda n: key(room, n))  # the check above: some node fits
        room.worker(i, gpu)
        nodes.append(i)
    return [*head, *sorted(nodes)]


def place_spread(
    cluster: Cluster, free: Sequence[int] | Room, workers: int, gpu: int, launcher: bool = False
) -> list[int] | None:
    """Each worker in turn on the least-allocated node that fits (most free GPUs; ties: lower index);
    the launcher before them likewise. Blind to leaves and GPU models."""
    return _per_worker(cluster, free, workers, gpu, launcher=launcher, key=lambda r, i: (-r.gpu[i], i))


def place_bestfit(
    cluster: Cluster, free: Sequence[int] | Room, workers: int, gpu: int, launcher: bool = False
) -> list[int] | None:
    """Each worker in turn on the fullest node that fits (fewest free GPUs ≥ gpu; ties: lower index);
    the launcher before them likewise. Blind to leaves and GPU models."""
    return _per_worker(cluster, free, workers, gpu, launcher=launcher, key=lambda r, i: (r.gpu[i], i))


def _fill(
    cluster: Cluster, room: Room, leaves: Sequence[int], *, model: str, workers: int, gpu: int, launcher: bool
) -> list[int]:
    """The gang onto the nodes of ``model`` in ``leaves``: the launcher on the fullest node that
    takes it without costing the leaves a worker they need (least loss, then fewest free GPUs,
    HCAs, lower index); then the workers leaf by leaf in the order given, each leaf best fit
    (fullest node first, ties lower index; a node takes as many workers as fit)."""
    head: list[int] = []
    if launcher:
        mine = [i for i in range(cluster.size) if cluster.leaf[i] in leaves and cluster.model[i] == model]
        j = _launcher_node(room, mine, workers, gpu, lambda r, i: (r.gpu[i], r.hca[i], i))
        assert j is not None, "the chosen leaves cannot hold the launcher"  # callers checked
        room = room.copy()
        room.launcher(j)
        head = [j]
    nodes: list[int] = []
    for s in leaves:
        here = [i for i in range(cluster.size) if cluster.leaf[i] == s and cluster.model[i] == model]
        for i in sorted(here, key=lambda n: (room.gpu[n], n)):
            take = min(room.workers(i, gpu), workers - len(nodes))
            nodes += [i] * take
            if len(nodes) == workers:
                return [*head, *sorted(nodes)]
    raise AssertionError("the chosen leaves cannot hold the gang")  # callers checked capacity


def _tree_leaves(
    cap: dict[int, int], loss: dict[int, int] | None, room: dict[int, int], workers: int
) -> list[int] | None:
    """The leaves of one model ``tree`` takes (``cap``: each leaf's worker slots, ``loss``: with a
    launcher, each leaf's least loss for it, ``room``: its free GPUs). Without a launcher: the best-fit
    leaf (fewest free GPUs; ties lower leaf) if one holds the gang, else the fewest leaves — those
    with the most slots, the last of them replaced by the best-fit leaf that holds the rest. With a
    launcher, the same for each leaf that could take it (it first, at its loss), and of those
    sets of the fewest leaves the one with the fewest free GPUs (ties: the lower leaves)."""
    k = fewest(cap, loss, workers)
    if k is None:
        return None
    heads: dict[int | None, int] = {None: 0} if loss is None else {s: cap[s] - lost for s, lost in loss.items()}
    found: list[tuple[int, list[int], list[int]]] = []
    for s0, own in heads.items():
        others = sorted((s for s in cap if s != s0), key=lambda s: (-cap[s], s))
        chosen = ([] if s0 is None else [s0]) + others[: max(0, k - 1 - (s0 is not None))]
        rest = workers - own - sum(cap[s] for s in chosen if s != s0)
        if s0 is not None and k == 1:
            if rest <= 0:
                found.append((room[s0], [s0], [s0]))
            continue
        fits = [s for s in cap if s not in chosen and cap[s] >= rest]
        if fits:
            leaves = [*chosen, min(fits, key=lambda s: (room[s], s))]
            found.append((sum(room[s] for s in leaves), sorted(leaves), leaves))
    return min(found)[2] if found else None


def place_tree(
    cluster: Cluster, free: Sequence[int] | Room, workers: int, gpu: int, launcher: bool = False
) -> list[int] | None:
    """Slurm topology/tree with one leaf level under a root, one GPU model per gang (launcher
    included): per model the lowest switch level holding the whole gang (``_tree_leaves``).
    Across models: fewest leaves, then fewest free GPUs in the chosen leaves, then model name.
    Inside the chosen leaves the nodes are filled best fit (see ``_fill``)."""
    state = as_room(free)
    best: tuple[int, int, str, list[int]] | None = None
    for model in cluster.models:
        cap, loss = leaf_room(cluster, state, gpu, model, launcher=launcher)
        room = dict.fromkeys(cap, 0)
        for i, f in enumerate(state.gpu):
            if cluster.model[i] == model:
                room[cluster.leaf[i]] += f
        leaves = _tree_leaves(cap, loss if launcher else None, room, workers)
        if leaves is None:
            continue
        cand = (len(leaves), sum(room[s] for s in leaves), model, leaves)
        if best is None or cand[:3] < best[:3]:
            best = cand
    if best is None:
        return None
    return _fill(cluster, state, best[3], model=best[2], workers=workers, gpu=gpu, launcher=launcher)


POLICIES: dict[str, Place] = {"spread": place_spread, "bestfit": place_bestfit, "tree": place_tree}
