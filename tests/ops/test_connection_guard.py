"""Every server's connection guard (``extender.servers.GuardedProtocol``), over real sockets on
loopback: half-sent requests are closed once the read timeout passes while whole requests keep
being answered; oversized headers get 431; above the connection cap requests get 503."""

from __future__ import annotations

import asyncio
import time

import httpx
import orjson
import pytest

from extender.api.extender import create_app
from extender.servers import AppServer
from extender.simulate.certs import write_self_signed
from tests import builders as b
from tests.extender.wire import cache_of, state_of
from tests.webhooks import helpers as h
from webhooks.app import create_app as create_webhook_app
from webhooks.server import WebhookServer

pytestmark = pytest.mark.anyio

READ_TIMEOUT = 1.0
HALF_SENT = [
    b"",  # connects, sends nothing
    b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Le",  # headers cut short
    b'POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{"Pod":',
]


def _filter_body() -> bytes:
    return orjson.dumps({"Pod": b.pod("p", uid="u-1"), "Nodes": None, "NodeNames": ["n0"]})


async def _open_half_sent(port: int, n: int) -> list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    out = []
    for i in range(n):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(HALF_SENT[i % len(HALF_SENT)])
        await writer.drain()
        out.append((reader, writer))
    return out


async def _closed_after(reader: asyncio.StreamReader, limit: float) -> bytes:
    """What the server sent before closing; fails if it is still open after ``limit`` seconds."""
    return await asyncio.wait_for(reader.read(), timeout=limit)


async def test_400_half_sent_requests_are_closed_while_whole_ones_are_served() -> None:
    state = state_of(cache_of(b.seed_cluster()))
    async with AppServer(create_app(state), read_timeout=READ_TIMEOUT, max_connections=1000) as srv:
        t0 = time.monotonic()
        conns = await _open_half_sent(srv.port, 400)
        async with httpx.AsyncClient(base_url=srv.url) as client:
            for _ in range(20):  # served while all 400 are open
                r = await client.post("/filter", content=_filter_body())
                assert r.status_code == 200 and r.json()["Error"] == ""
            # bounded: every half-sent connection closed well within a few read timeouts
            answers = await asyncio.gather(*(_closed_after(r, 10 * READ_TIMEOUT) for r, _ in conns))
            elapsed = time.monotonic() - t0
            for i, answer in enumerate(answers):
                kind = i % len(HALF_SENT)
                if kind == 2:
                    assert answer == b""  # the app was reading the body: closed, no response
                else:
                    assert answer.startswith(b"HTTP/1.1 408 "), answer
            assert elapsed >= READ_TIMEOUT  # not before the timeout
            r = await client.post("/filter", content=_filter_body())
            assert r.status_code == 200
        for _, w in conns:
            w.close()


