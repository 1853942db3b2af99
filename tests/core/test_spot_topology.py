"""Spot gangs that request RDMA (the TN path, no quotas) are kept in one zone like training jobs
(issue 16 item 5): the first pod only where its zone's idle room holds the whole job, the others
only in the zone where a sibling runs."""

from __future__ import annotations

from typing import Any

from extender import wellknown
from extender.cache.cache import ClusterCache
from extender.conf import default_policy
from extender.framework.session import Session
from extender.framework.status import Reason, Status
from extender.scheduler import Scheduler
from tests import builders as b

NOW = 1_800_000_000.0
SPOT = {wellknown.RESOURCE_SPOT_GPU: "8"}


def spot(name: str, *, node: str | None = None) -> dict[str, Any]:
    return b.pod(
        name,
        group="sp",
        gpu=8,
        hca=1,
        node=node,
        phase="Running" if node else "Pending",
        extra={wellknown.RESOURCE_SPOT_GPU: "8"},
    )


def verdicts(pods: list[dict[str, Any]], ask: str) -> dict[str, Reason | None]:
    objs: list[dict[str, Any]] = [b.queue("research"), b.podgroup("sp", min_member=1)]
    for i, leaf in enumerate(["s1", "s2", "s2"]):  # s1 has one node, s2 two
        objs += [b.node(f"n{i}", extra_allocatable=SPOT), b.topology(f"n{i}", [leaf])]
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, objs + pods)
    assert not cache.conversion_errors
    ssn = Session(cache.snapshot(NOW), default_policy())
    task = next(t for j in ssn.jobs() for t in j.tasks.values() if t.name == ask)
    out: dict[str, Reason | None] = {}
    for node in ssn.nodes():
        status = ssn.tn.predicate(task, node)
        out[node.name] = None if status.ok else status.reason
    return out


def verdict_needing_fs1(objs: list[dict[str, Any]], *, gpu: int) -> Status:
    """The verdict of one cycle for a 2-worker RDMA job of ``gpu`` GPUs a worker whose pods need
    mount point fs1, on the cluster ``objs``."""
    job = b.training_job("train", 2, gpu=gpu, hca=1)
    for o in job:
        if o["kind"] == "Pod":
            o["metadata"]["annotations"][wellknown.ANNO_REQUIRED_MOUNT_POINTS] = "fs1"
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, objs + job)
    return Scheduler(default_policy()).run_once(cache.snapshot(NOW)).verdicts["default/train"].status


def test_the_first_spot_pod_goes_only_to_a_zone_that_holds_the_whole_job() -> None:
    got = verdicts([spot("sp-0"), spot("sp-1")], "sp-0")
    assert got == {"n0": Reason.NO_ZONE_FITS, "n1": None, "n2": None}


def test_the_first_spot_pod_goes_only_to_the_best_fit_zone() -> None:
    """Leaves s1 (two nodes) and s2 (three) both hold a two-pod spot job: only s1, the one with
    less room, takes its first pod. The choice is one zone, not any zone that holds the job, so
    a sibling kube-scheduler filters before the extender hears the first pod's bind (the binding
    cycle runs asynchronously) is sent to the same zone."""
    objs: list[dict[str, Any]] = [b.queue("research"), b.podgroup("sp", min_member=1)]
    for i, leaf in enumerate(["s2", "s1", "s2", "s1", "s2"]):
        objs += [b.node(f"n{i}", extra_allocatable=SPOT), b.topology(f"n{i}", [leaf])]
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, [*objs, spot("sp-0"), spot("sp-1")])
    assert not cache.conversion_errors
    ssn = Session(cache.snapshot(NOW), default_policy())
    tasks = {t.name: t for j in ssn.jobs() for t in j.tasks.values()}
    for name in ("sp-0", "sp-1"):  # either pod first, and the other before the first one's bind
        got = {n.name: ssn.tn.predicate(tasks[name], n).reason for n in ssn.nodes()}
        assert got == {
            "n0": Reason.ZONE_MISMATCH,
            "n1": None,
            "n2": Reason.ZONE_MISMATCH,
            "n3": None,
            "n4": Reason.ZONE_MISMATCH,
        }, name


def test_a_spot_pod_follows_its_running_sibling_into_its_zone() -> None:
    got = verdicts([spot("sp-0", node="n1"), spot("sp-1")], "sp-1")
    assert got["n0"] is Reason.ZONE_MISMATCH
    assert got["n2"] is None


