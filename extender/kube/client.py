"""Building a ``kubernetes_asyncio`` ``ApiClient`` and talking raw JSON through it.

The generated models of ``kubernetes_asyncio`` are slow and lossy (unknown fields vanish, a
``Status`` answered by ``pods/binding`` fails to deserialise), so this project reads and writes
plain JSON dicts: :func:`request` sends on the ``ApiClient``'s own session (its authentication,
TLS, proxy and connection pool) and parses the answer with orjson.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp
import orjson
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

from extender.kube.errors import ApiFailure, KubeTimeout

__all__ = [
    "DEFAULT_TIMEOUT",
    "USER_AGENT",
    "ApiClient",
    "RawResponse",
    "close",
    "from_in_cluster",
    "from_kubeconfig",
    "from_url",
    "in_cluster",
    "new_client",
    "request",
    "resource_path",
]

ApiClient = k8s_client.ApiClient
DEFAULT_TIMEOUT = 30.0
"""Seconds for one non-watch request (connect + answer)."""

SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"

Query = Sequence[tuple[str, str]] | Mapping[str, str | int | bool] | None


USER_AGENT = "sky-scheduler"


_PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")


def _client(cfg: Any, user_agent: str | None) -> Any:
    cfg.connection_pool_maxsize = 32
    api = k8s_client.ApiClient(cfg)
    api.user_agent = user_agent or USER_AGENT
    # kubernetes-asyncio opens its aiohttp session with trust_env=True, which makes every request
    # look up proxy settings and ~/.netrc in a worker thread (~0.35 ms a call, measured by
    # bench/extender.py). Without proxy variables that lookup can only find nothing: skip it.
    session = getattr(api.rest_client, "pool_manager", None)
    if session is not None and not any(os.environ.get(v) for v in _PROXY_VARS) and hasattr(session, "_trust_env"):
        session._trust_env = False
    return api


async def from_kubeconfig(
    path: str | os.PathLike[str] | None = None, *, context: str | None = None, user_agent: str | None = None
) -> Any:
    """An ``ApiClient`` for a kubeconfig file (default: ``$KUBECONFIG`` or ``~/.kube/config``)."""
    cfg = k8s_client.Configuration()
    await k8s_config.load_kube_config(
        config_file=str(path) if path is not None else None, context=context, client_configuration=cfg
    )
    return _client(cfg, user_agent)


def from_in_cluster(*, user_agent: str | None = None) -> Any:
    """An ``ApiClient`` from the pod's service account (token re-read as the kubelet rotates it)."""
    cfg = k8s_client.Configuration()
    k8s_config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    return _client(cfg, user_agent)


def from_url(
    url: str,
    *,
    token: str | None = None,
    ca_cert: str | None = None,
    verify_ssl: bool = True,
    user_agent: str | None = None,
) -> Any:
    """An ``ApiClient`` for a server URL (tests, the emulator, ``kubectl proxy``)."""
    cfg = k8s_client.Configuration(host=url.rstrip("/"))
    if token:
        cfg.api_key = {"BearerToken": token}
        cfg.api_key_prefix = {"BearerToken": "Bearer"}
    cfg.ssl_ca_cert = ca_cert
    cfg.verify_ssl = verify_ssl
    return _client(cfg, user_agent)


async def new_client(
    kubeconfig: str | os.PathLike[str] | None = None, *, url: str | None = None, user_agent: str | None = None
) -> Any:
    """The usual resolution: an explicit URL, else an explicit kubeconfig, else in-cluster when
    running in a pod, else the default kubeconfig. ``user_agent`` names the component in the
    apiserver's audit log (default ``sky-scheduler``)."""
    if url:
        return from_url(url, user_agent=user_agent)
    if kubeconfig:
        return await from_kubeconfig(kubeconfig, user_agent=user_agent)
    if in_cluster():
        return from_in_cluster(user_agent=user_agent)
    return await from_kubeconfig(None, user_agent=user_agent)


