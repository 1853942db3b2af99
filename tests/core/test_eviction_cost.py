"""Where a gang must evict spot pods, the eviction cost decides among nodes topology ranks alike
(issue 16 item 5): the task-count strategy counts pods evicted, so one 4-pod spot job costs more
than one spot pod of the same GPUs."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from extender import wellknown
from extender.cache.cache import ClusterCache
from extender.conf import default_policy
from extender.model.node import NodeInfo
from extender.model.resources import Resource
from extender.model.task import TaskInfo, TaskStatus
from extender.plugins import sylas
from extender.scheduler import Scheduler
from tests import builders as b

NOW = 1_800_000_000.0
SPOT = {wellknown.RESOURCE_SPOT_GPU: "8"}


def spot_pod(name: str, node: str, gpu: int, job: str) -> dict[str, Any]:
    return b.pod(
        name,
        group=job,
        gpu=gpu,
        hca=None,
        node=node,
        phase="Running",
        extra={wellknown.RESOURCE_SPOT_GPU: str(gpu)},
    )


def place_one_whole_node_worker(
    spot: list[dict[str, Any]], *, gpu: int = 8, others: list[dict[str, Any]] | None = None
) -> str:
    objs: list[dict[str, Any]] = [b.queue("research")]
    for name in ("na", "nb"):
        objs += [b.node(name, extra_allocatable=SPOT), b.topology(name, ["s1"])]
    objs += [b.podgroup("spot4", min_member=1), b.podgroup("spot1", min_member=1)]
    objs += spot + (others or [])
    train = b.training_job("train", 1, gpu=gpu, hca=1)
    for o in train:
        if o["kind"] == "Pod":
            o["spec"]["priority"] = 100  # above the spot pods' 0: they may go for it (victims.may_go)
    objs += train
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, objs)
    assert not cache.conversion_errors
    result = Scheduler(default_policy()).run_once(cache.snapshot(NOW))
    quota = result.session.quota("q-train-0")
    assert quota is not None
    return quota.node_name


def test_a_gang_evicts_one_spot_pod_rather_than_a_four_pod_spot_job() -> None:
    four = [spot_pod(f"spot4-{i}", "na", 1, "spot4") for i in range(4)]  # na: the lower index
    one = [spot_pod("spot1-0", "nb", 4, "spot1")]
    assert place_one_whole_node_worker(four + one) == "nb"


def test_with_equal_costs_the_lower_node_index_wins() -> None:
    same = [spot_pod("spot4-0", "na", 4, "spot4"), spot_pod("spot1-0", "nb", 4, "spot1")]
    assert place_one_whole_node_worker(same) == "na"


def bound_quota(job: str, node: str, *, running: bool) -> list[dict[str, Any]]:
    """A 4-GPU quota of ``job`` bound to ``node``, its pod running there or still waiting."""
    return [
        b.podgroup(job, min_member=1),
        b.quota(f"q-{job}", gpu=4, status={"phase": "QuotaBound", "nodeName": node}),
        b.pod(
            f"{job}-0",
            group=job,
            quota=f"q-{job}",
            gpu=4,
            index=0,
            node=node if running else None,
            phase="Running" if running else "Pending",
        ),
    ]


def test_a_quota_bound_but_not_running_yet_keeps_its_room_from_the_spot_pods() -> None:
    """na and nb each hold a bound 4-GPU quota (binpack ranks them alike). On na its pod has not
    started, and four 1-GPU spot pods use the other half of ``idle``: a second 4-GPU quota there
    means evicting all four once both quotas run. nb needs no eviction at all."""
    four = [spot_pod(f"spot4-{i}", "na", 1, "spot4") for i in range(4)]
    others = bound_quota("waiting", "na", running=False) + bound_quota("running", "nb", running=True)
    assert place_one_whole_node_worker(four, gpu=4, others=others) == "nb"


def test_the_predicted_victims_are_only_those_needed() -> None:
    """A 7-GPU worker: na has 4 GPUs idle beside a 1-GPU and a 3-GPU spot pod, nb beside one
    4-GPU spot pod. On na evicting the 3-GPU pod alone makes room (the 1-GPU one is cheaper, but
    evicting it too frees nothing needed), and that costs less than evicting nb's 4-GPU pod."""
    spot = [spot_pod("spot1-0", "na", 1, "spot1"), spot_pod("spot4-0", "na", 3, "spot4")]
    spot += [b.podgroup("spotb", min_member=1), spot_pod("spotb-0", "nb", 4, "spotb")]
    assert place_one_whole_node_worker(spot, gpu=7) == "na"


@given(
    st.lists(st.lists(st.integers(1, 4), min_size=1, max_size=3), min_size=1, max_size=5),
    st.integers(1, 8),
    st.lists(st.integers(0, 3), min_size=5, max_size=5),
)
def test_predicted_victims_cover_the_shortage_and_none_can_be_spared(
    jobs: list[list[int]], short: int, hours: list[int]
) -> None:
    """Random spot jobs (pods of 1–4 GPUs) on a 16-GPU node and a GPU shortage: the predicted
    victims free the shortage whenever all spot pods together do, and giving back any one of
    their jobs would leave it short."""
    gpu = wellknown.RESOURCE_GPU
    node = NodeInfo("n", Resource({gpu: 16_000}))
    for j, pods in enumerate(jobs):
        for p, size in enumerate(pods):
            task = TaskInfo(
                uid=f"j{j}-{p}",
                name=f"j{j}-{p}",
                namespace="default",
                job=f"default/j{j}",
                request=Resource({gpu: size * 1000}),
                status=TaskStatus.RUNNING,
                node="n",
                preemptible=True,
                started=NOW - 3600 * hours[j],
            )
            node.add_task(task, force=True)
    shortage = Resource({gpu: short * 1000})
    victims = sylas.Plugin(sylas.SylasArgs()).predicted_victims(node, shortage, NOW)
    if sum(map(sum, jobs)) < short:
        assert victims is None
        return
    assert victims is not None
    freed = [sum(r.request.get(gpu) for r in g) for g in victims]
    assert sum(freed) >= short * 1000
    assert all(sum(freed) - f < short * 1000 for f in freed), freed
