"""The agents' heartbeat: ``status.observedAt`` / ``status.agent`` of each NodeTopology they check.

``spec`` only moves when the topology does, so it cannot tell a healthy agent from a dead one. After
a round that checked a node (its inputs were complete enough to publish, and publishing — if
needed — succeeded), the agent writes ``status: {observedAt: <now, RFC 3339 UTC>, agent: <who>}``
through the sink's status write. To keep 5,000 nodes polling every 10 s off the API server it is
throttled here, per node and in memory: a heartbeat is written when the spec or labels changed this
round, or when the last one this process wrote for the node is ``interval`` seconds old or more
(so a restarted agent writes one on its first round). ``interval`` 0 disables heartbeats.

The heartbeat is not a change: it never sets ``PublishOutcome.changed`` and a failing one is only
logged by the agent (once, through its :class:`~discovery.common.conditions.ConditionLog`) and
retried next round.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable

from discovery.common.sink import TopologySink
from extender.cache.convert import format_time

__all__ = ["DEFAULT_HEARTBEAT_SECONDS", "Heartbeats", "agent_identity", "default_instance"]

DEFAULT_HEARTBEAT_SECONDS = 300.0


def default_instance() -> str:
    """This process's name in ``status.agent``: ``$POD_NAME`` (downward API), else the hostname."""
    return os.environ.get("POD_NAME") or socket.gethostname()


def agent_identity(kind: str, instance: str | None = None) -> str:
    """``<kind>/<instance>``, e.g. ``roce/sky-scheduler-roce-7x2kq`` (instance: :func:`default_instance`)."""
    return f"{kind}/{instance or default_instance()}"


class Heartbeats:
    """Per-node heartbeat throttle of one agent.

    ``clock`` (monotonic) times the interval; ``wall_clock`` (epoch seconds) gives ``observedAt``.
    """

    def __init__(
        self,
        agent: str,
        interval: float = DEFAULT_HEARTBEAT_SECONDS,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        if interval < 0:
            raise ValueError("the heartbeat interval must be 0 (off) or positive")
        self.agent = agent
        self.interval = interval
        self._clock = clock
        self._wall_clock = wall_clock
        self._last: dict[str, float] = {}

    @property
    def enabled(self) -> bool:
        return self.interval > 0

    def due(self, node: str, *, changed: bool) -> bool:
        """Whether a heartbeat for ``node`` should be written after this round."""
        if not self.enabled:
            return False
        last = self._last.get(node)
        return changed or last is None or self._clock() - last >= self.interval

    def forget(self, node: str) -> None:
        """Write the next heartbeat of ``node`` at once (e.g. its object was found missing)."""
        self._last.pop(node, None)

    async def beat(self, sink: TopologySink, node: str, *, changed: bool) -> bool | None:
        """Write the heartbeat of ``node`` if due. None: not due (or disabled); True: written;
        False: the node has no NodeTopology to carry it (nothing written). Raises what the sink
        raises. After a failure or a False, the next call is due whatever the interval."""
        if not self.due(node, changed=changed):
            return None
        now = self._clock()
        try:
            written = await sink.heartbeat(node, format_time(self._wall_clock()), self.agent)
        except BaseException:
            self._last.pop(node, None)  # due again next round
            raise
        if written:
            self._last[node] = now
        else:
            self._last.pop(node, None)
        return written
