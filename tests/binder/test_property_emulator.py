"""Property test through the real loop, writer and emulator (issue 4): random clusters (leaves,
GPU models, NotReady/tainted nodes, nodes already holding quotas) and random RDMA gangs; after
the binder's cycles the API state satisfies invariants 1 and 3 of DESIGN §4, and every gang
whose quotas are all bound meets its topology constraints."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender import wellknown
from extender.model.resources import Resource
from extender.plugins.topology.fitmemo import capacity_for
from extender.simulate.cluster import LocalCluster
from tests import builders as b
from tests.binder.invariant_monitor import violations


@st.composite
def clusters(draw: st.DrawFn) -> dict[str, Any]:
    leaves = draw(st.integers(1, 4))
    models = ["A100", "H100"][: draw(st.integers(1, 2))]
    objs: list[dict[str, Any]] = []
    index = 0
    node_model: dict[str, str] = {}
    node_leaf: dict[str, str] = {}
    for leaf in range(leaves):
        for _ in range(draw(st.integers(2, 6))):
            name = f"n{index}"
            model = draw(st.sampled_from(models))
            ready = draw(st.integers(0, 9)) > 0
            taint = [{"key": "maint", "value": "x", "effect": "NoSchedule"}] if draw(st.integers(0, 9)) == 0 else None
            objs += [b.node(name, gpu_model=model, ready=ready, taints=taint), b.topology(name, [f"s{leaf}"])]
            node_model[name] = model
            node_leaf[name] = f"s{leaf}"
            if draw(st.integers(0, 4)) == 0:  # some capacity already taken by another queue's quota
                used = draw(st.integers(1, 8))
                objs.append(
                    b.quota(
                        f"busy-{name}",
                        queue="other",
                        gpu=used,
                        hca=None,
                        status={"phase": "QuotaBound", "nodeName": name},
                    )
                )
            index += 1
    jobs = []
    for j in range(draw(st.integers(1, 4))):
        workers = draw(st.integers(1, 6))
        gpu = draw(st.sampled_from([1, 2, 4, 8]))
        strict = draw(st.booleans())
        job = b.training_job(f"job{j}", workers, gpu=gpu, hca=1)
        if strict:
            for o in job:
                if o["kind"] == "Pod":
                    o["metadata"]["annotations"][wellknown.ANNO_ENABLE_TOPOLOGY] = "true"
        objs += job
        jobs.append({"name": f"job{j}", "workers": workers, "strict": strict})
    return {"objs": objs, "jobs": jobs, "model": node_model, "leaf": node_leaf}


def _check(cl: LocalCluster, case: dict[str, Any]) -> None:
    quotas = {q["metadata"]["name"]: q for q in cl.emulator.list(wellknown.API_VERSION, wellknown.QUOTAS)}
    nodes = {n["metadata"]["name"]: n for n in cl.emulator.list("v1", "nodes")}
    # invariants 1-3 of DESIGN §4 on the API objects (invariant_monitor: Σ quota request on a node ≤
    # its allocatable, a pod on a node claims a quota bound there, Σ claims ≤ request + shadow)
    assert violations(cl.emulator.store) == []
    # committed gangs meet their topology constraints
    for job in case["jobs"]:
        nodes_of = [(quotas[f"q-{job['name']}-{i}"].get("status") or {}).get("nodeName") for i in range(job["workers"])]
        placed: list[str] = [n for n in nodes_of if n]
        if len(placed) < len(nodes_of):
            assert not placed, f"{job['name']}: a gang is bound all together or not at all: {nodes_of}"
            continue
        models = {case["model"][n] for n in placed}
        assert len(models) == 1, f"{job['name']} mixes GPU models: {placed}"
        idx = [int(n[1:]) for n in placed]
        assert idx == sorted(idx), f"{job['name']}: rank order {placed}"
        leaves = {case["leaf"][n] for n in placed}
        (model,) = models
        if len(leaves) > 1:
            # it spans zones: then, even now (with everything else placed, which only takes room),
            # no single zone of its model may hold the whole gang
            mine = {f"q-{job['name']}-{i}" for i in range(job["workers"])}
            request = Resource.from_list(quotas[next(iter(mine))]["spec"]["request"])
            fits_in: defaultdict[str, int] = defaultdict(int)
            for name, node in nodes.items():
                if case["model"][name] != model or not _schedulable(node):
                    continue
                held = Resource.empty()
                for q in quotas.values():
                    if q["metadata"]["name"] not in mine and (q.get("status") or {}).get("nodeName") == name:
                        held.iadd(Resource.from_list(q["spec"]["request"]))
                free = Resource.from_list(node["status"]["allocatable"]) - held
                fits_in[case["leaf"][name]] += capacity_for(request, free)  # several workers may share a node
            assert all(n < len(placed) for n in fits_in.values()), (
                f"{job['name']} spans {sorted(leaves)} although one zone could hold it: {dict(fits_in)}"
            )


def _schedulable(node: dict[str, Any]) -> bool:
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"])
    tainted = any(t.get("effect") in ("NoSchedule", "NoExecute") for t in (node.get("spec") or {}).get("taints") or [])
    return ready and not tainted and not (node.get("spec") or {}).get("unschedulable")


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)
@given(case=clusters())
def test_random_clusters_keep_the_invariants_through_the_real_loop(case: dict[str, Any]) -> None:
    async def run() -> None:
        async with LocalCluster() as cl:
            cl.apply(case["objs"])
            await cl.cycles(2)
            _check(cl, case)
            cl.rt.cache.check()

    anyio.run(run)


def test_the_checker_catches_a_mixed_gang() -> None:
    """The property's checker is not vacuous: a hand-made mixed placement fails it."""
    case = {
        "jobs": [{"name": "j", "workers": 2, "strict": False}],
        "model": {"n0": "A100", "n1": "H100"},
        "leaf": {"n0": "s0", "n1": "s0"},
    }

    async def run() -> None:
        async with LocalCluster() as cl:
            cl.apply([b.node("n0", gpu_model="A100"), b.node("n1", gpu_model="H100")])
            cl.apply(
                [
                    b.quota("q-j-0", gpu=1, hca=1, status={"phase": "QuotaBound", "nodeName": "n0"}),
                    b.quota("q-j-1", gpu=1, hca=1, status={"phase": "QuotaBound", "nodeName": "n1"}),
                ]
            )
            await cl.settle()
            with pytest.raises(AssertionError, match="mixes GPU models"):
                _check(cl, case)

    anyio.run(run)


def test_the_checker_catches_needless_spanning() -> None:
    case = {
        "jobs": [{"name": "j", "workers": 2, "strict": False}],
        "model": {"n0": "A100", "n1": "A100", "n2": "A100"},
        "leaf": {"n0": "s0", "n1": "s0", "n2": "s1"},
    }

    async def run() -> None:
        async with LocalCluster() as cl:
            cl.apply([b.node("n0"), b.node("n1"), b.node("n2")])
            cl.apply(
                [
                    b.quota("q-j-0", gpu=1, hca=1, status={"phase": "QuotaBound", "nodeName": "n1"}),
                    b.quota("q-j-1", gpu=1, hca=1, status={"phase": "QuotaBound", "nodeName": "n2"}),
                ]
            )
            await cl.settle()
            with pytest.raises(AssertionError, match="although one zone could hold it"):
                _check(cl, case)

    anyio.run(run)
