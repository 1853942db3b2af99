"""``bench/placement.py --launchers``: MPIJobs (a launcher of rank 0 beside the workers) in the
placement benchmark. The node and launcher sizes its model assumes are those the cluster is built
with; the fewest leaves against a brute force over every set of leaves and every launcher node;
the baselines place launchers validly, and place every gang that fits."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.binder_cycle import LAUNCHER
from bench.placement_model import (
    POLICIES,
    Cluster,
    Gang,
    bench_cluster,
    fits_one_model,
    min_leaves,
    mpi_metrics,
    place_bestfit,
    place_spread,
    place_tree,
    run_fifo_backfill,
    workload,
)
from bench.placement_room import (
    LAUNCHER_CPU_M,
    LAUNCHER_MEM_MIB,
    NODE_CPU_M,
    NODE_HCA,
    NODE_MEM_MIB,
    Room,
)
from extender import wellknown
from extender.model.resources import to_units
from tests import builders as b

TWO_MODELS = Cluster((0, 0, 1, 1, 2, 2), ("A", "A", "A", "H", "H", "H"), (8,) * 6)


def test_the_model_sizes_nodes_and_launchers_as_the_cluster_is_built() -> None:
    alloc = b.node("n0", gpu=8)["status"]["allocatable"]
    assert to_units(wellknown.RESOURCE_RDMA_HCA, alloc[wellknown.RESOURCE_RDMA_HCA]) == NODE_HCA * 1000
    assert to_units("cpu", alloc["cpu"]) == NODE_CPU_M
    assert to_units("memory", alloc["memory"]) == NODE_MEM_MIB * 2**20
    assert to_units("cpu", LAUNCHER["cpu"]) == LAUNCHER_CPU_M
    assert to_units("memory", LAUNCHER["memory"]) == LAUNCHER_MEM_MIB * 2**20


def test_a_launcher_takes_the_hca_a_worker_of_one_gpu_needed() -> None:
    one_leaf = Cluster((0, 0), ("A", "A"), (8, 8))
    room = Room.empty_nodes([8, 8])
    assert min_leaves(one_leaf, room, 16, 1) == 1
    assert min_leaves(one_leaf, room, 16, 1, launcher=True) is None  # 16 HCAs, 17 quotas
    assert min_leaves(one_leaf, room, 15, 1, launcher=True) == 1
    assert place_tree(one_leaf, room, 15, 1, launcher=True) == [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1]
    room.worker(0, 8)  # n0: one 8-GPU worker, 7 HCAs left: the launcher costs no worker there
    assert place_tree(one_leaf, room, 8, 1, launcher=True) == [0, *[1] * 8]
    assert place_spread(one_leaf, room, 1, 8, launcher=True) == [1, 1]  # the least allocated: n1
    assert place_bestfit(one_leaf, room, 1, 8, launcher=True) == [0, 1]


def test_the_launcher_keeps_to_the_gangs_gpu_model_in_tree() -> None:
    """Leaf 1 holds A node n2 and H node n3: a 1-worker H gang with its launcher fits in leaf 1
    only if the launcher goes to an H node; n3 has no HCA free, so it takes leaf 2."""
    room = Room.empty_nodes([8] * 6)
    room.hca[3] = 1  # n3 (H): one worker, no launcher beside it
    room.gpu[4] = room.gpu[5] = 0  # leaf 2's H nodes: no GPU free, HCAs free
    room.gpu[0] = room.gpu[1] = room.gpu[2] = 0  # no A GPU free at all
    assert place_tree(TWO_MODELS, room, 1, 8, launcher=True) == [4, 3]  # n3 worker, launcher in leaf 2
    assert min_leaves(TWO_MODELS, room, 1, 8, launcher=True) == 2
    room.hca[3] = 2
    assert place_tree(TWO_MODELS, room, 1, 8, launcher=True) == [3, 3]
    assert min_leaves(TWO_MODELS, room, 1, 8, launcher=True) == 1


def test_tree_takes_one_leaf_when_one_holds_the_gang_not_the_emptiest_that_takes_the_launcher() -> None:
    """Leaf 0's nodes have no GPU free but HCAs (the fewest free GPUs, so the best fit by room):
    they take the launcher, not the worker; leaf 1 holds both."""
    c = Cluster((0, 0, 1, 1, 2, 2), ("A",) * 6, (8,) * 6)
    room = Room.empty_nodes([0, 0, 8, 8, 8, 8])
    assert place_tree(c, room, 1, 8, launcher=True) == [2, 2]
    assert min_leaves(c, room, 1, 8, launcher=True) == 1


rooms = st.builds(
    Room,
    gpu=st.lists(st.integers(0, 8), min_size=6, max_size=6),
    hca=st.lists(st.integers(0, 8), min_size=6, max_size=6),
    cpu=st.lists(st.sampled_from([0, LAUNCHER_CPU_M, NODE_CPU_M]), min_size=6, max_size=6),
    mem=st.lists(st.sampled_from([LAUNCHER_MEM_MIB - 1, NODE_MEM_MIB]), min_size=6, max_size=6),
)


def _holds(room: Room, nodes: Sequence[int], workers: int, gpu: int) -> bool:
    """Brute force: some node of ``nodes`` takes the launcher and all of them then take the workers."""
    for j in nodes:
        if not room.takes_launcher(j):
            continue
        after = room.copy()
        after.launcher(j)
        if sum(after.workers(i, gpu) for i in nodes) >= workers:
            return True
    return False


def _oracle(room: Room, workers: int, gpu: int) -> tuple[int | None, bool]:
    """(the fewest leaves, whether one model holds the gang) by trying every set of leaves."""

    def fewest(model: str | None) -> int | None:
        for k in (1, 2, 3):
            for leaves in itertools.combinations(range(3), k):
                nodes = [i for i in range(6) if TWO_MODELS.leaf[i] in leaves and model in (None, TWO_MODELS.model[i])]
                if _holds(room, nodes, workers, gpu):
                    return k
        return None

    one = [k for k in (fewest("A"), fewest("H")) if k is not None]
    return (min(one) if one else fewest(None)), bool(one)


def _valid(room: Room, nodes: list[int], workers: int, gpu: int) -> None:
    """The placement binds a launcher and ``workers`` workers within the room (never over-commits)."""
    assert len(nodes) == workers + 1 and nodes[1:] == sorted(nodes[1:])
    after = room.copy()
    after.launcher(nodes[0])  # asserts an HCA, CPU and memory free
    for i in nodes[1:]:
        after.worker(i, gpu)  # asserts GPUs and an HCA free


@settings(max_examples=500, deadline=None)
@given(room=rooms, workers=st.integers(1, 10), gpu=st.sampled_from([1, 2, 4, 8]))
def test_min_leaves_and_the_baselines_against_a_brute_force(room: Room, workers: int, gpu: int) -> None:
    least, one_model = _oracle(room, workers, gpu)
    assert min_leaves(TWO_MODELS, room, workers, gpu, launcher=True) == least
    assert fits_one_model(TWO_MODELS, room, workers, gpu, launcher=True) == one_model
    blind = _holds(room, range(6), workers, gpu)
    for name, place in POLICIES.items():
        nodes = place(TWO_MODELS, room, workers, gpu, True)
        if name == "tree":
            assert (nodes is not None) == one_model
        else:
            assert (nodes is not None) == blind
        if nodes is None:
            continue
        _valid(room, nodes, workers, gpu)
        if name == "tree":  # one model, launcher included, in the fewest leaves one model allows
            assert len({TWO_MODELS.model[i] for i in nodes}) == 1
            assert len({TWO_MODELS.leaf[i] for i in nodes}) == least


def test_workload_makes_the_asked_share_mpijobs_and_leaves_the_rest_as_it_was() -> None:
    c = bench_cluster()
    plain = workload(3, c, 100)
    mpi = workload(3, c, 100, launchers=0.3)
    assert sum(g.launcher for g in mpi) == 30 and not any(g.launcher for g in plain)
    assert [(g.name, g.workers, g.gpu, g.arrival, g.duration) for g in mpi] == [
        (g.name, g.workers, g.gpu, g.arrival, g.duration) for g in plain
    ]
    assert workload(3, c, 100, launchers=0.0) == plain


def test_the_baselines_and_the_real_scheduler_run_mpijobs() -> None:
    """A small workload of MPIJobs and plain gangs: every policy places all of it (the loop's own
    checks: no over-commit, no fitting gang left waiting; the driver's ledger, HCAs, CPU and memory
    included, equals the cache's every step), launcher first."""
    from bench.placement import SkyDriver

    c = Cluster((0, 0, 0, 1, 1, 1), ("A",) * 6, (8,) * 6)
    gangs = [
        Gang("g0", 8, 1, 0, 3, launcher=True),
        Gang("g1", 2, 8, 0, 2, launcher=True),
        Gang("g2", 4, 2, 1, 2),
        Gang("g3", 3, 8, 1, 1, launcher=True),
        Gang("g4", 15, 1, 2, 2, launcher=True),
    ]
    traces = {name: run_fifo_backfill(c, gangs, place, 100) for name, place in POLICIES.items()}
    traces["sky"] = SkyDriver(c, gangs, cycles_per_step=3).run(100)
    for trace in traces.values():
        assert set(trace.placements) == {g.name for g in gangs}
        for g in gangs:
            assert len(trace.placements[g.name].nodes) == g.members
        assert mpi_metrics(c, gangs, trace)["placed_jobs"] == 4
    # g4 (15 × 1 GPU and a launcher: 16 HCAs) needs two nodes' HCAs, one leaf at best
    assert traces["tree"].placements["g4"].min_leaves == 1
