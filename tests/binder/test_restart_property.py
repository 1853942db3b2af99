"""DESIGN §4 invariant 5 through the real service and emulator: restarting the service from the API
objects alone rebuilds the same ledgers — also when pods went while no replica watched
(``extender/cache/departures.py``).

The property: random clusters and random sequences of gang arrivals, binder cycles, pods started
on their quotas' nodes, pods deleted or finished (after a cycle has written their claims: a claim
never written cannot be rebuilt), and restarts of the service, some right after a deletion (before
any cycle writes its reservation). At every restart the new process's cache holds the same node
ledgers, quota phases, nodes, claims and live reservations as the old one did."""

from __future__ import annotations

from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender import wellknown
from extender.simulate.cluster import LocalCluster
from tests import builders as b

Step = tuple[str, int, int]


def ledgers(cl: LocalCluster) -> dict[str, Any]:
    """What invariant 5 compares: node ledgers, quotas (phase, node, claims, live reservations)."""
    cache = cl.rt.cache
    now = cache.clock()
    nodes = {
        n.name: (str(n.idle), str(n.used), str(n.quota_idle), sorted((k, str(v)) for k, v in n.quota_allocated.items()))
        for n in cache.nodes.values()
    }
    quotas = {
        q.name: (
            str(q.phase),
            q.node_name,
            sorted(q.claims),
            str(q.allocated),
            sorted((r.pod_uid, r.pod_name, r.index, r.job, r.reason) for r in q.reserved if not r.expired(now)),
        )
        for q in cache.quotas.values()
    }
    return {"nodes": nodes, "quotas": quotas}


async def start_pods(cl: LocalCluster) -> None:
    """Every pending pod of a bound quota is bound to the quota's node and runs."""
    quotas = {q["metadata"]["name"]: q for q in cl.emulator.list(wellknown.API_VERSION, wellknown.QUOTAS)}
    for p in cl.pods():
        name = (p["metadata"].get("annotations") or {}).get(wellknown.ANNO_QUOTA_NAME)
        node = ((quotas.get(name) or {}).get("status") or {}).get("nodeName") if name else None
        if node and not p["spec"].get("nodeName"):
            cl.emulator.bind("default", p["metadata"]["name"], node)
            running = {"status": {"phase": "Running"}}
            cl.emulator.patch("v1", "pods", p["metadata"]["name"], running, namespace="default", subresource="status")
    await cl.settle()


async def end_pod(cl: LocalCluster, name: str, how: str) -> None:
    """The pod is deleted, or succeeds (it stays in the API, out of the informers' selector)."""
    if cl.emulator.try_get("v1", "pods", name, "default") is None:
        return
    if how == "delete":
        cl.emulator.delete("v1", "pods", name, "default")
    else:
        done = {"status": {"phase": "Succeeded"}}
        cl.emulator.patch("v1", "pods", name, done, namespace="default", subresource="status")
    await cl.settle()


@st.composite
def worlds(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[Step]]:
    objs: list[dict[str, Any]] = []
    for leaf in range(draw(st.integers(1, 3))):
        for _ in range(draw(st.integers(1, 3))):
            name = f"n{sum(1 for o in objs if o['kind'] == 'Node')}"
            objs += [b.node(name, gpu_model=draw(st.sampled_from(["A100", "H100"]))), b.topology(name, [f"s{leaf}"])]
    step = st.one_of(
        st.tuples(st.just("arrive"), st.integers(1, 4), st.sampled_from([1, 2, 4, 8])),
        st.tuples(st.just("cycle"), st.just(0), st.just(0)),
        st.tuples(st.just("start"), st.just(0), st.just(0)),
        st.tuples(st.sampled_from(["delete", "succeed"]), st.integers(0, 5), st.integers(-1, 3)),  # -1: the gang
        st.tuples(st.just("restart"), st.just(0), st.integers(0, 1)),  # 1: after a cycle
    )
    return objs, draw(st.lists(step, min_size=3, max_size=12))


async def play(cl: LocalCluster, steps: list[Step]) -> None:
    """Run the steps, comparing the ledgers across every restart."""
    jobs: list[tuple[str, int]] = []
    for kind, x, y in steps:
        if kind == "arrive":
            jobs.append((f"j{len(jobs)}", x))
            cl.apply(b.training_job(*jobs[-1], gpu=y, hca=1))
            await cl.settle()
        elif kind == "cycle":
            await cl.cycle()
        elif kind == "start":
            await start_pods(cl)
        elif kind in ("delete", "succeed") and jobs:
            job, workers = jobs[x % len(jobs)]
            await cl.cycle()  # the claims are written: a claim never written cannot be rebuilt
            for i in range(workers) if y < 0 else [y % workers]:
                await end_pod(cl, f"{job}-worker-{i}", kind)
        elif kind == "restart":
            if y:
                await cl.cycle()
            before = ledgers(cl)
            await cl.restart()
            after = ledgers(cl)
            for part, want in before.items():
                assert after[part] == want, f"the restarted service rebuilt other {part}: {after[part]} != {want}"


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)
@given(world=worlds())
def test_a_restarted_service_rebuilds_the_same_ledgers(world: tuple[list[dict[str, Any]], list[Step]]) -> None:
    objs, steps = world

    async def run() -> None:
        async with LocalCluster() as cl:
            cl.apply(objs)
            await cl.settle()
            await play(cl, steps)
            cl.rt.cache.check()

    anyio.run(run)


