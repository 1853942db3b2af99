"""Hostile extender requests: no 5xx, and every reply is the verb's own type, well formed.

kube-scheduler reads a filter reply as ``ExtenderFilterResult``, a prioritize reply as
``HostPriorityList``, bind as ``ExtenderBindingResult`` and preempt as
``ExtenderPreemptionResult``; a reply it cannot decode fails the scheduling attempt with a Go
decode error instead of the reason. So each reply is checked field by field, and ``Error`` may
name what is wrong with the request but never an "internal error" (a reader meeting a type it did
not expect). ≥ 500 examples per verb in process over ASGI; one real-HTTP smoke test.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings

from extender.api.extender import create_app
from extender.servers import AppServer
from tests import builders as b
from tests.extender.wire import RecordingWriter, cache_of, state_of
from tests.fuzzing import (
    ODD_NAMES,
    LoopRunner,
    bodies,
)

NODES = [f"n{i}" for i in range(8)]
_POD = b.pod("w-0", group="train", quota="q-0", gpu=8, hca=8, index=0)
_POD["spec"]["tolerations"] = [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]
_VICTIM = b.pod("v-0", gpu=1, hca=1, node="n1", phase="Running")

VALID: dict[str, dict[str, Any]] = {
    "filter": {"Pod": _POD, "Nodes": None, "NodeNames": [*NODES, *ODD_NAMES[:4]]},
    "prioritize": {"Pod": _POD, "Nodes": {"metadata": {}, "items": [{"metadata": {"name": n}} for n in NODES]}},
    "bind": {"PodName": "w-0", "PodNamespace": "default", "PodUID": _POD["metadata"]["uid"], "Node": "n0"},
    "preempt": {
        "Pod": _POD,
        "NodeNameToVictims": None,
        "NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": _VICTIM["metadata"]["uid"]}], "NumPDBViolations": 0}},
    },
}


def _cluster() -> list[dict[str, Any]]:
    status = {"phase": "QuotaBound", "nodeName": "n0"}
    return [
        *b.seed_cluster(),
        b.podgroup("train", min_member=1, queue="research"),
        b.quota("q-0", gpu=8, hca=8, status=status),
        _POD,
        _VICTIM,
    ]


def _names(body: bytes) -> set[str] | None:
    """The candidate names the request carried, when it is well formed enough to say."""
    try:
        doc = orjson.loads(body)
        names = doc.get("NodeNames")
        if isinstance(names, list):
            return {n for n in names if isinstance(n, str)}
        return {i["metadata"]["name"] for i in doc["Nodes"]["items"]}
    except Exception:
        return None


def _no_internal_error(error: object) -> None:
    assert isinstance(error, str)
    assert "internal error" not in error, error


def assert_well_formed(verb: str, body: bytes, status: int, reply: bytes) -> None:
    assert status in (200, 413), (status, reply[:300])
    doc = orjson.loads(reply)
    names = _names(body)
    if verb == "filter":
        assert list(doc) == ["Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"]
        _no_internal_error(doc["Error"])
        assert isinstance(doc["FailedNodes"], dict) and isinstance(doc["FailedAndUnresolvableNodes"], dict)
        if not doc["Error"] and names is not None:
            passed = (
                doc["NodeNames"] if doc["Nodes"] is None else [i["metadata"]["name"] for i in doc["Nodes"]["items"]]
            )
            assert set(passed) <= names
            assert set(doc["FailedNodes"]) | set(doc["FailedAndUnresolvableNodes"]) <= names
            assert not set(passed) & set(doc["FailedAndUnresolvableNodes"])
    elif verb == "prioritize":
        assert isinstance(doc, list)
        for entry in doc:
            assert set(entry) == {"Host", "Score"} and isinstance(entry["Host"], str)
            assert isinstance(entry["Score"], int) and 0 <= entry["Score"] <= 10
    elif verb == "bind":
        assert list(doc) == ["Error"]
        _no_internal_error(doc["Error"])
    else:
        assert set(doc) <= {"NodeNameToMetaVictims", "Error"}
        _no_internal_error(doc.get("Error", ""))
        for victims in (doc["NodeNameToMetaVictims"] or {}).values():
            assert isinstance(victims["NumPDBViolations"], int)
            assert all(isinstance(p["UID"], str) for p in victims["Pods"])


@pytest.fixture(scope="module")
def client(runner: LoopRunner) -> Iterator[httpx.AsyncClient]:
    cache = cache_of(_cluster())
    state = state_of(cache, writer=RecordingWriter(cache), max_body_bytes=256 * 1024)
    app = create_app(state)

    async def make() -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://extender")

    c = runner(make)
    yield c
    runner(c.aclose)


def _fuzz(verb: str) -> Any:
    @settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(body=bodies(VALID[verb]))
    def test(runner: LoopRunner, client: httpx.AsyncClient, body: bytes) -> None:
        r = runner(lambda: client.post(f"/{verb}", content=body, headers={"Content-Type": "application/json"}))
        assert_well_formed(verb, body, r.status_code, r.content)

    test.__name__ = f"test_hostile_{verb}_gets_a_well_formed_reply"
    return test


test_hostile_filter_gets_a_well_formed_reply = _fuzz("filter")
test_hostile_prioritize_gets_a_well_formed_reply = _fuzz("prioritize")
test_hostile_bind_gets_a_well_formed_reply = _fuzz("bind")
test_hostile_preempt_gets_a_well_formed_reply = _fuzz("preempt")


@pytest.mark.parametrize(
    ("verb", "doc", "says"),
    [
        ("filter", {**VALID["filter"], "Pod": {**_POD, "spec": []}}, "malformed Pod: Pod.spec: expected an object"),
        ("bind", {**VALID["bind"], "PodUID": ["x"]}, "PodName, PodNamespace, PodUID and Node are required"),
        ("preempt", {**VALID["preempt"], "NodeNameToMetaVictims": {"n1": []}}, "NodeNameToMetaVictims['n1'] must"),
    ],
)
def test_mistyped_fields_are_named(
    runner: LoopRunner, client: httpx.AsyncClient, verb: str, doc: Any, says: str
) -> None:
    r = runner(lambda: client.post(f"/{verb}", content=orjson.dumps(doc)))
    assert r.status_code == 200
    assert says in r.json()["Error"]


@pytest.mark.anyio
async def test_hostile_requests_over_http() -> None:
    cache = cache_of(_cluster())
    state = state_of(cache, writer=RecordingWriter(cache), max_body_bytes=64 * 1024)
    async with AppServer(create_app(state)) as srv, httpx.AsyncClient(base_url=srv.url) as c:
        for verb in VALID:
            for body in (b"[" * 3000 + b"]" * 3000, b"{}", orjson.dumps({"Pod": {"metadata": []}}), b"x" * 70_000):
                r = await c.post(f"/{verb}", content=body)
                assert_well_formed(verb, body, r.status_code, r.content)
        r = await c.post("/filter", content=orjson.dumps(VALID["filter"]))
        assert r.json()["NodeNames"] == ["n0"]
