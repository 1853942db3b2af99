"""Issue 4 scenario table, Volcano ``uthelper`` style — cluster in, quota bindings out — through
the real binder loop and writer against the emulator over HTTP."""

from __future__ import annotations

from typing import Any

import pytest

from extender import wellknown
from extender.simulate.cluster import LocalCluster
from tests import builders as b

pytestmark = pytest.mark.anyio


def _leaf_of(cl: LocalCluster) -> dict[str, str]:
    out = {}
    for t in cl.emulator.list(wellknown.API_VERSION, wellknown.NODETOPOLOGIES):
        out[t["metadata"]["name"]] = t["spec"]["net"]["roce"][0]["switchName"]
    return out


async def test_second_job_packs_into_the_leaf_the_first_one_uses() -> None:
    """Both leaves can hold job 2 (4 nodes each, one quota per node); the planner prefers the
    smallest zone and then the fullest one (best fit), so s1 is reused and s2 stays whole for a
    job that needs a whole leaf."""
    async with LocalCluster() as cl:
        cl.apply(b.seed_cluster() + b.training_job("train", 4, quota_prefix="q-train"))
        await cl.cycle()
        cl.apply(b.training_job("second", 4, quota_prefix="q-second"))
        await cl.cycle()
        nodes = cl.quota_nodes()
        assert [nodes[f"q-second-{i}"] for i in range(4)] == ["n0", "n1", "n2", "n3"]
        # a whole-leaf job still fits in s2
        cl.apply(b.training_job("big", 4, gpu=8, hca=8, quota_prefix="q-big"))
        await cl.cycle()
        nodes = cl.quota_nodes()
        assert [nodes[f"q-big-{i}"] for i in range(4)] == ["n4", "n5", "n6", "n7"]


async def test_gang_of_five_whole_node_workers_spans_exactly_two_leaves() -> None:
    async with LocalCluster() as cl:
        cl.apply(b.seed_cluster() + b.training_job("wide", 5, gpu=8, hca=8))
        await cl.cycle()
        nodes = cl.quota_nodes()
        placed = [nodes[f"q-wide-{i}"] for i in range(5)]
        assert all(placed)
        leaf = _leaf_of(cl)
        assert len({leaf[n] for n in placed}) == 2
        assert len(set(placed)) == 5
        indices = [int(n[1:]) for n in placed]
        assert indices == sorted(indices)


async def test_a100_and_h100_never_mix_within_a_job() -> None:
    objs: list[dict[str, Any]] = []
    # one switch with 2 A100 and 2 H100 nodes, and a second switch of 3 H100 nodes
    for i, model in enumerate(["A100", "A100", "H100", "H100"]):
        objs += [b.node(f"n{i}", gpu_model=model), b.topology(f"n{i}", ["s1"])]
    for i in range(4, 7):
        objs += [b.node(f"n{i}", gpu_model="H100"), b.topology(f"n{i}", ["s2"])]
    async with LocalCluster() as cl:
        cl.apply(objs + b.training_job("mix", 4, gpu=8, hca=8))
        await cl.cycle()
        nodes = cl.quota_nodes()
        placed = [nodes[f"q-mix-{i}"] for i in range(4)]
        assert all(placed)
        models = {
            n["metadata"]["name"]: n["metadata"]["labels"]["nvidia.com/gpu.product"]
            for n in cl.emulator.list("v1", "nodes")
        }
        assert {models[n] for n in placed} == {"H100"}


async def test_gang_of_four_where_only_three_nodes_fit_binds_nothing() -> None:
    async with LocalCluster() as cl:
        objs = b.seed_cluster()
        # fill 5 of the 8 nodes completely with quotas of another queue that another controller
        # bound (never released by the scheduler, which an idle quota of its own would be)
        for i in range(5):
            status = {"phase": "QuotaBound", "nodeName": f"n{i}", "boundBy": None}
            objs.append(b.quota(f"full-{i}", queue="other", gpu=8, hca=8, status=status))
        cl.apply(objs + b.training_job("four", 4, gpu=8, hca=8))
        report = await cl.cycle()
        nodes = cl.quota_nodes()
        assert [nodes[f"q-four-{i}"] for i in range(4)] == ["", "", "", ""]
        assert report.result is not None
        verdict = report.result.verdicts["default/four"]
        assert "no zone holds 4×8 GPU" in verdict.status.message()
        # the reason reaches the quota's status, for kubectl
        q = cl.emulator.get(wellknown.API_VERSION, wellknown.QUOTAS, "q-four-0")
        assert q["status"]["reason"] == "NoZoneFits"


