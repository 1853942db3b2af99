"""A raw HTTP/1.1 keep-alive client on asyncio streams, shared by the benchmarks.

No client library on purpose: the benchmarks measure the server, and a client library's own
per-request cost (httpx: ~150 µs) would be most of what is measured at these latencies.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl


class RawClient:
    """One connection (plain, or TLS when ``ctx`` is given); ``post`` returns the body of a 2xx."""

    def __init__(
        self, port: int, *, ctx: ssl.SSLContext | None = None, host: str = "127.0.0.1", headers: str = ""
    ) -> None:
        self.port = port
        self.ctx = ctx
        self.host = "localhost" if ctx is not None and host == "127.0.0.1" else host
        self.headers = headers
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes) -> bytes:
        try:
            return await self._post(path, body)
        except (asyncio.IncompleteReadError, ConnectionResetError, BrokenPipeError):
            # the server closed an idle keep-alive connection (uvicorn: after 5 s) before
            # reading the request: reconnect and send it again
            await self.close()
            return await self._post(path, body)

    async def _post(self, path: str, body: bytes) -> bytes:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(
                "127.0.0.1",
                self.port,
                limit=1 << 24,
                ssl=self.ctx,
                server_hostname=self.host if self.ctx is not None else None,
            )
        assert self.reader is not None and self.writer is not None
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n{self.headers}"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        self.writer.write(head + body)
        raw = await self.reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in raw.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        status = int(raw[9:12])
        payload = await self.reader.readexactly(length)
        if not 200 <= status < 300:
            raise RuntimeError(f"HTTP {status}: {payload[:200]!r}")
        return payload

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(Exception):
                await self.writer.wait_closed()
        self.reader = self.writer = None
