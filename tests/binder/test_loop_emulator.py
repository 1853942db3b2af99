"""Issue 4 scenarios through the real binder loop and writer against the emulator over HTTP."""

from __future__ import annotations

import pytest

from extender.simulate.cluster import LocalCluster
from tests import builders as b

pytestmark = pytest.mark.anyio


async def test_seed_example_binds_in_rank_order_and_annotates_pending_pods() -> None:
    async with LocalCluster() as cl:
        cl.apply(b.seed_cluster() + b.training_job("train", 4, quota_prefix="q-train"))
        await cl.cycle()
        nodes = cl.quota_nodes()
        assert nodes == {"q-train-0": "n0", "q-train-1": "n1", "q-train-2": "n2", "q-train-3": "n3"}
        for q in cl.emulator.list("scheduling.infini-ai.com/v1alpha1", "quotas"):
            st = q["status"]
            assert st["phase"] == "QuotaBound"
            assert st["allocated"] == {"nvidia.com/gpu": "1", "rdma/hca": "1"}
            assert [t["name"] for t in st["tasks"]] == [f"train-worker-{q['metadata']['name'][-1]}"]
        for p in cl.pods("default"):
            anno = p["metadata"]["annotations"]
            assert anno["scheduling.infini-ai.com/quota-node"] == nodes[anno["scheduling.infini-ai.com/quota-name"]]
        # a second cycle has nothing to change
        report = await cl.cycle()
        assert report.quota_writes == 0 and report.pod_writes == 0
