"""Hostile requests to the operations endpoints: no 5xx, a JSON (or exposition) answer each time.

Path parameters are whatever a client puts there (unicode, percent-escapes, dots, very long
names); methods and query strings are arbitrary. ≥ 500 examples in process over ASGI, then a
smoke test over real HTTP.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.api.ops import create_app
from extender.servers import AppServer
from tests import builders as b
from tests.extender.wire import cache_of, state_of
from tests.fuzzing import (
    ODD_NAMES,
    LoopRunner,
)

_segment = st.one_of(st.text(min_size=0, max_size=40), st.sampled_from([*ODD_NAMES, "default", "train", "w-0"]))
_path = st.one_of(
    st.builds(
        lambda k, ns, n: f"/diagnose/{k}/{quote(ns, safe='')}/{quote(n, safe='')}",
        st.sampled_from(["job", "pod"]),
        _segment,
        _segment,
    ),
    st.builds(lambda s: f"/diagnose/{quote(s, safe='/')}", _segment),
    st.sampled_from(["/policy", "/metrics", "/healthz", "/readyz", "/openapi.json", "/docs", "/", "/diagnose"]),
)
_method = st.sampled_from(["GET", "GET", "GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS"])
_query = st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3)


def _cluster() -> list[dict[str, object]]:
    return [*b.seed_cluster(), *b.training_job("train", 2, gpu=8, hca=8)]


@pytest.fixture(scope="module")
def client(runner: LoopRunner) -> Iterator[httpx.AsyncClient]:
    app = create_app(state_of(cache_of(_cluster())))

    async def make() -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://ops")

    c = runner(make)
    yield c
    runner(c.aclose)


def assert_well_formed(r: httpx.Response) -> None:
    assert r.status_code < 500, (r.request.method, r.request.url, r.text[:300])
    if r.request.method == "HEAD" or r.status_code in (204, 304) or r.request.url.path == "/docs":
        return
    if r.request.url.path == "/metrics" and r.status_code == 200:
        assert b"# TYPE" in r.content
        return
    doc = orjson.loads(r.content)
    if r.status_code >= 400:
        assert isinstance(doc, dict) and ("error" in doc or "detail" in doc), doc


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(method=_method, path=_path, query=_query)
def test_hostile_ops_requests_get_well_formed_answers(
    runner: LoopRunner, client: httpx.AsyncClient, method: str, path: str, query: dict[str, str]
) -> None:
    r = runner(lambda: client.request(method, path, params=query))
    assert_well_formed(r)


@pytest.mark.anyio
async def test_odd_names_over_http() -> None:
    app = create_app(state_of(cache_of(_cluster())))
    async with AppServer(app) as srv, httpx.AsyncClient(base_url=srv.url) as c:
        for name in ODD_NAMES[1:]:
            r = await c.get(f"/diagnose/job/default/{quote(name, safe='')}")
            assert r.status_code == 404
            # a name with "/" no longer matches the route (starlette decodes %2F before routing)
            assert "not found" in (r.json()["error"] if "/" not in name else r.json()["detail"].lower())
        r = await c.get("/diagnose/job/default/train")
        assert r.status_code == 200 and r.json()
