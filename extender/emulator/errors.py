"""API errors as the Kubernetes API server reports them: a ``meta/v1`` ``Status`` with a code.

Every failure the emulator answers, over HTTP or through its Python API, is an :class:`ApiError`
carrying the exact ``Status`` document the apiserver would send (``reason``, ``details.causes``
…), so a client sees the same bytes whichever path it takes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ApiError",
    "Cause",
    "already_exists",
    "bad_request",
    "conflict",
    "expired",
    "forbidden",
    "internal_error",
    "invalid",
    "method_not_allowed",
    "not_acceptable",
    "not_found",
    "stale_conflict",
    "status_success",
    "too_large",
    "unsupported_media_type",
]


@dataclass(frozen=True, slots=True)
class Cause:
    """One ``details.causes[]`` entry: ``reason`` is e.g. ``FieldValueInvalid``."""

    field: str
    reason: str
    message: str

    def to_api(self) -> dict[str, str]:
        return {"reason": self.reason, "message": self.message, "field": self.field}


class ApiError(Exception):
    """An API failure; :attr:`status` is the ``Status`` body, :attr:`code` its HTTP code."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        *,
        headers: Sequence[tuple[str, str]] = (),
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = tuple(headers)

    @property
    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body

    def __repr__(self) -> str:
        return f"ApiError({self.code}, {self.reason!r}, {self.message!r})"


def _details(group: str, kind: str, name: str | None) -> dict[str, Any]:
    details: dict[str, Any] = {"kind": kind}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    return details


def _qualified(group: str, resource: str) -> str:
    return f"{resource}.{group}" if group else resource


def not_found(group: str, resource: str, name: str) -> ApiError:
    return ApiError(
        404, "NotFound", f'{_qualified(group, resource)} "{name}" not found', _details(group, resource, name)
    )


def already_exists(group: str, resource: str, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{_qualified(group, resource)} "{name}" already exists',
        _details(group, resource, name),
    )


def conflict(group: str, resource: str, name: str, why: str) -> ApiError:
    """``Operation cannot be fulfilled on <resource> "<name>": <why>`` (reason ``Conflict``)."""
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(group, resource)} "{name}": {why}',
        _details(group, resource, name),
    )


def stale_conflict(group: str, resource: str, name: str) -> ApiError:
    return conflict(
        group,
        resource,
        name,
        "the object has been modified; please apply your changes to the latest version and try again",
    )


def invalid(group: str, kind: str, name: str, causes: Sequence[Cause]) -> ApiError:
    """422 ``Invalid``, message in the apiserver's ``Kind "name" is invalid: [...]`` form."""
    qualified = f"{kind}.{group}" if group else kind
    parts = [f"{c.field}: {c.message}" if c.field else c.message for c in causes]
    joined = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    details = _details(group, kind, name)
    details["causes"] = [c.to_api() for c in causes]
    return ApiError(422, "Invalid", f'{qualified} "{name}" is invalid: {joined}', details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def forbidden(message: str) -> ApiError:
    return ApiError(403, "Forbidden", message)


def method_not_allowed(method: str, what: str) -> ApiError:
    return ApiError(
        405, "MethodNotAllowed", f"the server does not allow this method on the requested resource ({method} {what})"
    )


def not_acceptable(accept: str) -> ApiError:
    return ApiError(
        406,
        "NotAcceptable",
        f"the server was unable to respond with a content type that the client supports ({accept})",
    )


def unsupported_media_type(content_type: str, accepted: Sequence[str]) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format ({content_type}) - accepted media types include: "
        + ", ".join(accepted),
    )


def too_large(limit: int) -> ApiError:
    return ApiError(413, "RequestEntityTooLarge", f"the request body is larger than the limit of {limit} bytes")


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def timeout() -> ApiError:
    """504 ``Timeout``: the request's own deadline (``?timeout=``) passed before it was done."""
    return ApiError(
        504, "Timeout", "Timeout: request did not complete within the requested timeout - context deadline exceeded"
    )


def internal_error(message: str) -> ApiError:
    return ApiError(500, "InternalError", f"Internal error occurred: {message}")


def status_success(code: int, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``Status`` a successful binding / eviction / delete-with-status answers."""
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code}
    if details:
        body["details"] = details
    return body
