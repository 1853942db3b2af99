"""Hostile AdmissionReviews: the webhook never answers 5xx, and every answer is well formed.

In process over ASGI (``httpx.ASGITransport``: the app's own body reading and routing, no socket)
for the ≥ 500 hypothesis examples, then a few of the worst over real HTTPS. A well-formed answer is
an allowing ``AdmissionReview`` echoing the request's uid (HTTP 200), or a ``metav1.Status``
(HTTP 400 / 413) when no uid could be read or the envelope cannot be answered in kind. An answer
saying "internal error" would mean a reader met a type it did not expect: that fails too.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings

from extender.simulate.certs import TLSFiles
from tests import builders as b
from tests.fuzzing import (
    LoopRunner,
    bodies,
)
from tests.webhooks import helpers as h
from webhooks.app import create_app

_POD = h.admission_pod("w-0", group="train", gpu=8, hca=8, annotations={"x": "y"})
_POD["spec"]["tolerations"] = [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]
_POD["spec"]["affinity"] = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "In", "values": ["b"]}]}]
        }
    }
}
VALID = h.review(_POD, uid="5b0c2a0e-0000-4000-8000-000000000001")


def _cluster() -> list[dict[str, Any]]:
    return [*b.seed_cluster(), b.podgroup("train", min_member=1, queue="research"), b.quota("q-0", gpu=8, hca=8)]


def assert_well_formed(body: bytes, status: int, reply: bytes) -> None:
    assert status < 500, reply[:500]
    doc = orjson.loads(reply)
    if status == 200:
        assert doc["kind"] == "AdmissionReview" and isinstance(doc["apiVersion"], str)
        resp = doc["response"]
        assert resp["allowed"] is True
        sent = orjson.loads(body)
        assert resp["uid"] == sent["request"]["uid"]
        if "patch" in resp:
            assert resp["patchType"] == "JSONPatch"
        message = (resp.get("status") or {}).get("message", "")
        assert "internal error" not in message, message
    else:
        assert status in (400, 413), status
        assert doc["kind"] == "Status" and doc["status"] == "Failure" and doc["code"] == status
        assert isinstance(doc["message"], str) and doc["message"]


@pytest.fixture(scope="module")
def client(runner: LoopRunner) -> Iterator[httpx.AsyncClient]:
    state = h.make_state(_cluster())
    app = create_app(state)

    async def make() -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://webhook")

    c = runner(make)
    yield c
    runner(c.aclose)


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(body=bodies(VALID))
def test_hostile_reviews_get_well_formed_answers(runner: LoopRunner, client: httpx.AsyncClient, body: bytes) -> None:
    r = runner(lambda: client.post(h.URL, content=body, headers={"Content-Type": "application/json"}))
    assert_well_formed(body, r.status_code, r.content)


@pytest.mark.parametrize(
    ("change", "code", "says"),
    [
        ({"apiVersion": []}, 400, "apiVersion is a list"),
        ({"apiVersion": {"a": 1}}, 400, "apiVersion is a dict"),
        ({"kind": 7}, 400, "kind is a int"),
        ({}, 200, None),
    ],
)
def test_non_string_envelope_is_a_400_status(
    runner: LoopRunner, client: httpx.AsyncClient, change: dict[str, Any], code: int, says: str | None
) -> None:
    doc = {**copy.deepcopy(VALID), **change}
    r = runner(lambda: client.post(h.URL, content=orjson.dumps(doc)))
    assert r.status_code == code
    if says:
        assert says in r.json()["message"]


def test_mistyped_pod_field_is_named(runner: LoopRunner, client: httpx.AsyncClient) -> None:
    doc = copy.deepcopy(VALID)
    doc["request"]["object"]["spec"]["containers"][0]["resources"] = ["8"]
    r = runner(lambda: client.post(h.URL, content=orjson.dumps(doc)))
    assert r.status_code == 200
    resp = r.json()["response"]
    assert resp["allowed"] is True and "patch" not in resp
    assert resp["status"]["message"] == "request.object.spec.containers[0].resources: expected an object, got array"


@pytest.mark.anyio
async def test_hostile_reviews_over_https(tls: TLSFiles) -> None:
    """The same answers through uvicorn and TLS (one of each kind of failure)."""
    state = h.make_state(_cluster())
    worst = [
        orjson.dumps({**VALID, "apiVersion": []}),
        b"[" * 3000 + b"]" * 3000,
        b"{}",
        orjson.dumps({**VALID, "request": {**VALID["request"], "object": {"metadata": [], "spec": 1}}}),
    ]
    async with h.serve(state, tls) as hook:
        for body in worst:
            r = await hook.post(body)
            assert_well_formed(body, r.status_code, r.content)
        ok = await hook.admit(VALID)
        assert ok.status_code == 200