def in_cluster() -> bool:
    """Running in a pod with a service account token mounted."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and Path(SERVICE_ACCOUNT_TOKEN).exists()


async def close(api: Any) -> None:
    """Close the client's connection pool (safe to call twice)."""
    await api.close()


def resource_path(
    group: str,
    version: str,
    plural: str,
    *,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    """``/api/v1/namespaces/ns/pods/p/binding`` and friends."""
    base = f"/apis/{group}/{version}" if group else f"/api/{version}"
    if namespace:
        base += f"/namespaces/{namespace}"
    base += f"/{plural}"
    if name:
        base += f"/{name}"
        if subresource:
            base += f"/{subresource}"
    return base


@dataclass(frozen=True, slots=True)
class RawResponse:
    status: int
    body: bytes
    headers: Mapping[str, str]

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> Any:
        if not self.body:
            return None
        try:
            return orjson.loads(self.body)
        except orjson.JSONDecodeError:
            return None

    def raise_for_status(self, what: str) -> None:
        if not self.ok:
            raise ApiFailure.from_response(self.status, self.json(), what, self.headers)


def _query(query: Query) -> list[tuple[str, str]]:
    if query is None:
        return []
    items = query.items() if isinstance(query, Mapping) else query
    out: list[tuple[str, str]] = []
    for k, v in items:
        if isinstance(v, bool):
            out.append((k, "true" if v else "false"))
        else:
            out.append((k, str(v)))
    return out


async def request(
    api: Any,
    method: str,
    path: str,
    *,
    query: Query = None,
    body: Any = None,
    content_type: str = "application/json",
    accept: str = "application/json",
    request_timeout: float | None = DEFAULT_TIMEOUT,
) -> RawResponse:
    """One API call, answered raw. Raises :class:`KubeTimeout` on a timeout or a broken
    connection (the caller decides whether a retry is safe); HTTP errors are returned, not raised.

    The request goes straight onto the ``ApiClient``'s own aiohttp session, as
    ``ApiClient.call_api(…, _preload_content=False)`` would send it, without the generated
    client's layers in between (parameter sanitising, a deep copy of the body, stdlib JSON: most
    of a Binding call's cost). Everything that authenticates and routes it is the client's:
    the session's connector holds the TLS context (the CA, the client certificate and key of the
    kubeconfig or the service account), the bearer token comes from the configuration's auth
    settings (which run its refresh hook: a rotated service-account token or an exec plugin's
    new token is picked up), and the client's default headers (``User-Agent``), proxy and TLS
    server name apply. ``body``: bytes as they are, anything else serialised by orjson."""
    headers = {**api.default_headers, "Content-Type": content_type, "Accept": accept}
    if api.cookie:
        headers["Cookie"] = api.cookie
    auth = (await api.configuration.auth_settings()).get("BearerToken")
    if auth:
        headers[auth["key"]] = auth["value"]
    url = api.configuration.host + path
    params = _query(query)
    if params:
        url += "?" + urlencode(params)
    rest = api.rest_client
    options: dict[str, Any] = {
        "headers": headers,
        "timeout": aiohttp.ClientTimeout(total=request_timeout) if request_timeout else aiohttp.ClientTimeout(),
    }
    if body is not None:
        options["data"] = body if isinstance(body, bytes) else orjson.dumps(body)
    if rest.proxy:
        options["proxy"] = rest.proxy
    if rest.proxy_headers:
        options["proxy_headers"] = rest.proxy_headers
    if rest.server_hostname:
        options["server_hostname"] = rest.server_hostname
    try:
        async with rest.pool_manager.request(method, url, **options) as resp:
            data = await resp.read()
    except TimeoutError as exc:
        raise KubeTimeout(f"{method} {path}: timed out after {request_timeout}s") from exc
    except aiohttp.ClientError as exc:
        raise KubeTimeout(f"{method} {path}: connection failed: {exc}") from exc
    return RawResponse(resp.status, data, {k.lower(): v for k, v in resp.headers.items()})
