"""Typed errors of the Kubernetes plumbing (``client``, ``informer``, ``writer``, ``leader``).

``ApiFailure`` and its subclasses carry an apiserver ``Status`` (one class per HTTP code that
callers branch on); the others describe what the writer concluded after its retries.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "AlreadyExists",
    "ApiFailure",
    "BadRequest",
    "BindConflict",
    "Conflict",
    "Forbidden",
    "GiveUp",
    "Gone",
    "Invalid",
    "KubeError",
    "KubeTimeout",
    "NotFound",
    "NotLeading",
    "ServerError",
    "TooManyRequests",
    "WriteConflict",
]


class KubeError(Exception):
    """Base of every error raised by ``extender.kube``."""


class KubeTimeout(KubeError):
    """A request timed out or its connection broke: the write may or may not have happened."""


class ApiFailure(KubeError):
    """The apiserver answered an error ``Status``."""

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        *,
        body: Any = None,
        retry_after: float | None = None,
        what: str = "",
    ) -> None:
        super().__init__(f"{what}: {status} {reason}: {message}" if what else f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body
        self.retry_after = retry_after

    @staticmethod
    def from_response(status: int, body: Any, what: str = "", headers: Mapping[str, str] | None = None) -> ApiFailure:
        """The most specific subclass for an error answer."""
        reason = ""
        message = ""
        retry_after: float | None = None
        if isinstance(body, dict):
            reason = str(body.get("reason") or "")
            message = str(body.get("message") or "")
            details = body.get("details")
            if isinstance(details, dict) and isinstance(details.get("retryAfterSeconds"), int | float):
                retry_after = float(details["retryAfterSeconds"])
        if headers and retry_after is None:
            raw = headers.get("retry-after")
            if raw:
                try:
                    retry_after = float(raw)
                except ValueError:
                    retry_after = None
        cls: type[ApiFailure] = _BY_STATUS.get(status, ServerError if status >= 500 else ApiFailure)
        if status == 409 and reason == "AlreadyExists":
            cls = AlreadyExists
        return cls(
            status, reason or "Unknown", message or f"HTTP {status}", body=body, retry_after=retry_after, what=what
        )


class BadRequest(ApiFailure):
    """400."""


class Forbidden(ApiFailure):
    """403 (RBAC: the chart does not grant what the code uses)."""


class NotFound(ApiFailure):
    """404: the object (or its resource) does not exist."""


class Conflict(ApiFailure):
    """409 ``Conflict``: stale resourceVersion, failed precondition, pod already bound…"""


class AlreadyExists(Conflict):
    """409 ``AlreadyExists`` on create."""


class Gone(ApiFailure):
    """410: a resourceVersion or continue token too old."""


class Invalid(ApiFailure):
    """422: the object fails validation."""


class TooManyRequests(ApiFailure):
    """429: throttled (``retry_after`` seconds)."""


class ServerError(ApiFailure):
    """5xx."""


_BY_STATUS: dict[int, type[ApiFailure]] = {
    400: BadRequest,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
}


class WriteConflict(KubeError):
    """An optimistic-concurrency write still conflicted after every attempt."""

    def __init__(self, message: str, *, attempts: int = 0) -> None:
        super().__init__(message)
        self.attempts = attempts


class BindConflict(WriteConflict):
    """The pod is already bound to another node (or is being deleted, or its UID changed)."""

    def __init__(self, message: str, *, node: str | None = None) -> None:
        super().__init__(message)
        self.node = node


class NotLeading(KubeError):
    """A leader's write not sent: this replica cannot be sure it still holds the lease
    (``KubeWriter.fenced``)."""


class GiveUp(KubeError):
    """Transient failures (429, 5xx, timeouts) persisted through every retry."""

    def __init__(self, message: str, *, attempts: int, last: BaseException | None = None) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.last = last
