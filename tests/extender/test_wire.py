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
from extender.binder.loop import BinderLoop
from extender.cache.cache import ClusterCache
from extender.conf import default_policy
from extender.framework.session import FitStage, JobVerdict
from extender.framework.status import Reason, Status
from extender.scheduler import Scheduler
from extender.servers import AppServer
from extender.state import ServiceState
from tests import builders as b
from tests.extender.wire import RecordingWriter

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
    # a node passes: kube-scheduler reads no reasons, so none are sent (the lean reply)
    assert body["FailedAndUnresolvableNodes"] == {}
    # without the quota's node among the candidates nothing passes, and every one says why
    others = [n for n in NODES if n != "gpu-n01"]
    doc = json.loads(_sample("extender-filter-request.json"))
    doc["NodeNames"] = others
    body = (await c.post("/filter", json=doc)).json()
    assert body["NodeNames"] == []
    assert sorted(body["FailedAndUnresolvableNodes"]) == others
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
        (b'{"Pod": {"metadata": {}}, "NodeNames": ["a", 7]}', "NodeNames must be a list of strings"),
        (b'{"Pod": {"metadata": {}}, "NodeNames": ["a", null]}', "NodeNames must be a list of strings"),
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


async def test_filter_reply_has_the_shape_of_the_research_sample(
    client: tuple[httpx.AsyncClient, ServiceState],
) -> None:
    c, _ = client
    r = await c.post(
        "/filter", content=_sample("extender-filter-request.json"), headers={"Content-Type": "application/json"}
    )
    assert r.headers["content-type"] == "application/json"
    sample = json.loads(_sample("extender-filter-reply.json"))
    body = r.json()
    assert list(body) == list(sample)  # the same keys in Go's field order, nulls present
    assert {k: body[k] for k in ("Nodes", "NodeNames", "FailedNodes", "Error")} == {
        k: sample[k] for k in ("Nodes", "NodeNames", "FailedNodes", "Error")
    }
    assert body["FailedAndUnresolvableNodes"] == {}  # a node passes: the lean reply
    # the sample's reasons are what the same candidates answer when the quota's node is not one
    doc = json.loads(_sample("extender-filter-request.json"))
    doc["NodeNames"] = [n for n in doc["NodeNames"] if n != "gpu-n01"]
    body = (await c.post("/filter", json=doc)).json()
    assert list(body["FailedAndUnresolvableNodes"]) == list(sample["FailedAndUnresolvableNodes"])
    for node, text in sample["FailedAndUnresolvableNodes"].items():
        # the sample's words, behind the reason that /diagnose and PodGroup conditions use too
        assert body["FailedAndUnresolvableNodes"][node] == f"QuotaBoundElsewhere({text})"


@pytest.mark.parametrize(
    ("verdict", "expected"),
    [
        (
            JobVerdict(FitStage.GANG, Status.unschedulable(Reason.WAITING_FOR_GANG, "3/4 quotas bound")),
            "WaitingForGang(quota q-llama-sft-1 not bound: waiting for gang: 3/4 quotas bound)",
        ),
        (
            JobVerdict(FitStage.ZONE_SELECTION, Status.unschedulable(Reason.NO_ZONE_FITS, "no zone holds 4×1 GPU")),
            "NoZoneFits(quota q-llama-sft-1 not bound: no zone holds 4×1 GPU)",
        ),
        (None, "QuotaNotBound(quota q-llama-sft-1 not bound yet: waiting for the binder)"),
    ],
)
async def test_unbound_quota_reason_is_the_binders_verdict(
    client: tuple[httpx.AsyncClient, ServiceState], cache: ClusterCache, verdict: JobVerdict | None, expected: str
) -> None:
    c, state = client
    q = b.quota("q-llama-sft-1", gpu=8, hca=8)
    q["metadata"]["resourceVersion"] = "99"
    cache.on_quota_update(q, q)
    loop = BinderLoop(cache, Scheduler(state.policy), RecordingWriter(cache))
    if verdict is not None:
        loop.verdicts["ml-research/llama-sft"] = verdict
    state.loop = loop
    body = (await c.post("/filter", content=_sample("extender-filter-request.json"))).json()
    assert body["NodeNames"] == []
    assert body["FailedNodes"] == {}
    assert body["FailedAndUnresolvableNodes"] == dict.fromkeys(NODES, expected)


async def test_prioritize_answers_the_nodes_form_and_unknown_pods(
    client: tuple[httpx.AsyncClient, ServiceState], cache: ClusterCache
) -> None:
    c, state = client
    doc = json.loads(_sample("extender-filter-request.json"))
    doc["Nodes"] = {"metadata": {}, "items": [cache.node_object(n) for n in ("gpu-n00", "gpu-n01")]}
    doc["NodeNames"] = None
    assert (await c.post("/prioritize", json=doc)).json() == [
        {"Host": "gpu-n00", "Score": 0},
        {"Host": "gpu-n01", "Score": 10},
    ]
    doc["Pod"]["metadata"]["uid"] = "00000000-0000-0000-0000-000000000000"
    assert (await c.post("/prioritize", json=doc)).json() == [
        {"Host": "gpu-n00", "Score": 0},
        {"Host": "gpu-n01", "Score": 0},
    ]
    state.synced = lambda: False
    r = await c.post("/prioritize", content=_sample("extender-filter-request.json"))
    assert r.json() == [{"Host": n, "Score": 0} for n in NODES]
    assert (await c.post("/prioritize", content=b"{broken")).json() == []


