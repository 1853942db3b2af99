"""Fault injection and the request journal.

Faults apply to HTTP requests only (the Python API is never faulted). A fault matches a request
by verb, resource (``pods``, ``pods/binding``, ``quotas/status``, ``*``), optionally group,
namespace and name, and then fires with a probability (``rate``, drawn from a seeded RNG, so runs
are reproducible) until its ``count`` is used up. Firing means: wait ``latency`` seconds, then
(when ``code`` is set) answer that status instead of serving the request — or, with
``after=True``, serve the request and *then* answer the error (the write happened but the client
never learns it: the "timeout that succeeded" case).

Every method may be called from any thread.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from extender.emulator import errors

__all__ = ["VERB_ALIASES", "Fault", "Faults", "Journal", "RequestRecord"]

VERB_ALIASES = {"bind": ("create", "binding"), "evict": ("create", "eviction")}
"""``bind`` = ``create`` on ``pods/binding``; ``evict`` = ``create`` on ``pods/eviction``."""

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One served HTTP request, as the journal keeps it."""

    method: str
    path: str
    query: str
    verb: str
    """Kubernetes verb (get, list, watch, create, update, patch, delete, deletecollection) or ``""``
    for non-resource URLs (discovery, openapi, version)."""
    group: str
    version: str
    resource: str
    subresource: str
    namespace: str
    name: str
    code: int
    content_type: str
    user_agent: str
    time: float


class Journal:
    """Every request the server answered, in order (bounded; thread-safe)."""

    def __init__(self, maxlen: int = 100_000) -> None:
        self._lock = threading.Lock()
        self._records: list[RequestRecord] = []
        self._maxlen = maxlen

    def append(self, record: RequestRecord) -> None:
        with self._lock:
            self._records.append(record)
            if len(self._records) > self._maxlen:
                del self._records[: len(self._records) - self._maxlen]

    def records(self) -> list[RequestRecord]:
        with self._lock:
            return list(self._records)

    def __iter__(self) -> Iterator[RequestRecord]:
        return iter(self.records())

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)

    def clear(self) -> None:
        with self._lock:
            self._records.clear()

    def calls(self) -> set[tuple[str, str, str, str]]:
        """The distinct ``(verb, group, resource, subresource)`` of resource requests."""
        return {(r.verb, r.group, r.resource, r.subresource) for r in self.records() if r.verb}


@dataclass(slots=True)
class Fault:
    """A registered fault; :attr:`hits` counts how often it fired."""

    verb: str
    resource: str
    subresource: str
    group: str | None
    namespace: str | None
    name: str | None
    code: int | None
    rate: float
    count: int | None
    latency: float
    retry_after: int | None
    message: str | None
    after: bool
    user_agent: str | None = None
    hits: int = 0
    _owner: Faults | None = field(default=None, repr=False)

    def matches(  # noqa: PLR0917
        self, verb: str, group: str, resource: str, subresource: str, namespace: str, name: str, user_agent: str = ""
    ) -> bool:
        if self.user_agent is not None and self.user_agent not in user_agent:
            return False
        if self.verb not in ("*", verb):
            return False
        if self.resource not in ("*", resource):
            return False
        if self.subresource not in ("*", subresource):
            return False
        if self.group is not None and self.group != group:
            return False
        if self.namespace is not None and self.namespace != namespace:
            return False
        return self.name is None or self.name == name

    def error(self) -> errors.ApiError:
        code = self.code or 500
        reason = _REASONS.get(code, "InternalError")
        message = self.message or f"injected fault: {code} {reason}"
        details: dict[str, object] = {}
        headers: list[tuple[str, str]] = []
        if self.retry_after is not None:
            details["retryAfterSeconds"] = self.retry_after
            headers.append(("retry-after", str(self.retry_after)))
        return errors.ApiError(code, reason, message, details or None, headers=headers)

    @property
    def exhausted(self) -> bool:
        return self.count is not None and self.hits >= self.count

    def remove(self) -> None:
        if self._owner is not None:
            self._owner.remove(self)