async def test_a_slow_but_steady_client_within_the_timeout_is_served() -> None:
    state = state_of(cache_of(b.seed_cluster()))
    async with AppServer(create_app(state), read_timeout=READ_TIMEOUT) as srv:
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        body = _filter_body()
        request = b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body
        for i in range(0, len(request), len(request) // 4 + 1):
            writer.write(request[i : i + len(request) // 4 + 1])
            await writer.drain()
            await asyncio.sleep(READ_TIMEOUT / 10)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 200 ")
        # keep-alive: a second request on the same connection gets its own deadline
        writer.write(request)
        await writer.drain()
        await asyncio.sleep(0)
        writer.close()


async def test_oversized_headers_get_431() -> None:
    state = state_of(cache_of(b.seed_cluster()))
    async with AppServer(create_app(state), read_timeout=5, max_header_bytes=4096) as srv:
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 8192 + b"\r\n\r\n")
        await writer.drain()
        answer = await _closed_after(reader, 5)
        assert answer.startswith(b"HTTP/1.1 431 ")
        writer.close()
        # a large body is not a large head: it arrives in reads far above the head cap
        big = orjson.dumps({"Pod": b.pod("p", uid="u-1"), "Nodes": None, "NodeNames": ["n0"] * 200_000})
        async with httpx.AsyncClient(base_url=srv.url) as client:
            r = await client.post("/filter", content=big)
            assert r.status_code == 200 and len(big) > 1_000_000


async def test_above_the_connection_cap_requests_get_503_until_idle_ones_time_out() -> None:
    state = state_of(cache_of(b.seed_cluster()))
    async with AppServer(create_app(state), read_timeout=READ_TIMEOUT, max_connections=50) as srv:
        conns = await _open_half_sent(srv.port, 60)
        async with httpx.AsyncClient(base_url=srv.url) as client:
            r = await client.get("/healthz")
            assert r.status_code == 503
            await asyncio.gather(*(_closed_after(r, 10 * READ_TIMEOUT) for r, _ in conns))
            r = await client.get("/healthz")
            assert r.status_code == 200
        for _, w in conns:
            w.close()


async def test_the_webhook_over_tls_is_guarded_too(tmp_path: object) -> None:
    from pathlib import Path

    tls = write_self_signed(Path(str(tmp_path)), hosts=("127.0.0.1",))
    server = WebhookServer(
        create_webhook_app(h.make_state([])),
        certfile=tls.cert_file,
        keyfile=tls.key_file,
        host="127.0.0.1",
        port=0,
        read_timeout=READ_TIMEOUT,
    )
    await server.start()
    try:
        ctx = h.ca_context(tls)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=ctx, server_hostname="127.0.0.1")
        writer.write(b"POST /mutate/pods HTTP/1.1\r\nHost: x\r\nContent-Length: 900\r\n\r\n{")
        await writer.drain()
        assert await _closed_after(reader, 10 * READ_TIMEOUT) == b""
        writer.close()
        async with httpx.AsyncClient(verify=ctx) as client:
            r = await client.post(f"https://127.0.0.1:{server.port}/mutate/pods", content=b"{}")
            assert r.status_code == 400
    finally:
        await server.stop()


async def test_webhook_client_certificates_when_a_client_ca_is_set(tmp_path: object) -> None:
    """``--webhook-client-ca-file``: the API server's client certificate (AdmissionConfiguration
    kubeConfigFile) is required; a caller without one, or with one from another CA, is refused at
    the handshake and never reaches the review."""
    import ssl
    from pathlib import Path

    base = Path(str(tmp_path))
    tls = write_self_signed(base / "serving", hosts=("127.0.0.1",))
    apiserver = write_self_signed(base / "apiserver", hosts=("kube-apiserver",), client=True)
    stranger = write_self_signed(base / "stranger", hosts=("intruder",), client=True)
    state = h.make_state([])
    server = WebhookServer(
        create_webhook_app(state),
        certfile=tls.cert_file,
        keyfile=tls.key_file,
        host="127.0.0.1",
        port=0,
        client_ca_file=apiserver.ca_file,
    )
    await server.start()
    url = f"https://127.0.0.1:{server.port}/mutate/pods"
    review = orjson.dumps(h.review(h.admission_pod("p-0")))
    try:
        for who in (None, stranger):
            ctx = h.ca_context(tls)
            if who is not None:
                ctx.load_cert_chain(who.cert_file, who.key_file)
            async with httpx.AsyncClient(verify=ctx) as client:
                with pytest.raises((httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError, ssl.SSLError)):
                    await client.post(url, content=review)
        ctx = h.ca_context(tls)
        ctx.load_cert_chain(apiserver.cert_file, apiserver.key_file)
        async with httpx.AsyncClient(verify=ctx) as client:
            r = await client.post(url, content=review)
            assert r.status_code == 200 and r.json()["response"]["allowed"] is True
    finally:
        await server.stop()


def test_extender_tls_settings_go_together() -> None:
    import argparse

    from extender.settings import add_serve_arguments, settings_from_args

    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)

    def parse(*argv: str) -> object:
        return settings_from_args(parser.parse_args([*argv, "--webhook-port", "0"]), env={})

    with pytest.raises(ValueError, match="--extender-tls-cert-file and --extender-tls-key-file go together"):
        parse("--extender-tls-cert-file", "/tls/tls.crt")
    with pytest.raises(ValueError, match="--extender-client-ca-file needs the extender on TLS"):
        parse("--extender-client-ca-file", "/tls/ca.crt")
    ok = parse("--extender-tls-cert-file", "a", "--extender-tls-key-file", "b", "--extender-client-ca-file", "c")
    assert ok