async def test_filter_nodes_form_with_unknown_pod_or_unsynced_cache(
    client: tuple[httpx.AsyncClient, ServiceState], cache: ClusterCache
) -> None:
    c, state = client
    doc = json.loads(_sample("extender-filter-request.json"))
    items = [cache.node_object(n) for n in NODES]
    doc["Nodes"] = {"metadata": {}, "items": items}
    doc["NodeNames"] = None
    doc["Pod"]["metadata"]["uid"] = "00000000-0000-0000-0000-000000000000"
    body = (await c.post("/filter", json=doc)).json()
    assert body["NodeNames"] is None and body["Nodes"]["items"] == []
    assert set(body["FailedAndUnresolvableNodes"]) == set(NODES)
    assert all(
        m == "UnknownPod(pod ml-research/llama-sft-worker-1 is not in the scheduler's cache yet)"
        for m in body["FailedAndUnresolvableNodes"].values()
    )
    state.synced = lambda: False
    body = (await c.post("/filter", json=doc)).json()
    assert body["Nodes"]["items"] == []
    assert set(body["FailedAndUnresolvableNodes"].values()) == {
        "CacheNotSynced(the scheduler is starting; retry in a moment)"
    }


async def test_a_node_list_without_names_is_a_clear_error(client: tuple[httpx.AsyncClient, ServiceState]) -> None:
    c, _ = client
    doc = json.loads(_sample("extender-filter-request.json"))
    doc["Nodes"] = {"metadata": {}, "items": [{"metadata": {}}]}
    doc["NodeNames"] = None
    body = (await c.post("/filter", json=doc)).json()
    assert body == {
        "Nodes": None,
        "NodeNames": None,
        "FailedNodes": {},
        "FailedAndUnresolvableNodes": {},
        "Error": "Nodes.items[] without metadata.name",
    }


@pytest.mark.parametrize(
    "names",
    [
        ['a","b', "x\\", "gpu-n01", 'q\\","z', 'ü"', ""],  # quotes, commas, backslashes, unicode
        ["gpu-n01", "gpu-n02", "gpu-n01"],  # the quota's node listed twice
        ["gpu-n02", "gpu-n01", "gpu-n01", "gpu-n01"],  # … three times, side by side
        ['x"gpu-n01', "gpu-n01", 'gpu-n01"'],  # names whose JSON contains the node's
        ["gpu-n03", "gpu-n04"],  # the quota's node not a candidate
        ["gpu-n01"],  # only the quota's node
        [],
    ],
)
async def test_failure_map_is_exact_json_whatever_the_names(
    client: tuple[httpx.AsyncClient, ServiceState], names: list[str]
) -> None:
    """Whatever the names (quotes, commas, backslashes, repeats), the reply is strict JSON: the
    quota's node alone with empty maps when it is a candidate, else every candidate with the
    reason."""
    c, _ = client
    doc = json.loads(_sample("extender-filter-request.json"))
    doc["NodeNames"] = names
    r = await c.post("/filter", json=doc)
    body = json.loads(r.content)  # strict JSON
    passes = "gpu-n01" in names
    assert body["NodeNames"] == (["gpu-n01"] if passes else [])
    assert body["FailedNodes"] == {}
    assert body["FailedAndUnresolvableNodes"] == (
        {} if passes else dict.fromkeys(names, "QuotaBoundElsewhere(quota q-llama-sft-1 is bound to gpu-n01)")
    )
    assert body["Error"] == ""


async def test_a_change_in_the_cache_is_seen_by_the_next_request(
    client: tuple[httpx.AsyncClient, ServiceState], cache: ClusterCache
) -> None:
    """The extender reuses its snapshot and session between requests while the cache does not
    change: a change must be visible at once."""
    c, _ = client
    first = (await c.post("/filter", content=_sample("extender-filter-request.json"))).json()
    assert first["NodeNames"] == ["gpu-n01"]
    moved = b.quota("q-llama-sft-1", gpu=8, hca=8, status={"phase": "QuotaBound", "nodeName": "gpu-n02"})
    moved["metadata"]["resourceVersion"] = "99"
    cache.on_quota_update(moved, moved)
    second = (await c.post("/filter", content=_sample("extender-filter-request.json"))).json()
    assert second["NodeNames"] == ["gpu-n02"]
    doc = json.loads(_sample("extender-filter-request.json"))
    doc["NodeNames"] = ["gpu-n01"]
    third = (await c.post("/filter", json=doc)).json()
    assert third["FailedAndUnresolvableNodes"] == {
        "gpu-n01": "QuotaBoundElsewhere(quota q-llama-sft-1 is bound to gpu-n02)"
    }