def bound_gang() -> list[dict[str, Any]]:
    nodes = [o for n in ("n0", "n1") for o in (b.node(n), b.topology(n, ["s0"]))]
    return nodes + b.training_job("train", 2, gpu=8, hca=1)


async def running_gang(cl: LocalCluster) -> None:
    cl.apply(bound_gang())
    await cl.settle()
    await cl.cycle()
    await start_pods(cl)
    await cl.cycle()  # the pods' claims are written as Running


def test_a_worker_deleted_while_the_service_was_down_keeps_its_place() -> None:
    """The one sequence the property's checker needs the departures for: the worker goes, the
    service restarts before any cycle; the new leader keeps its place (n1), writes the reservation,
    and the recreated worker gets its own quota back — while a stranger does not."""

    async def run() -> None:
        async with LocalCluster() as cl:
            await running_gang(cl)
            uid = cl.emulator.get("v1", "pods", "train-worker-1", "default")["metadata"]["uid"]
            await cl.rt.stop()  # the service is down while the worker goes
            cl.emulator.delete("v1", "pods", "train-worker-1", "default")
            await cl.restart()
            await cl.cycle()
            q = cl.emulator.get(wellknown.API_VERSION, wellknown.QUOTAS, "q-train-1")["status"]
            assert q["nodeName"] == "n1", f"the departed worker's quota was released: {q}"
            assert [(r["podUID"], r["reason"]) for r in q["reservedTasks"]] == [(uid, "Deleted")]
            cl.apply([b.pod("intruder", gpu=8, hca=1)])  # one pod of no job: may not take the place
            cl.apply([b.pod("train-worker-1", group="train", gpu=8, hca=1, index=1)])
            await cl.cycle()
            mine = cl.emulator.get("v1", "pods", "train-worker-1", "default")["metadata"].get("annotations") or {}
            assert mine.get(wellknown.ANNO_QUOTA_NAME) == "q-train-1"
            other = cl.emulator.get("v1", "pods", "intruder", "default")["metadata"].get("annotations") or {}
            assert other.get(wellknown.ANNO_QUOTA_NAME) != "q-train-1"

    anyio.run(run)


def test_a_worker_that_succeeded_or_whose_job_went_while_the_service_was_down_keeps_no_place() -> None:
    """Control: a finished task (read back from the API as Succeeded) and a task of a deleted
    PodGroup keep nothing; a pod that cannot be read (the API answers 500) keeps its place."""

    async def run() -> None:
        async with LocalCluster() as cl:
            await running_gang(cl)
            cl.apply(b.training_job("other", 1, gpu=8, hca=1))
            await cl.settle()
            await cl.rt.stop()
            done = {"status": {"phase": "Succeeded"}}
            cl.emulator.patch("v1", "pods", "train-worker-0", done, namespace="default", subresource="status")
            cl.emulator.delete("v1", "pods", "train-worker-1", "default")
            cl.emulator.delete(wellknown.API_VERSION, wellknown.PODGROUPS, "train", "default")
            await cl.restart()
            reserved = {q.name: q.reserved for q in cl.rt.cache.quotas.values() if q.reserved}
            assert not reserved, f"places kept for a finished task or a deleted job: {reserved}"

    anyio.run(run)


def test_a_departed_pod_that_cannot_be_read_keeps_its_place() -> None:
    async def run() -> None:
        async with LocalCluster() as cl:
            await running_gang(cl)
            await cl.rt.stop()
            cl.emulator.delete("v1", "pods", "train-worker-1", "default")
            fault = cl.emulator.faults.add("get", "pods", code=500)
            await cl.restart()
            cl.emulator.faults.remove(fault)
            assert [r.pod_name for r in cl.rt.cache.quotas["q-train-1"].reserved] == ["train-worker-1"]

    anyio.run(run)


def test_the_places_of_a_job_whose_podgroup_went_while_the_service_was_down_are_released() -> None:
    """A worker was deleted and its place written into ``status.reservedTasks``; then, while the
    service was down, the whole job went (its PodGroup and pods deleted). The restarted leader
    releases the place at once, as a watching one does, instead of keeping it until its TTL."""

    async def run() -> None:
        async with LocalCluster() as cl:
            await running_gang(cl)
            await end_pod(cl, "train-worker-1", "delete")
            await cl.cycle()
            q = cl.emulator.get(wellknown.API_VERSION, wellknown.QUOTAS, "q-train-1")["status"]
            assert [r["podName"] for r in q.get("reservedTasks") or ()] == ["train-worker-1"], q
            await cl.rt.stop()
            cl.emulator.delete(wellknown.API_VERSION, wellknown.PODGROUPS, "train", "default")
            cl.emulator.delete("v1", "pods", "train-worker-0", "default")
            await cl.restart()
            await cl.cycle()
            q = cl.emulator.get(wellknown.API_VERSION, wellknown.QUOTAS, "q-train-1")["status"]
            assert not q.get("reservedTasks"), f"a deleted job's place is still kept: {q}"
            assert not cl.rt.cache.quotas["q-train-1"].reserved

    anyio.run(run)
