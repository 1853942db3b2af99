"""The free room of ``bench/placement.py``'s nodes, and the fewest leaves that hold a gang in it
(``--launchers``: some gangs are MPIJobs with a launcher beside the workers).

Every node advertises what ``tests.builders.node`` gives it (``tests/bench`` checks it): its GPUs
(``Cluster.gpus``), :data:`NODE_HCA` ``rdma/hca``, :data:`NODE_CPU_M` millicores and
:data:`NODE_MEM_MIB` MiB of memory. A worker's quota asks for ``gpu`` GPUs and one HCA; a
launcher's (rank 0 of an MPIJob, ``bench/binder_cycle.launcher``) for one HCA,
:data:`LAUNCHER_CPU_M` millicores and :data:`LAUNCHER_MEM_MIB` MiB, no GPU. So a node takes
``min(gpu // worker gpu, hca)`` more workers (without launchers the GPUs always run out first, as
a worker has at least one GPU: then it is ``gpu // worker gpu``), and a launcher when it has an
HCA, the CPU and the memory free. A launcher on a node may cost that node a worker (its HCA was
the one the last worker needed): its **loss** there, 0 or 1.

A set of nodes holds a gang of ``workers`` workers (and a launcher) iff their worker slots reach
``workers`` (less the least loss of a node of the set that takes the launcher). The fewest leaves
(:func:`min_leaves`) and whether a gang fits under the placement rules (:func:`fits_one_model`)
are exact under that rule. The launcher, like the workers, keeps to the gang's GPU model (the
scheduler plans a gang in the zones of one GPU spec, launcher included).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.placement_model import Cluster

__all__ = [
    "LAUNCHER_CPU_M",
    "LAUNCHER_MEM_MIB",
    "NODE_CPU_M",
    "NODE_HCA",
    "NODE_MEM_MIB",
    "Room",
    "as_room",
    "fewest",
    "fits_one_model",
    "leaf_room",
    "min_leaves",
]

NODE_HCA = 8
NODE_CPU_M = 96_000
NODE_MEM_MIB = 1024 * 1024
LAUNCHER_CPU_M = 2_000
LAUNCHER_MEM_MIB = 8 * 1024


@dataclass(slots=True)
class Room:
    """What each node has free: GPUs, HCAs, CPU (millicores), memory (MiB); node *i* at index *i*."""

    gpu: list[int]
    hca: list[int]
    cpu: list[int]
    mem: list[int]

    @classmethod
    def empty_nodes(cls, gpus: Sequence[int]) -> Room:
        """Nodes with ``gpus`` free GPUs and every HCA, CPU and byte of memory free."""
        n = len(gpus)
        return cls(list(gpus), [NODE_HCA] * n, [NODE_CPU_M] * n, [NODE_MEM_MIB] * n)

    def copy(self) -> Room:
        return Room(list(self.gpu), list(self.hca), list(self.cpu), list(self.mem))

    def workers(self, i: int, gpu: int) -> int:
        """How many more workers of ``gpu`` GPUs node ``i`` takes."""
        return min(self.gpu[i] // gpu, self.hca[i])

    def takes_launcher(self, i: int) -> bool:
        return self.hca[i] >= 1 and self.cpu[i] >= LAUNCHER_CPU_M and self.mem[i] >= LAUNCHER_MEM_MIB

    def loss(self, i: int, gpu: int) -> int | None:
        """Workers of ``gpu`` GPUs node ``i`` takes fewer once it holds a launcher (None: it
        takes no launcher)."""
        if not self.takes_launcher(i):
            return None
        return self.workers(i, gpu) - min(self.gpu[i] // gpu, self.hca[i] - 1)

    def worker(self, i: int, gpu: int, sign: int = 1) -> None:
        """Bind (``sign`` 1) or free (−1) a worker of ``gpu`` GPUs on node ``i``."""
        self.gpu[i] -= sign * gpu
        self.hca[i] -= sign
        assert self.gpu[i] >= 0 and self.hca[i] >= 0, f"node {i} over-committed"

    def launcher(self, i: int, sign: int = 1) -> None:
        """Bind (``sign`` 1) or free (−1) a launcher on node ``i``."""
        self.hca[i] -= sign
        self.cpu[i] -= sign * LAUNCHER_CPU_M
        self.mem[i] -= sign * LAUNCHER_MEM_MIB
        assert min(self.hca[i], self.cpu[i], self.mem[i]) >= 0, f"node {i} over-committed"


def as_room(free: Sequence[int] | Room) -> Room:
    """``free`` as a :class:`Room`: a sequence of free GPUs stands for nodes whose other resources
    are all free (a workload without launchers, where GPUs run out first)."""
    return free if isinstance(free, Room) else Room.empty_nodes(free)


def leaf_room(
    cluster: Cluster, room: Room, gpu: int, model: str | None, *, launcher: bool
) -> tuple[dict[int, int], dict[int, int]]:
    """Per leaf, on its nodes of ``model`` (None: any model): the workers of ``gpu`` GPUs it can
    take, and (``launcher``) the least loss of a node of it that takes the launcher (a leaf
    without such a node is missing from the second map)."""
    cap: dict[int, int] = {}
    loss: dict[int, int] = {}
    for i in range(cluster.size):
        if model is not None and cluster.model[i] != model:
            continue
        s = cluster.leaf[i]
        cap[s] = cap.get(s, 0) + room.workers(i, gpu)
        if launcher and (lost := room.loss(i, gpu)) is not None and lost < loss.get(s, 2):
            loss[s] = lost
    return cap, loss


def fewest(caps: dict[int, int], losses: dict[int, int] | None, workers: int) -> int | None:
    """The fewest leaves (``caps``: each one's worker slots) that hold ``workers`` workers and, when
    ``losses`` is given, the launcher too (in one of its leaves, at that leaf's loss). Exact: k
    leaves hold at most the k largest capacities; with a launcher, for each leaf that could take it,
    that leaf (less its loss) beside the k−1 largest others. None: all of them are not enough."""
    order = sorted(caps, key=lambda s: (-caps[s], s))
    top = [0]
    for s in order:
        top.append(top[-1] + caps[s])
    position = {s: p for p, s in enumerate(order)}
    for k in range(1, len(order) + 1):
        if losses is None:
            if top[k] >= workers:
                return k
            continue
        for s, lost in losses.items():
            others = top[k - 1] if position[s] >= k - 1 else top[k] - caps[s]
            if caps[s] - lost + others >= workers:
                return k
    return None


def min_leaves(
    cluster: Cluster, free: Sequence[int] | Room, workers: int, gpu: int, launcher: bool = False
) -> int | None:
    """The fewest leaves that could hold the gang now: the minimum over GPU models of the fewest
    leaves whose free room *of that model* holds all workers (and the launcher). When no single
    model can hold it, the fewest leaves counting every model (a placement that mixes models);
    None: it does not fit."""
    room = as_room(free)
    best: int | None = None
    for model in cluster.models:
        cap, loss = leaf_room(cluster, room, gpu, model, launcher=launcher)
        k = fewest(cap, loss if launcher else None, workers)
        if k is not None and (best is None or k < best):
            best = k
    if best is None:
        cap, loss = leaf_room(cluster, room, gpu, None, launcher=launcher)
        best = fewest(cap, loss if launcher else None, workers)
    return best


def fits_one_model(
    cluster: Cluster, free: Sequence[int] | Room, workers: int, gpu: int, launcher: bool = False
) -> bool:
    """Whether the gang could be placed now under the placement rules: all its workers (and its
    launcher) on nodes of one GPU model, each node taking as many as its room holds (any number
    of leaves)."""
    room = as_room(free)
    for model in cluster.models:
        cap, loss = leaf_room(cluster, room, gpu, model, launcher=launcher)
        if fewest(cap, loss if launcher else None, workers) is not None:
            return True
    return False
