"""``extender.kube.client.request`` as it was before it sent on the session directly (commit
df71e4a, verbatim but for the name): through ``ApiClient.call_api`` with
``_preload_content=False``. Kept only as the reference the direct path is compared with
(tests/kube/test_raw_request.py)."""

from __future__ import annotations

from typing import Any

import aiohttp

from extender.kube.client import DEFAULT_TIMEOUT, Query, RawResponse, _query
from extender.kube.errors import KubeTimeout


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
    headers = {"Content-Type": content_type, "Accept": accept}
    try:
        resp = await api.call_api(
            path,
            method,
            query_params=_query(query),
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=request_timeout,
        )
        try:
            data = await resp.read()
        finally:
            resp.release()
    except TimeoutError as exc:
        raise KubeTimeout(f"{method} {path}: timed out after {request_timeout}s") from exc
    except aiohttp.ClientError as exc:
        raise KubeTimeout(f"{method} {path}: connection failed: {exc}") from exc
    return RawResponse(resp.status, data, {k.lower(): v for k, v in resp.headers.items()})
