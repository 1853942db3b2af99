"""Serving the webhook app over HTTPS, inside the caller's event loop.

::

    server = WebhookServer(create_app(state), host="0.0.0.0", port=9443,
                           certfile="/tls/tls.crt", keyfile="/tls/tls.key")
    port = await server.start()      # port=0 picks a free port (tests); returns the bound port
    ...
    server.reload_tls()              # the Secret was rotated: new handshakes use the new pair
    await server.stop()

kube-apiserver only calls webhooks over HTTPS, so the certificate and key are required. The
server itself is the project's one :class:`~extender.servers.AppServer`.
"""

from __future__ import annotations

from pathlib import Path

from starlette.types import ASGIApp

from extender.servers import DEFAULT_MAX_CONNECTIONS, DEFAULT_READ_TIMEOUT, AppServer

__all__ = ["WebhookServer", "start_webhook_server"]


class WebhookServer(AppServer):
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
        read_timeout: float = DEFAULT_READ_TIMEOUT,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        client_ca_file: str | Path | None = None,
    ) -> None:
        super().__init__(
            app,
            host=host,
            port=port,
            certfile=certfile,
            keyfile=keyfile,
            name="webhook",
            log_level=log_level,
            keep_alive=keep_alive,
            read_timeout=read_timeout,
            max_connections=max_connections,
            client_ca_file=client_ca_file,
        )


async def start_webhook_server(
    app: ASGIApp, *, certfile: str | Path, keyfile: str | Path, host: str = "0.0.0.0", port: int = 9443
) -> WebhookServer:
    """Start serving ``app`` over HTTPS; the returned server knows its bound ``port``."""
    server = WebhookServer(app, certfile=certfile, keyfile=keyfile, host=host, port=port)
    await server.start()
    return server
