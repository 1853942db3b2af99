"""Running ASGI apps under uvicorn inside the current event loop (the service runs three:
extender, webhook, ops; tests run them on 127.0.0.1 port 0)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import uvicorn

__all__ = ["AppServer"]

log = logging.getLogger(__name__)


class AppServer:
    """One uvicorn server as an async context manager; ``port`` is the bound port (port 0 works)."""

    def __init__(
        self,
        app: Any,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        ssl_certfile: str | None = None,
        ssl_keyfile: str | None = None,
        name: str = "http",
        log_level: str = "warning",
    ) -> None:
        self.name = name
        self.config = uvicorn.Config(
            app,
            host=host,
            port=port,
            ssl_certfile=ssl_certfile,
            ssl_keyfile=ssl_keyfile,
            log_level=log_level,
            access_log=False,
            lifespan="off",
            loop="none",
            timeout_graceful_shutdown=5,
        )
        self.server = uvicorn.Server(self.config)
        self._task: asyncio.Task[None] | None = None
        self.port = 0

    @property
    def scheme(self) -> str:
        return "https" if self.config.ssl_certfile else "http"

    @property
    def url(self) -> str:
        host = self.config.host
        host = f"[{host}]" if ":" in host else host
        return f"{self.scheme}://{host}:{self.port}"

    async def start(self) -> None:
        self.server.config.setup_event_loop = lambda: None  # type: ignore[method-assign]
        self._task = asyncio.create_task(self.server.serve(), name=f"server {self.name}")
        while not self.server.started:
            if self._task.done():
                self._task.result()  # raises the startup error (port in use, bad certificate, …)
                raise RuntimeError(f"{self.name} server stopped during startup")
            await asyncio.sleep(0.01)
        sockets = [s for server in self.server.servers for s in server.sockets]
        self.port = int(sockets[0].getsockname()[1]) if sockets else self.config.port
        log.info("%s listening on %s", self.name, self.url)

    async def stop(self) -> None:
        if self._task is None:
            return
        self.server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

    async def __aenter__(self) -> AppServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
