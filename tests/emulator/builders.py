"""Object builders for the emulator's tests."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import aiohttp
import orjson
from kubernetes_asyncio.client import ApiException

R = TypeVar("R")


def call_raw(method: Callable[..., Awaitable[R]], *args: object, **kwargs: object) -> Awaitable[R]:
    """``method(*args, **kwargs)`` for a generated kubernetes-asyncio API method, with what it takes
    at run time but its stubs do not name: a body as a plain JSON dict (the stubs ask for the model
    class; ``ApiClient.sanitize_for_serialization`` sends a dict as it is, so these tests send the
    exact JSON they mean) and ``_content_type`` (which forces a patch's content type). The
    answer keeps the method's own type."""
    return method(*args, **kwargs)


async def call_unparsed(
    method: Callable[..., Awaitable[object]], *args: object, **kwargs: object
) -> aiohttp.ClientResponse:
    """:func:`call_raw` with ``_preload_content=False``: the HTTP response itself, unread (the
    stubs type it as the parsed model)."""
    response = await method(*args, _preload_content=False, **kwargs)
    assert isinstance(response, aiohttp.ClientResponse)
    return response


def error_body(exc: ApiException) -> dict[str, Any]:
    """The Status an API error answered (the client keeps it unparsed, and types it optional)."""
    assert exc.body is not None, f"{exc.status} without a body"
    status: dict[str, Any] = orjson.loads(exc.body)
    return status


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def pod(name: str, namespace: str, *, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}], **spec},
    }
    return body


def widget_crd(
    group: str,
    *,
    plural: str = "widgets",
    kind: str = "Widget",
    scope: str = "Namespaced",
    status: bool = True,
    columns: list[dict[str, Any]] | None = None,
    short_names: list[str] | None = None,
) -> dict[str, Any]:
    """A small CRD whose schema exercises the validator (not the project's CRDs)."""
    version: dict[str, Any] = {
        "name": "v1",
        "served": True,
        "storage": True,
        "schema": {
            "openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {
                        "type": "object",
                        "required": ["size"],
                        "properties": {
                            "size": {"type": "integer", "minimum": 1},
                            "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
                            "port": {"x-kubernetes-int-or-string": True},
                            "note": {"type": "string", "nullable": True},
                            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                            "items": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "properties": {"name": {"type": "string"}, "weight": {"type": "number"}},
                                },
                            },
                        },
                    },
                    "status": {
                        "type": "object",
                        "properties": {"phase": {"type": "string"}, "nodeName": {"type": "string"}},
                    },
                },
            }
        },
    }
    if status:
        version["subresources"] = {"status": {}}
    if columns is not None:
        version["additionalPrinterColumns"] = columns
    names: dict[str, Any] = {"plural": plural, "singular": kind.lower(), "kind": kind}
    if short_names:
        names["shortNames"] = short_names
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {"group": group, "scope": scope, "names": names, "versions": [version]},
    }