async def test_drift_moves_the_quota_and_both_ledgers_to_where_the_pod_runs() -> None:
    async with LocalCluster() as cl:
        cl.apply(b.seed_cluster() + b.training_job("train", 4, quota_prefix="q-train"))
        await cl.cycle()
        assert cl.quota_nodes()["q-train-1"] == "n1"
        # n1 died; the pod of q-train-1 was recreated and runs on n4
        pod = next(p for p in cl.pods("default") if p["metadata"]["name"] == "train-worker-1")
        cl.emulator.delete("v1", "pods", "train-worker-1", "default")
        moved = b.pod("train-worker-1", group="train", quota="q-train-1", index=1, node="n4", phase="Running")
        cl.apply([moved])
        await cl.settle()
        cache = cl.rt.cache
        assert cache.nodes["n1"].has_quota("q-train-1")
        cl.rt.scheduler.memory.last_fix = 0.0  # the fix is throttled: let it run now
        await cl.cycle()
        assert cl.quota_nodes()["q-train-1"] == "n4"
        assert not cache.nodes["n1"].has_quota("q-train-1")
        assert cache.nodes["n4"].has_quota("q-train-1")
        assert cache.nodes["n1"].quota_idle.get(wellknown.RESOURCE_GPU) == 8000
        assert cache.nodes["n4"].quota_idle.get(wellknown.RESOURCE_GPU) == 7000
        cache.check()
        assert (
            pod["metadata"]["uid"]
            != next(p for p in cl.pods("default") if p["metadata"]["name"] == "train-worker-1")["metadata"]["uid"]
        )


async def test_static_bind_node_pins_the_quota() -> None:
    async with LocalCluster() as cl:
        cl.apply([*b.seed_cluster(), b.quota("pinned", gpu=4, hca=None, static_bind_node="n6")])
        await cl.cycle()
        q = cl.emulator.get(wellknown.API_VERSION, wellknown.QUOTAS, "pinned")
        assert q["status"]["nodeName"] == "n6"
        assert q["status"]["staticBindStatus"] == {"nodeName": "n6", "bound": True}
        # nothing claims it, but it is static: it is not released
        await cl.cycles(2)
        assert cl.quota_nodes()["pinned"] == "n6"


async def test_quota_anti_affinity_keeps_two_quotas_apart() -> None:
    anti = {"quotaAntiAffinity": [{"quotaNames": ["q-a"]}]}
    async with LocalCluster() as cl:
        objs = [b.node("n0"), b.node("n1")]
        objs += [b.quota("q-a", gpu=2, hca=None), b.quota("q-b", gpu=2, hca=None, affinity=anti)]
        objs += [b.pod("a", quota="q-a", gpu=2, hca=None), b.pod("b", quota="q-b", gpu=2, hca=None)]
        cl.apply(objs)
        await cl.cycle()
        nodes = cl.quota_nodes()
        assert nodes["q-a"] and nodes["q-b"]
        assert nodes["q-a"] != nodes["q-b"]


async def test_quota_affinity_follows_its_partner() -> None:
    aff = {"quotaAffinity": [{"quotaNames": ["q-a"]}]}
    async with LocalCluster() as cl:
        objs = [b.node("n0"), b.node("n1"), b.node("n2")]
        objs += [b.quota("q-a", gpu=2, hca=None, status={"phase": "QuotaBound", "nodeName": "n2"})]
        objs += [b.quota("q-b", gpu=2, hca=None, affinity=aff), b.pod("b", quota="q-b", gpu=2, hca=None)]
        objs += [b.pod("a", quota="q-a", gpu=2, hca=None)]
        cl.apply(objs)
        await cl.cycle()
        assert cl.quota_nodes()["q-b"] == "n2"
