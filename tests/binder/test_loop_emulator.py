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


async def test_the_binder_copies_each_node_topologys_zone_label_to_its_node() -> None:
    """The RoCE agent labels only the NodeTopology it owns; the leader's cycle sets the Node's
    ``zone`` label from it, and removes it when the node loses every switch. A NodeTopology with
    switches but no label (not written by an agent) leaves its node alone."""
    from extender import wellknown
    from extender.model.topology import zone_label_value

    label = zone_label_value(["s1"])
    assert label is not None
    agent_topo = b.topology("n0", ["s1"])
    agent_topo["metadata"]["labels"] = {wellknown.LABEL_ZONE: label}
    hand_written = b.topology("n1", ["s1"])
    async with LocalCluster() as cl:
        cl.apply([b.node("n0"), b.node("n1", labels={wellknown.LABEL_ZONE: "manual"}), agent_topo, hand_written])
        await cl.settle()
        report = await cl.cycle()
        assert not report.failed

        def zone(node: str) -> str | None:
            labels = cl.emulator.get("v1", "nodes", node)["metadata"].get("labels") or {}
            return labels.get(wellknown.LABEL_ZONE)

        assert zone("n0") == label
        assert zone("n1") == "manual"
        # the node loses every switch: the agent writes an empty NodeTopology without the label
        topo = cl.emulator.get(wellknown.API_VERSION, wellknown.NODETOPOLOGIES, "n0")
        topo["spec"] = {"net": {"roce": []}}
        topo["metadata"].pop("labels", None)
        cl.emulator.update(topo)
        await cl.settle()
        await cl.cycle()
        assert zone("n0") is None
        assert zone("n1") == "manual"
        again = await cl.cycle()
        assert not again.failed
