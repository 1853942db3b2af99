"""Property: a spot job that requests RDMA (the TN path's zone stage, issue 16 item 5) whose first
pod is let in anywhere is placed whole, in one zone.

The cluster is random: up to three leaves, spot nodes whose spot resource is split between the
shared and the exclusive pool (node annotation ``spot-shared``), and other spot pods already
running in either pool. The job's pods are filtered one after another, each bound to a node the
filter let through (as kube-scheduler does), with the cache fed the bind before the next filter.
Whenever the first pod passes somewhere, every pod must pass in turn, and all in one zone: the
zone chosen for the first pod holds the whole job in the pool its pods use.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from extender import wellknown
from extender.cache.cache import ClusterCache
from extender.conf import default_policy
from extender.framework.session import Session
from tests import builders as b
from tests.core.props import PROPERTY

NOW = 1_800_000_000.0
POOLS = ("exclusive", "shared")


def spot_pod(name: str, group: str, gpu: int, pool: str, node: str | None = None) -> dict[str, Any]:
    return b.pod(
        name,
        group=group,
        gpu=gpu,
        hca=1,
        node=node,
        phase="Running" if node else "Pending",
        annotations={wellknown.ANNO_SPOT_POOL: pool},
        extra={wellknown.RESOURCE_SPOT_GPU: str(gpu)},
    )


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[str], dict[str, str]]:
    """(objects, the job's pod names, node → leaf)."""
    objs: list[dict[str, Any]] = [b.queue("research"), b.podgroup("job", min_member=1)]
    leaf_of: dict[str, str] = {}
    for i in range(draw(st.integers(1, 6))):
        name, leaf = f"n{i}", f"s{draw(st.integers(1, 3))}"
        shared = draw(st.sampled_from([0, 2, 4, 6, 8]))
        anno = {wellknown.ANNO_SPOT_SHARED: str(shared)} if shared else {}
        objs += [b.node(name, annotations=anno, extra_allocatable={wellknown.RESOURCE_SPOT_GPU: "8"})]
        objs.append(b.topology(name, [leaf]))
        leaf_of[name] = leaf
        for k in range(draw(st.integers(0, 2))):  # other spot jobs' pods running here
            g = draw(st.sampled_from([1, 2]))
            objs += [b.podgroup(f"o-{name}-{k}", min_member=1)]
            objs.append(spot_pod(f"o-{name}-{k}", f"o-{name}-{k}", g, draw(st.sampled_from(POOLS)), node=name))
    gpu, pool = draw(st.sampled_from([1, 2, 4])), draw(st.sampled_from(POOLS))
    names = [f"job-{i}" for i in range(draw(st.integers(1, 4)))]
    objs += [spot_pod(n, "job", gpu, pool) for n in names]
    return objs, names, leaf_of


def passing(objs: list[dict[str, Any]], name: str) -> list[str]:
    """The nodes the extender's TN filter lets pod ``name`` through to."""
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, objs)
    assert not cache.conversion_errors
    ssn = Session(cache.snapshot(NOW), default_policy())
    task = next(t for j in ssn.jobs() for t in j.tasks.values() if t.name == name)
    return [n.name for n in ssn.nodes() if ssn.tn.predicate(task, n).ok]


def bind(objs: list[dict[str, Any]], name: str, node: str) -> list[dict[str, Any]]:
    """``objs`` with pod ``name`` bound to ``node`` and running (the cache fed the bind)."""
    running = {"phase": "Running", "startTime": b.TS}
    return [
        {**o, "spec": {**o["spec"], "nodeName": node}, "status": running}
        if o["kind"] == "Pod" and o["metadata"]["name"] == name
        else o
        for o in objs
    ]


@PROPERTY
@given(clusters(), st.randoms(use_true_random=False))
def test_a_spot_rdma_job_let_in_is_placed_whole_in_one_zone(
    cluster: tuple[list[dict[str, Any]], list[str], dict[str, str]], rnd: Any
) -> None:
    objs, names, leaf_of = cluster
    placed: dict[str, str] = {}
    for name in names:
        nodes = passing(objs, name)
        if not placed and not nodes:
            return  # the job fits no zone: it waits whole, nothing to check
        assert nodes, f"{name} finds no node after {placed}: the zone chosen for the job does not hold it"
        node = rnd.choice(nodes)
        placed[name] = node
        objs = bind(objs, name, node)
    assert len({leaf_of[n] for n in placed.values()}) == 1, placed