@dataclass(frozen=True, slots=True)
class Firing:
    """What the server must do for one request: sleep, then maybe fail (before or after)."""

    latency: float
    error: errors.ApiError | None
    after: bool


class Faults:
    """The fault table of one emulator. ``seed`` makes ``rate`` draws reproducible."""

    def __init__(self, seed: int = 0, *, drop_watches: Callable[[str | None, bool], int] | None = None) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._rng = random.Random(seed)
        self._drop = drop_watches

    def seed(self, seed: int) -> None:
        with self._lock:
            self._rng.seed(seed)

    def add(
        self,
        verb: str = "*",
        resource: str = "*",
        *,
        code: int | None = None,
        rate: float = 1.0,
        count: int | None = None,
        latency: float = 0.0,
        retry_after: int | None = None,
        group: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
        message: str | None = None,
        after: bool = False,
        user_agent: str | None = None,
    ) -> Fault:
        """Register a fault.

        ``verb``: get, list, watch, create, update, patch, delete, deletecollection, ``bind``
        (= create pods/binding), ``evict`` (= create pods/eviction) or ``*``.
        ``resource``: plural with an optional subresource (``quotas/status``, ``pods/binding``) or
        ``*``; without a subresource only the main resource matches (``pods/*`` matches all).
        ``code``: the status to answer (409, 429, 500, 503…; 429 with ``retry_after`` sets the
        ``Retry-After`` header); None with a ``latency`` only delays.
        ``count``: fire at most this many times (None: forever). ``rate``: probability per request.
        ``user_agent``: only requests whose User-Agent contains this text (one client among many).
        """
        if not 0.0 <= rate <= 1.0:
            raise ValueError("rate must be within [0, 1]")
        if code is None and latency <= 0:
            raise ValueError("a fault needs a code, a latency or both")
        sub = ""
        if verb in VERB_ALIASES:
            verb, sub = VERB_ALIASES[verb]
            resource = resource if resource not in ("*", "") else "pods"
        if resource == "*":
            plural, subresource = "*", "*"
        else:
            plural, _, explicit = resource.partition("/")
            subresource = explicit or sub
        fault = Fault(
            verb=verb,
            resource=plural,
            subresource=subresource,
            group=group,
            namespace=namespace,
            name=name,
            code=code,
            rate=rate,
            count=count,
            latency=latency,
            retry_after=retry_after,
            message=message,
            after=after,
            user_agent=user_agent,
            _owner=self,
        )
        with self._lock:
            self._faults.append(fault)
        return fault

    def remove(self, fault: Fault) -> None:
        with self._lock:
            if fault in self._faults:
                self._faults.remove(fault)

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def active(self) -> list[Fault]:
        with self._lock:
            return [f for f in self._faults if not f.exhausted]

    def drop_watches(self, resource: str | None = None, *, abort: bool = True) -> int:
        """Close open watch streams (of ``resource``'s plural, or all): with ``abort`` the TCP
        connection is cut mid-stream, otherwise the stream ends cleanly. Returns how many."""
        if self._drop is None:
            return 0
        return self._drop(resource, abort)

    def check(  # noqa: PLR0917
        self, verb: str, group: str, resource: str, subresource: str, namespace: str, name: str, user_agent: str = ""
    ) -> Firing | None:
        """Consult the table for one request (called by the server)."""
        latency = 0.0
        error: errors.ApiError | None = None
        after = False
        with self._lock:
            for fault in self._faults:
                if fault.exhausted or not fault.matches(
                    verb, group, resource, subresource, namespace, name, user_agent
                ):
                    continue
                if fault.rate < 1.0 and self._rng.random() >= fault.rate:
                    continue
                fault.hits += 1
                latency += fault.latency
                if fault.code is not None and error is None:
                    error = fault.error()
                    after = fault.after
        if latency == 0.0 and error is None:
            return None
        return Firing(latency, error, after)
