"""The extender verbs over real HTTP, driven the way kube-scheduler drives them.

A kube-scheduler stand-in sends byte-exact request documents (the research note's samples,
verbatim, and variants) to the extender app served by uvicorn on 127.0.0.1, and checks every
field of every reply. The cache behind the app is fed through the real API→model conversion.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from extender import wellknown
from extender.api.extender import create_app
from extender.cache.cache import ClusterCache
from extender.conf import default_policy
from extender.servers import AppServer
from extender.state import ServiceState
from tests import builders as b

# Copies of the research note's wire samples (shared/research-notes/samples), verbatim.
SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "extender"

NODES = [f"gpu-n0{i}" for i in range(8)]


def _cluster() -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = []
    for i, name in enumerate(NODES):
        objs.append(b.node(name, cpu="128", memory="2Ti"))
        objs.append(b.topology(name, ["leaf-a" if i < 4 else "leaf-b"]))
    objs.append(b.podgroup("llama-sft", namespace="ml-research", min_member=1, queue="research"))
    for i in range(4):
        status = {"phase": "QuotaBound", "nodeName": f"gpu-n0{i}"}
        objs.append(b.quota(f"q-llama-sft-{i}", gpu=8, hca=8, status=status))
    return objs


def _sample(name: str) -> bytes:
    return (SAMPLES / name).read_bytes()


def _sample_pod() -> dict[str, Any]:
    pod: dict[str, Any] = json.loads(_sample("extender-filter-request.json"))["Pod"]
    return pod


@pytest.fixture
def cache() -> ClusterCache:
    c = ClusterCache(clock=lambda: 1_000_000.0)
    b.feed(c, _cluster())
    pod = _sample_pod()
    pod.setdefault("status", {"phase": "Pending"})
    c.on_pod_add(pod)
    return c


@pytest.fixture
async def client(cache: ClusterCache) -> AsyncIterator[tuple[httpx.AsyncClient, ServiceState]]:
    state = ServiceState(cache=cache, policy=default_policy(), max_body_bytes=64 * 1024)
    async with AppServer(create_app(state)) as srv, httpx.AsyncClient(base_url=srv.url) as c:
        yield c, state


pytestmark = pytest.mark.anyio


async def test_filter_sample_passes_only_the_quota_node(client: tuple[httpx.AsyncClient, ServiceState]) -> None:
    c, _ = client
    r = await c.post(
        "/filter", content=_sample("extender-filter-request.json"), headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 200
    body = r.json()
    assert list(body) == ["Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"]
    assert body["Nodes"] is None
    assert body["NodeNames"] == ["gpu-n01"]
    assert body["FailedNodes"] == {}
    assert body["Error"] == ""
    assert sorted(body["FailedAndUnresolvableNodes"]) == [n for n in NODES if n != "gpu-n01"]
    for msg in body["FailedAndUnresolvableNodes"].values():
        assert "q-llama-sft-1" in msg and "gpu-n01" in msg


async def test_filter_answers_full_nodes_in_kind(client: tuple[httpx.AsyncClient, ServiceState]) -> None:
    c, _ = client
    doc = json.loads(_sample("extender-filter-request.json"))
    items = [{"metadata": {"name": n, "labels": {"x": n}}, "status": {}} for n in NODES]
    doc["Nodes"] = {"metadata": {}, "items": items}
    doc["NodeNames"] = None
    r = await c.post("/filter", json=doc)
    body = r.json()
    assert body["NodeNames"] is None
    assert [i["metadata"]["name"] for i in body["Nodes"]["items"]] == ["gpu-n01"]
    assert body["Nodes"]["items"][0]["metadata"]["labels"] == {"x": "gpu-n01"}  # the object itself, untouched


async def test_lowercase_keys_are_accepted_like_gos_decoder(client: tuple[httpx.AsyncClient, ServiceState]) -> None:
    c, _ = client
    doc = json.loads(_sample("extender-filter-request.json"))
    r = await c.post("/filter", json={"pod": doc["Pod"], "nodes": None, "nodenames": NODES})
    assert r.json()["NodeNames"] == ["gpu-n01"]


async def test_unbound_quota_says_what_the_pod_waits_for(
    client: tuple[httpx.AsyncClient, ServiceState], cache: ClusterCache
) -> None:
    c, _ = client
    q = b.quota("q-llama-sft-1", gpu=8, hca=8)  # status: QuotaEmpty
    q["metadata"]["resourceVersion"] = "99"
    cache.on_quota_update(q, q)
    r = await c.post("/filter", content=_sample("extender-filter-request.json"))
    body = r.json()
    assert body["NodeNames"] == []
    assert body["FailedNodes"] == {}
    assert set(body["FailedAndUnresolvableNodes"]) == set(NODES)
    msg = body["FailedAndUnresolvableNodes"]["gpu-n00"]
    assert msg.startswith("QuotaNotBound(") and "q-llama-sft-1" in msg


async def test_quota_node_short_only_because_of_spot_pods_is_resolvable(
    client: tuple[httpx.AsyncClient, ServiceState], cache: ClusterCache
) -> None:
    c, _ = client
    for i in range(2):
        spot = b.pod(
            f"spot-{i}",
            namespace="batch",
            gpu=4,
            hca=None,
            extra={wellknown.RESOURCE_SPOT_GPU: "4"},
            node="gpu-n01",
            phase="Running",
            uid=f"c3d4e5f6-0000-4000-8000-00000000a00{i + 1}",
        )
        cache.on_pod_add(spot)
    r = await c.post("/filter", content=_sample("extender-filter-request.json"))
    body = r.json()
    assert body["NodeNames"] == []
    assert list(body["FailedNodes"]) == ["gpu-n01"]
    assert body["FailedNodes"]["gpu-n01"].startswith("LowerPriorityPodsUseNode(")
    assert "gpu-n01" not in body["FailedAndUnresolvableNodes"]

    # preempt: the sample proposes the two spot pods on gpu-n01 → kept, by UID
    r = await c.post("/preempt", content=_sample("extender-preempt-request.json"))
    assert r.status_code == 200
    victims = r.json()["NodeNameToMetaVictims"]
    assert list(victims) == ["gpu-n01"]
    assert sorted(p["UID"] for p in victims["gpu-n01"]["Pods"]) == [
        "c3d4e5f6-0000-4000-8000-00000000a001",
        "c3d4e5f6-0000-4000-8000-00000000a002",
    ]
    assert victims["gpu-n01"]["NumPDBViolations"] == 0


async def test_preempt_never_returns_other_nodes_or_nodes_without_victims(
    client: tuple[httpx.AsyncClient, ServiceState],
) -> None:
    c, _ = client
    doc = json.loads(_sample("extender-preempt-request.json"))
    doc["NodeNameToMetaVictims"] = {
        "gpu-n01": {"Pods": [{"UID": "not-a-known-pod"}], "NumPDBViolations": 0},
        "gpu-n02": {"Pods": [{"UID": "c3d4e5f6-0000-4000-8000-00000000a001"}], "NumPDBViolations": 0},
    }
    r = await c.post("/preempt", json=doc)
    assert r.json() == {"NodeNameToMetaVictims": {}}


async def test_prioritize_is_a_bare_array_with_every_candidate(client: tuple[httpx.AsyncClient, ServiceState]) -> None:
    c, _ = client
    r = await c.post("/prioritize", content=_sample("extender-filter-request.json"))
    body = r.json()
    assert isinstance(body, list)
    assert [h["Host"] for h in body] == NODES
    assert all(set(h) == {"Host", "Score"} and 0 <= h["Score"] <= 10 for h in body)
    assert {h["Host"]: h["Score"] for h in body}["gpu-n01"] == 10


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        (b"{not json", "not JSON"),
        (b"[1, 2]", "expected a JSON object"),
        (b'{"NodeNames": ["a"]}', "has no Pod"),
        (b'{"Pod": {"metadata": {}}, "NodeNames": "a"}', "NodeNames must be a list"),
    ],
)
async def test_malformed_filter_gets_a_clear_error_not_a_500(
    client: tuple[httpx.AsyncClient, ServiceState], payload: bytes, fragment: str
) -> None:
    c, _ = client
    r = await c.post("/filter", content=payload)
    assert r.status_code == 200
    assert fragment in r.json()["Error"]
    assert r.json()["NodeNames"] is None


async def test_oversized_body_is_refused(client: tuple[httpx.AsyncClient, ServiceState]) -> None:
    c, _ = client
    r = await c.post("/filter", content=b" " * (65 * 1024))
    assert r.status_code == 413
    assert "limit" in r.json()["Error"]


async def test_unknown_pod_and_unsynced_cache_answer_at_once(client: tuple[httpx.AsyncClient, ServiceState]) -> None:
    c, state = client
    doc = json.loads(_sample("extender-filter-request.json"))
    doc["Pod"]["metadata"]["uid"] = "00000000-0000-0000-0000-000000000000"
    body = (await c.post("/filter", json=doc)).json()
    assert body["NodeNames"] == []
    assert all(m.startswith("UnknownPod(") for m in body["FailedAndUnresolvableNodes"].values())

    state.synced = lambda: False
    body = (await c.post("/filter", content=_sample("extender-filter-request.json"))).json()
    assert body["NodeNames"] == []
    assert all(m.startswith("CacheNotSynced(") for m in body["FailedAndUnresolvableNodes"].values())


async def test_pods_of_other_schedulers_pass_through(client: tuple[httpx.AsyncClient, ServiceState]) -> None:
    c, _ = client
    doc = json.loads(_sample("extender-filter-request.json"))
    doc["Pod"]["spec"]["schedulerName"] = "default-scheduler"
    body = (await c.post("/filter", json=doc)).json()
    assert body["NodeNames"] == NODES
