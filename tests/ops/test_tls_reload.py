"""``extender.servers.watch_tls``: a server over TLS picks up a rotated certificate from its files
(the webhook, and the extender in the separate layout), over a real TLS handshake on loopback;
a half-written pair keeps the old certificate in service."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import time
from pathlib import Path

import pytest
from starlette.applications import Starlette

from extender.servers import AppServer, watch_tls
from extender.simulate.certs import write_self_signed

pytestmark = pytest.mark.anyio


async def _served_certificate(port: int) -> bytes:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx)
    try:
        sslobj = writer.get_extra_info("ssl_object")
        cert: bytes = sslobj.getpeercert(binary_form=True)
        return cert
    finally:
        writer.close()


def _der(pem_file: Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(pem_file.read_text())


async def _until_served(port: int, want: bytes, limit: float = 10.0) -> bytes:
    deadline = time.monotonic() + limit
    while True:
        got = await _served_certificate(port)
        if got == want or time.monotonic() > deadline:
            return got
        await asyncio.sleep(0.05)


async def test_a_rotated_certificate_is_served_without_a_restart(tmp_path: Path) -> None:
    old = write_self_signed(tmp_path / "old", hosts=("127.0.0.1",))
    new = write_self_signed(tmp_path / "new", hosts=("127.0.0.1",))
    live = tmp_path / "live"
    live.mkdir()
    shutil.copy(old.cert_file, live / "tls.crt")
    shutil.copy(old.key_file, live / "tls.key")
    server = AppServer(Starlette(), host="127.0.0.1", port=0, certfile=live / "tls.crt", keyfile=live / "tls.key")
    await server.start()
    stop = asyncio.Event()
    watcher = asyncio.create_task(watch_tls(server, stop, period=0.05))
    try:
        assert await _served_certificate(server.port) == _der(old.cert_file)
        # a half-written rotation (the certificate of one pair, garbage for the key): kept as it was
        (live / "tls.key").write_text("-----BEGIN EC PRIVATE KEY-----\ntruncated")
        await asyncio.sleep(0.3)
        assert await _served_certificate(server.port) == _der(old.cert_file)
        # the whole new pair: served from the next look on
        shutil.copy(new.key_file, live / "tls.key")
        shutil.copy(new.cert_file, live / "tls.crt")
        assert await _until_served(server.port, _der(new.cert_file)) == _der(new.cert_file)
    finally:
        stop.set()
        await asyncio.wait_for(watcher, 5)
        await server.stop()
