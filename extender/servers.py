"""Running an ASGI app under uvicorn inside the caller's event loop.

One class for every HTTP server the project runs: the extender and ops endpoints, the
admission webhook (HTTPS, certificate reloadable after a rotation) and the Kubernetes API
emulator. ::

    server = AppServer(app, host="0.0.0.0", port=9443, certfile="/tls/tls.crt", keyfile="/tls/tls.key")
    port = await server.start()   # port=0 picks a free port (tests); returns the bound port
    server.reload_tls()           # the Secret was rotated: new handshakes use the new pair
    await server.stop()

Every connection is guarded (:class:`GuardedProtocol`): a request must arrive whole — request line,
headers and body — within ``read_timeout`` seconds of its first byte (or of the connection's
opening), else the connection is closed (``408`` when no response is under way); headers above
``max_header_bytes`` get ``431``. uvicorn itself bounds only idle keep-alive connections
(``timeout_keep_alive``): without this a client sending half a request held a connection, and
its memory, forever. ``max_connections`` caps open connections per server (uvicorn's
``limit_concurrency``: above it new requests are answered ``503`` at once).

The socket is bound here, not by uvicorn, so that port 0 works and the bound port is known
before the first request, and so that it is created with ``IPPROTO_TCP`` (asyncio sets
``TCP_NODELAY`` only on accepted sockets whose protocol says TCP; without it every response
waits out Nagle plus delayed ACK, ~40 ms). No signal handlers are installed: the process
owner (``sky-scheduler serve``, a test, the simulator) decides what SIGTERM does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Generator
from pathlib import Path
from types import TracebackType
from typing import Any

import uvicorn
from starlette.types import Receive, Scope
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["AppServer", "BodyTooLarge", "ClientGone", "GuardedProtocol", "receive_body"]

DEFAULT_READ_TIMEOUT = 5.0
DEFAULT_MAX_CONNECTIONS = 1000
DEFAULT_MAX_HEADER_BYTES = 64 * 1024
_408 = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
_431 = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"

log = logging.getLogger(__name__)


class _Server(uvicorn.Server):
    """uvicorn without signal handling: the server lives inside someone else's process."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a per-request read deadline and a request-head size cap.

    The deadline is armed when the connection opens and when a request begins (its first byte),
    and disarmed when the request's last byte has arrived; if it fires first, the connection is
    closed — an app still waiting for the body sees ``http.disconnect``. Set per server through
    the class attributes of a subclass (:meth:`configured`)."""

    read_timeout: float = DEFAULT_READ_TIMEOUT
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES

    @classmethod
    def configured(cls, read_timeout: float, max_header_bytes: int) -> type[GuardedProtocol]:
        return type("GuardedProtocol", (cls,), {"read_timeout": read_timeout, "max_header_bytes": max_header_bytes})

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._deadline: asyncio.TimerHandle | None = None
        self._in_headers = True  # what arrives next belongs to a request's head
        self._head_bytes = 0  # bytes received since the head began
        self._head_size = 0  # request line and headers of the current request, as parsed
        self._rejected = False
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._rejected:
            return
        if self._deadline is None:
            self._arm()  # the first byte of a request after a keep-alive pause
        if self._in_headers:
            self._head_bytes += len(data)
        super().data_received(data)
        # still in the head after all of it: every byte since the head began is head
        if self._rejected or (self._in_headers and self._head_bytes > self.max_header_bytes):
            self._rejected = True
            self._refuse(_431, "request head above %d bytes", self.max_header_bytes)

    def on_message_begin(self) -> None:
        self._arm()
        self._in_headers = True
        self._head_size = 0
        super().on_message_begin()

    def on_url(self, url: bytes) -> None:
        self._head_size += len(url)
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_size += len(name) + len(value) + 4
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_headers = False
        if self._head_size > self.max_header_bytes:
            self._rejected = True  # no request cycle: data_received answers 431
            return
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if not self._rejected:
            super().on_body(body)

    def on_message_complete(self) -> None:
        self._disarm()
        if self._rejected:
            return
        self._in_headers, self._head_bytes = True, 0
        super().on_message_complete()

    # --- the deadline ------------------------------------------------------------------------
    def _arm(self) -> None:
        if self._deadline is None:
            self._deadline = self.loop.call_later(self.read_timeout, self._timed_out)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _timed_out(self) -> None:
        self._deadline = None
        responding = self.cycle is not None and not self.cycle.response_complete
        self._refuse(b"" if responding else _408, "request not received whole within %.3g s", self.read_timeout)

    def _refuse(self, response: bytes, why: str, arg: float) -> None:
        if self.transport.is_closing():
            return
        log.debug("closing the connection of %s: " + why, self.client, arg)
        if response:
            self.transport.write(response)
        self.transport.close()


class AppServer:
    """One uvicorn server; plain HTTP, or HTTPS when ``certfile`` and ``keyfile`` are given."""

    def __init__(
        self,
        app: Any,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        certfile: str | Path | None = None,
        keyfile: str | Path | None = None,
        name: str = "http",
        log_level: str = "warning",
        keep_alive: int = 30,
        graceful_shutdown: int = 2,
        read_timeout: float = DEFAULT_READ_TIMEOUT,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES,
        client_ca_file: str | Path | None = None,
    ) -> None:
        """``client_ca_file``: require every client to present a certificate signed by this CA
        (mutual TLS; HTTPS only)."""
        if (certfile is None) != (keyfile is None):
            raise ValueError(f"{name} server: a TLS certificate needs its key and a key its certificate")
        if client_ca_file is not None and certfile is None:
            raise ValueError(f"{name} server: client certificates need TLS (a certificate and key)")
        self.app = app
        self.host = host
        self.requested_port = port
        self.certfile = str(certfile) if certfile is not None else None
        self.keyfile = str(keyfile) if keyfile is not None else None
        self.name = name
        self.log_level = log_level
        self.keep_alive = keep_alive
        self.graceful_shutdown = graceful_shutdown
        self.read_timeout = read_timeout
        self.max_connections = max_connections
        self.max_header_bytes = max_header_bytes
        self.client_ca_file = str(client_ca_file) if client_ca_file is not None else None
        self._sock: socket.socket | None = None
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None

    # --- address ---------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        if self._sock is None:
            raise RuntimeError(f"the {self.name} server is not running")
        port: int = self._sock.getsockname()[1]
        return port

    @property
    def scheme(self) -> str:
        return "https" if self.certfile else "http"

    @property
    def url(self) -> str:
        """Where a client on this machine reaches the server (a wildcard address means loopback)."""
        host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(self.host, self.host)
        host = f"[{host}]" if ":" in host else host
        return f"{self.scheme}://{host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._server is not None

    # --- lifecycle -------------------------------------------------------------------------------
    def _bind(self) -> socket.socket:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.requested_port))
        except BaseException:
            sock.close()
            raise
        sock.set_inheritable(True)
        return sock

    def _config(self) -> uvicorn.Config:
        for what, path in (("certificate", self.certfile), ("key", self.keyfile), ("client CA", self.client_ca_file)):
            if path is not None and not Path(path).is_file():
                raise FileNotFoundError(f"{self.name} TLS {what} file {path!r} does not exist")
        config = uvicorn.Config(
            self.app,
            ssl_certfile=self.certfile,
            ssl_keyfile=self.keyfile,
            ssl_ca_certs=self.client_ca_file,
            ssl_cert_reqs=ssl.CERT_REQUIRED if self.client_ca_file else ssl.CERT_NONE,
            log_config=None,
            log_level=self.log_level,
            access_log=False,
            lifespan="off",
            proxy_headers=False,
            server_header=False,
            date_header=False,
            ws="none",
            timeout_graceful_shutdown=self.graceful_shutdown,
            timeout_keep_alive=self.keep_alive,
            http=GuardedProtocol.configured(self.read_timeout, self.max_header_bytes),
            limit_concurrency=self.max_connections,
        )
        config.load()  # TLS errors surface here, before the socket is bound
        return config

    async def start(self) -> int:
        """Serve from the running loop; returns the bound port once the socket accepts connections.

        Raises ``OSError`` for a port in use and ``ssl.SSLError`` / ``FileNotFoundError`` for a bad
        certificate or key.
        """
        if self._server is not None:
            raise RuntimeError(f"the {self.name} server is already running")
        config = self._config()
        self._sock = self._bind()
        server = _Server(config)
        self._server = server
        self._task = asyncio.create_task(server.serve(sockets=[self._sock]), name=f"server {self.name}")
        while not server.started:
            if self._task.done():
                self._server = None
                self._close_socket()
                self._task.result()  # raises the startup error
                raise RuntimeError(f"the {self.name} server exited during startup")
            await asyncio.sleep(0.005)
        log.info("%s listening on %s", self.name, self.url)
        return self.port

    def reload_tls(self) -> None:
        """Load the certificate and key files again (after a rotation); open connections keep theirs."""
        server = self._server
        if server is None or server.config.ssl is None or self.certfile is None:
            raise RuntimeError(f"the {self.name} server is not serving TLS")
        context: ssl.SSLContext = server.config.ssl
        context.load_cert_chain(self.certfile, self.keyfile)

    async def stop(self) -> None:
        """Stop accepting, let requests in flight finish (up to ``graceful_shutdown`` seconds)."""
        server, task = self._server, self._task
        if server is None or task is None:
            return
        server.should_exit = True
        try:
            await task
        finally:
            self._server = None
            self._task = None
            self._close_socket()

    def _close_socket(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    async def __aenter__(self) -> AppServer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


async def watch_tls(server: AppServer, stop: asyncio.Event, *, period: float = 60.0) -> None:
    """Reload ``server``'s certificate and key whenever their files change (cert-manager or a
    rotated Secret rewrites them: the kubelet swaps the mounted files), until ``stop`` is set.
    A failed load (half-written files) keeps the old pair and is retried at the next look."""
    paths = [p for p in (server.certfile, server.keyfile) if p]

    def stamp() -> tuple[float, ...]:
        try:
            return tuple(Path(p).stat().st_mtime for p in paths)
        except OSError:
            return ()

    seen = stamp()
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=period)
        now = stamp()
        if now and now != seen:
            try:
                server.reload_tls()
                log.info("%s certificate reloaded", server.name)
                seen = now
            except (OSError, ValueError, ssl.SSLError) as exc:
                log.warning("%s certificate reload failed: %s", server.name, exc)


# --- request bodies --------------------------------------------------------------------------
class BodyTooLarge(Exception):
    """The request body is above the configured limit (answered 413)."""


class ClientGone(Exception):
    """The client disconnected before its request body arrived."""


async def receive_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The request body from ASGI ``http.request`` messages (until ``more_body`` is false),
    refusing more than ``limit`` bytes: from the declared ``Content-Length`` before reading, or
    while streaming a body without one. ``http.disconnect`` raises :class:`ClientGone`."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            if value.isdigit() and int(value) > limit:
                raise BodyTooLarge(f"request body of {value.decode()} bytes exceeds the limit of {limit} bytes")
            break
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        kind = message["type"]
        if kind == "http.disconnect":
            raise ClientGone
        if kind != "http.request":
            continue
        chunk: bytes = message.get("body", b"")
        if chunk:
            size += len(chunk)
            if size > limit:
                raise BodyTooLarge(f"request body exceeds the limit of {limit} bytes")
            chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)
