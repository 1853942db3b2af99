"""Pod defaults kube-apiserver applies on decode: requests from limits (``SetDefaults_Pod``)."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client

from extender.kube.client import request
from extender.simulate.cluster import LocalCluster
from tests import builders as b

pytestmark = pytest.mark.anyio

GPU = "nvidia.com/gpu"
QUOTA_NAME = "scheduling.infini-ai.com/quota-name"


def _limits_only_pod(name: str, ns: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "initContainers": [{"name": "init", "image": "busybox", "resources": {"limits": {"cpu": "1"}}}],
            "containers": [
                {"name": "train", "image": "pytorch", "resources": {"limits": {GPU: "1", "cpu": "4", "memory": "8Gi"}}},
                # a request already given wins, even a smaller one; missing ones come from limits
                {
                    "name": "side",
                    "image": "busybox",
                    "resources": {"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "500m"}},
                },
                {"name": "plain", "image": "busybox"},
                {"name": "empty", "image": "busybox", "resources": {"limits": {}}},
            ],
        },
    }


async def test_requests_default_from_limits_in_containers_and_init_containers(api: Any, ns: str) -> None:
    resp = await request(api, "POST", f"/api/v1/namespaces/{ns}/pods", body=_limits_only_pod("p", ns))
    assert resp.status == 201, resp.json()
    spec = resp.json()["spec"]
    by_name = {c["name"]: c for c in spec["containers"]}
    assert by_name["train"]["resources"]["requests"] == {GPU: "1", "cpu": "4", "memory": "8Gi"}
    assert by_name["side"]["resources"]["requests"] == {"cpu": "500m", "memory": "1Gi"}
    assert "resources" not in by_name["plain"]
    assert by_name["empty"]["resources"] == {"limits": {}}
    assert spec["initContainers"][0]["resources"]["requests"] == {"cpu": "1"}
    # the stored object says the same (GET), through the generated client too
    got = await client.CoreV1Api(api).read_namespaced_pod("p", ns)
    assert got.spec.containers[0].resources.requests == {GPU: "1", "cpu": "4", "memory": "8Gi"}


async def test_limits_only_gpu_pods_are_not_placed_as_if_they_asked_for_nothing() -> None:
    """Four 1-GPU pods written with limits only, one 1-GPU quota: only one of them may claim it
    (issue 18: all four ran on one node under the quota when requests stayed empty)."""
    quota = b.quota("q-solo", queue="default", gpu=1, hca=None)
    pods = []
    for i in range(4):
        p = b.pod(f"solo-{i}", gpu=1, hca=None)
        res = p["spec"]["containers"][0]["resources"]
        res.pop("requests")
        pods.append(p)
    async with LocalCluster() as cl:
        cl.apply([*b.seed_cluster(), quota, *pods])
        await cl.cycles(3)
        (stored,) = cl.emulator.list("scheduling.infini-ai.com/v1alpha1", "quotas")
        tasks = (stored.get("status") or {}).get("tasks") or []
        assert len(tasks) == 1, tasks
        assert tasks[0]["request"] == {GPU: "1"}
        claimed = [p for p in cl.pods("default") if (p["metadata"].get("annotations") or {}).get(QUOTA_NAME)]
        assert len(claimed) == 1
