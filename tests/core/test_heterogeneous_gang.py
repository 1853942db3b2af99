"""A gang whose quotas differ in size (an MPI launcher beside its workers, a master beside workers):
counted as its largest quota it may fit nowhere while it fits, so it is planned over its kinds
(``extender/plugins/topology/mixedplan.py``; ``tests/core/test_mixed_gang_property.py`` checks it
against an exhaustive oracle).

Through the real conversion, cache and scheduler; the leaf s1 is n0–n3, 8 GPUs each."""

from __future__ import annotations

from typing import Any

from bench.cache_writes import apply_plan
from extender.binder.plan import plan_writes
from extender.cache.cache import ClusterCache
from extender.conf import default_policy
from extender.framework.status import Reason
from extender.scheduler import CycleResult, Scheduler
from tests import builders as b

Obj = dict[str, Any]


def gang(name: str, members: list[tuple[int | None, str]]) -> list[Obj]:
    """A PodGroup with one quota and one pod per member: (GPUs or None, CPU), in rank order."""
    objs: list[Obj] = [b.podgroup(name, min_member=len(members))]
    for i, (gpu, cpu) in enumerate(members):
        q = f"q-{name}-{i}"
        objs.append(b.quota(q, gpu=gpu, hca=1, request={"cpu": cpu}))
        objs.append(b.pod(f"{name}-{i}", group=name, quota=q, gpu=gpu, hca=1, cpu=cpu, index=i))
    return objs


def cycle(objs: list[Obj], nodes: int = 4) -> tuple[ClusterCache, CycleResult]:
    cache = ClusterCache(clock=lambda: 1_800_000_000.0)
    cluster: list[Obj] = [b.queue("research")]
    for i in range(nodes):
        cluster += [b.node(f"n{i}", index=i), b.topology(f"n{i}", ["s1"])]
    b.feed(cache, cluster + objs)
    result = Scheduler(default_policy()).run_once(cache.snapshot())
    apply_plan(cache, plan_writes(cache, result, extra_quotas=cache.take_dirty_quotas()))
    return cache, result


def nodes_of(cache: ClusterCache, name: str, size: int) -> list[str]:
    return [cache.quotas[f"q-{name}-{i}"].node_name for i in range(size)]


def test_a_launcher_rides_along_with_workers_that_fill_the_leaf() -> None:
    # launcher (rank 0, no GPU) + 4 workers of 8 GPUs: as 5 whole-node quotas it fits nowhere
    cache, result = cycle(gang("mpi", [(None, "2"), (8, "8"), (8, "8"), (8, "8"), (8, "8")]))
    assert "default/mpi" not in result.verdicts, result.verdicts
    assert nodes_of(cache, "mpi", 5) == ["n0", "n0", "n1", "n2", "n3"]  # ranks ascend with the node


def test_a_quota_ranked_last_rides_on_the_node_of_the_rank_before() -> None:
    # 4 workers of 6 GPUs and a 2-GPU one last: as five 6-GPU quotas they need 5 nodes
    cache, _ = cycle(gang("pt", [(6, "8"), (6, "8"), (6, "8"), (6, "8"), (2, "2")]))
    assert nodes_of(cache, "pt", 5) == ["n0", "n1", "n2", "n3", "n3"]


def test_a_rider_that_fits_nowhere_leaves_the_gang_waiting_whole() -> None:
    # the rider needs 96 CPUs: every node has 96, less the 8 of the worker planned there
    cache, result = cycle(gang("mpi", [(None, "96"), (8, "8"), (8, "8"), (8, "8"), (8, "8")]))
    assert nodes_of(cache, "mpi", 5) == [""] * 5
    assert result.verdicts["default/mpi"].status.reason is Reason.NO_ZONE_FITS


def test_a_gang_that_fits_counted_as_its_largest_is_planned_as_before() -> None:
    # 2 workers + launcher on 4 nodes: distinct nodes while there are enough
    cache, _ = cycle(gang("mpi", [(None, "2"), (8, "8"), (8, "8")]))
    assert nodes_of(cache, "mpi", 3) == ["n0", "n1", "n2"]


def test_the_rest_of_a_partly_bound_mixed_gang_joins_its_bound_sibling_s_leaf() -> None:
    # the launcher is already bound to n0 (leaf s1 = n0–n3); the smaller leaf s2 (n4, n5) would be
    # the best fit for the two workers, but they go where their sibling is: leaf s1, on distinct
    # nodes beside it (n1, n2), as the whole gang planned at once takes n0, n1, n2 — a node holding
    # a bound sibling is no distinct node while the leaf has free ones
    cache = ClusterCache(clock=lambda: 1_800_000_000.0)
    objs: list[Obj] = [b.queue("research")]
    for i in range(6):
        objs += [b.node(f"n{i}", index=i), b.topology(f"n{i}", ["s1" if i < 4 else "s2"])]
    objs += gang("mpi", [(None, "2"), (8, "8"), (8, "8")])
    objs[objs.index(next(o for o in objs if o["metadata"]["name"] == "q-mpi-0"))] = b.quota(
        "q-mpi-0", gpu=None, hca=1, request={"cpu": "2"}, status={"phase": "QuotaBound", "nodeName": "n0"}
    )
    b.feed(cache, objs)
    result = Scheduler(default_policy()).run_once(cache.snapshot())
    apply_plan(cache, plan_writes(cache, result, extra_quotas=cache.take_dirty_quotas()))
    assert nodes_of(cache, "mpi", 3) == ["n0", "n1", "n2"]


def test_a_mixed_gang_takes_the_best_scored_nodes_binpack_keeps_an_empty_node_whole() -> None:
    # n2 and n3 each run a 4-GPU pod: binpack scores them above the empty n0 and n1, so the two
    # 4-GPU workers fill them and only the launcher (2 CPUs, no GPU) goes to an empty node, n0;
    # n1 stays whole for an 8-GPU worker. By node index alone they took n0, n1, n2.
    running: list[Obj] = []
    for n in ("n2", "n3"):
        bound = {"phase": "QuotaBound", "nodeName": n}
        running.append(b.quota(f"q-run-{n}", gpu=4, hca=None, status=bound))
        running.append(b.pod(f"run-{n}", quota=f"q-run-{n}", gpu=4, hca=None, node=n, phase="Running"))
    cache, result = cycle(running + gang("mpi", [(None, "2"), (4, "8"), (4, "8")]))
    assert "default/mpi" not in result.verdicts, result.verdicts
    assert nodes_of(cache, "mpi", 3) == ["n0", "n2", "n3"]  # ranks still ascend with the node
