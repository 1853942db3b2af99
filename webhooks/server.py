"""Serving the webhook app over HTTPS with uvicorn, inside the caller's event loop.

::

    server = WebhookServer(create_app(state), host="0.0.0.0", port=9443,
                           certfile="/tls/tls.crt", keyfile="/tls/tls.key")
    port = await server.start()      # port=0 picks a free port (tests); returns the bound port
    ...
    server.reload_tls()              # the Secret was rotated: new handshakes use the new pair
    await server.stop()

The socket is bound by us (so port 0 works and the bound port is known before the first
request); uvicorn wraps it with TLS from the certificate and key files. No signal handlers are
installed: the service owns the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import Generator
from pathlib import Path
from types import TracebackType

import uvicorn
from starlette.types import ASGIApp

__all__ = ["WebhookServer", "start_webhook_server"]


class _Server(uvicorn.Server):
    """uvicorn without signal handling: the webhook lives inside the service's process."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class WebhookServer:
    def __init__(
        self,
        app: ASGIApp,
        *,
        certfile: str | Path,
        keyfile: str | Path,
        host: str = "0.0.0.0",
        port: int = 9443,
        log_level: str = "warning",
        keep_alive: int = 30,
    ) -> None:
        self.app = app
        self.host = host
        self.requested_port = port
        self.certfile = str(certfile)
        self.keyfile = str(keyfile)
        self.log_level = log_level
        self.keep_alive = keep_alive
        self._sock: socket.socket | None = None
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        if self._sock is None:
            raise RuntimeError("the webhook server is not running")
        port: int = self._sock.getsockname()[1]
        return port

    @property
    def running(self) -> bool:
        return self._server is not None

    def _bind(self) -> socket.socket:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets whose proto says TCP
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.requested_port))
        sock.set_inheritable(True)
        return sock

    async def start(self) -> int:
        """Serve from the running loop; returns the bound port once the socket accepts connections.

        Raises ``OSError`` for a port in use and ``ssl.SSLError`` / ``FileNotFoundError`` for a bad
        certificate or key.
        """
        if self._server is not None:
            raise RuntimeError("the webhook server is already running")
        config = self._config()
        self._sock = self._bind()
        server = _Server(config)
        self._server = server
        self._task = asyncio.create_task(server.serve(sockets=[self._sock]), name="sky-webhook")
        while not server.started:
            if self._task.done():
                self._server = None
                self._close_socket()
                self._task.result()
                raise RuntimeError("the webhook server exited during startup")
            await asyncio.sleep(0.005)
        return self.port

    def _config(self) -> uvicorn.Config:
        for what, path in (("certificate", self.certfile), ("key", self.keyfile)):
            if not Path(path).is_file():
                raise FileNotFoundError(f"webhook TLS {what} file {path!r} does not exist")
        config = uvicorn.Config(
            self.app,
            ssl_certfile=self.certfile,
            ssl_keyfile=self.keyfile,
            log_config=None,
            log_level=self.log_level,
            access_log=False,
            lifespan="off",
            proxy_headers=False,
            server_header=False,
            date_header=False,
            ws="none",
            timeout_graceful_shutdown=2,
            timeout_keep_alive=self.keep_alive,
        )
        config.load()  # TLS errors surface here, before the socket is bound
        return config

    def reload_tls(self) -> None:
        """Load the certificate and key files again (after a rotation); open connections keep theirs."""
        server = self._server
        if server is None or server.config.ssl is None:
            raise RuntimeError("the webhook server is not running")
        context: ssl.SSLContext = server.config.ssl
        context.load_cert_chain(self.certfile, self.keyfile)

    async def stop(self) -> None:
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

    async def __aenter__(self) -> WebhookServer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


async def start_webhook_server(
    app: ASGIApp, *, certfile: str | Path, keyfile: str | Path, host: str = "0.0.0.0", port: int = 9443
) -> WebhookServer:
    """Start serving ``app`` over HTTPS; the returned server knows its bound ``port``."""
    server = WebhookServer(app, certfile=certfile, keyfile=keyfile, host=host, port=port)
    await server.start()
    return server