def test_an_rdma_gang_waiting_for_a_mount_point_is_told_storage_not_ready() -> None:
    """The verdict of a topology job whose nodes all lack its mount point names storage, not zones."""
    status = verdict_needing_fs1([b.queue("research"), *b.seed_cluster(leaves=1, per_leaf=2)], gpu=1)  # n0, n1 on s1
    assert status.reason is Reason.STORAGE_NOT_READY, status.message()


def test_an_rdma_gang_a_missing_mount_point_keeps_out_is_told_storage_not_ready() -> None:
    """Two 8-GPU workers on two empty nodes of one leaf, the mount point ready on n0 only: n0 takes
    one worker, and the gang waits for the mount point on n1 — the verdict says so first, then
    what the leaf holds without it (as a gang without topology is told both)."""
    fs1 = wellknown.STORAGE_CONDITION_PREFIX + "fs1"
    ready = [{"type": fs1, "status": "True", "lastHeartbeatTime": b.TS, "lastTransitionTime": b.TS}]
    objs = [b.queue("research"), b.node("n0", conditions=ready), b.node("n1")]
    objs += [b.topology("n0", ["s1"]), b.topology("n1", ["s1"])]
    status = verdict_needing_fs1(objs, gpu=8)
    assert status.reason is Reason.STORAGE_NOT_READY, status.message()
    assert Reason.NO_ZONE_FITS in {f.reason for f in status.failures}, status.message()


def test_a_zone_s_spot_room_is_counted_for_each_pod_size() -> None:
    """One session answers for a 1-GPU spot job, then for an 8-GPU one (the extender reuses a
    session while the cache does not change): leaf s2's two nodes take sixteen 1-GPU pods but only
    two 8-GPU ones, so the three-pod 8-GPU job fits no zone, whatever was asked before."""
    objs: list[dict[str, Any]] = [
        b.queue("research"),
        b.podgroup("small", min_member=1),
        b.podgroup("big", min_member=1),
    ]
    for i, leaf in enumerate(["s1", "s2", "s2"]):
        objs += [b.node(f"n{i}", extra_allocatable=SPOT), b.topology(f"n{i}", [leaf])]
    for i in range(2):
        objs.append(b.pod(f"small-{i}", group="small", gpu=1, hca=1, extra={wellknown.RESOURCE_SPOT_GPU: "1"}))
    for i in range(3):
        objs.append(b.pod(f"big-{i}", group="big", gpu=8, hca=1, extra={wellknown.RESOURCE_SPOT_GPU: "8"}))
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, objs)
    assert not cache.conversion_errors
    ssn = Session(cache.snapshot(NOW), default_policy())
    task = {t.name: t for j in ssn.jobs() for t in j.tasks.values()}
    n0, n1 = ssn.node("n0"), ssn.node("n1")
    assert n0 is not None and n1 is not None
    assert ssn.tn.predicate(task["small-0"], n0).ok  # s1 is the best fit for two 1-GPU pods
    assert ssn.tn.predicate(task["small-0"], n1).reason is Reason.ZONE_MISMATCH
    status = ssn.tn.predicate(task["big-0"], n1)
    assert status.reason is Reason.NO_ZONE_FITS, status.message()


def test_a_zone_s_spot_room_counts_only_nodes_that_take_the_pod() -> None:
    """Leaf s1 has two empty nodes but one is cordoned; leaf s2 has two it may use. The first pod
    of a two-pod spot job goes only to s2: in s1 its sibling would find no node and wait, the
    job split between running and pending, while s2 holds it whole."""
    objs: list[dict[str, Any]] = [b.queue("research"), b.podgroup("sp", min_member=1)]
    for i, leaf in enumerate(["s1", "s1", "s2", "s2"]):
        objs += [b.node(f"n{i}", extra_allocatable=SPOT, unschedulable=i == 1), b.topology(f"n{i}", [leaf])]
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, [*objs, spot("sp-0"), spot("sp-1")])
    assert not cache.conversion_errors
    ssn = Session(cache.snapshot(NOW), default_policy())
    task = next(t for j in ssn.jobs() for t in j.tasks.values() if t.name == "sp-0")
    got = {}
    for node in ssn.nodes():
        status = ssn.tn.predicate(task, node)
        got[node.name] = None if status.ok else status.reason
    assert got["n0"] is Reason.NO_ZONE_FITS, got
    assert got["n2"] is None and got["n3"] is None, got
