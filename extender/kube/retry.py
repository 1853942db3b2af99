"""How the writer reads the API's answers and paces its retries: pure policy, no I/O.

This module does NOT write to the Kubernetes API (only :mod:`extender.kube.writer` does). It says
which HTTP answers are transient (worth another attempt), which node a Binding's 409 names as the
pod's, and how long to wait before the next attempt: jittered exponential back-off, at least the
server's ``Retry-After`` up to the cap.
"""

from __future__ import annotations

import random
import re
from typing import Final

__all__ = ["TRANSIENT", "already_assigned_to", "pause"]

TRANSIENT: Final = frozenset({429, 500, 502, 503, 504})
"""HTTP codes retried (besides timeouts and broken connections)."""

_ALREADY_ASSIGNED: Final = re.compile(r'is already assigned to node "([^"]*)"')


def already_assigned_to(message: str) -> str | None:
    """The node a Binding's 409 ``message`` says the pod is already assigned to, if it says so."""
    m = _ALREADY_ASSIGNED.search(message)
    return m.group(1) if m else None


def pause(delay: float, backoff_max: float, retry_after: float | None, rng: random.Random) -> float:
    """Seconds to wait before the next attempt: ``delay`` capped at ``backoff_max`` and jittered
    to 50–100 %, but at least ``retry_after`` (itself capped) when the server asked for it."""
    wait = min(backoff_max, delay) * (0.5 + 0.5 * rng.random())
    if retry_after is not None:
        wait = max(wait, min(retry_after, backoff_max))
    return wait
