"""Background work that leaves the event loop to the verbs: at most a share of the loop's time.

A burst cycle's writes (16,000 quota statuses, then the pod patches and the PodGroup statuses)
are many small steps on the event loop — building a request, applying its answer to the cache,
logging — each well under a millisecond, but sixteen of them in flight at once. Unpaced they took
the loop whenever it had a turn: on ``bench/service_burst.py`` the loop was busy 100 % for two
seconds after the first write, and a verb's request waited behind every answer that had arrived,
so its latency grew by the whole backlog (1.2 s at p99, quiet p99 10 ms). Fewer writes in flight
would only shift the number; the rule is a share.

:class:`LoopShare` is a token bucket of loop time. Every step of a paced coroutine (from one of its
awaits to the next, everything it runs on the loop: our code and the HTTP client's) is timed and
paid from the bucket, which refills at ``share`` seconds per second up to ``burst`` seconds. A step
that finds the bucket in debt first sleeps until it is not: a timer sleep, so the loop's next turns
serve whatever else is ready (the extender's, the webhook's and the ops port's requests) before the
background work goes on. The verbs are never paced; the background work is never starved (it
always gets ``share`` of the loop when it wants it).

The binder's share is 0.25 (``BinderLoop(loop_share=…)``), measured on that bench: quiet, the
verbs keep the loop 11–15 % busy; each second of paced write steps brings about 0.4 s of loop work
outside them (the HTTP client's protocol callbacks, the informer's watch events of the same
writes); 0.15 + 1.4 × share stays at or under half the loop — queueing behind the writes then
adds about one step to a request — up to share 0.25. Unpaced, 16 writes in flight took 83–100 %.

Pacing only delays when a step *starts*: a step runs as written, so code that checks and then
changes the cache within one step (``await gate.writable()`` and what follows it) stays atomic.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, Generic, TypeVar

__all__ = ["LoopShare"]

T = TypeVar("T")

_EPSILON = 1e-9
"""A debt this small is none (a sleep for it might not move the clock: the wait would not end)."""


class LoopShare:
    """At most ``share`` of the event loop's time (over any window), in bursts of at most ``burst``
    seconds (plus one step), for the coroutines run through :meth:`run`."""

    def __init__(
        self,
        share: float = 0.5,
        burst: float = 0.002,
        *,
        clock: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if not 0 < share <= 1:
            raise ValueError("share must be in (0, 1]")
        if burst <= 0:
            raise ValueError("burst must be positive")
        self.share = share
        self.burst = burst
        self._clock = clock
        self._sleep = sleep
        self._tokens = burst
        self._last = clock()
        self.spent = 0.0
        """Seconds of loop time the paced steps took, in all."""
        self.waited = 0.0
        """Seconds the paced coroutines slept to keep to the share, in all (summed over them)."""

    def run(self, coro: Coroutine[Any, Any, T]) -> Awaitable[T]:
        """``await share.run(coro)``: ``coro`` to completion, each of its steps paced."""
        return _Paced(self, coro)

    def debt(self) -> float:
        """Seconds to wait before the next step may start (0: it may start now)."""
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.share)
        self._last = now
        return 0.0 if self._tokens >= -_EPSILON else -self._tokens / self.share

    def pay(self, seconds: float) -> None:
        self._tokens -= seconds
        self.spent += seconds

    async def wait(self) -> None:
        """Sleep while the bucket is in debt (again after waking: other paced coroutines that
        woke at the same moment may have spent the refill first)."""
        while (pause := self.debt()) > 0:
            self.waited += pause
            await self._sleep(pause)


class _Paced(Generic[T]):
    """Drives a coroutine step by step, as ``await`` would, timing each step and waiting on the
    share before each. Whatever the awaited futures raise, and a cancellation of the task while
    it waits on the share, goes into the coroutine as it would without pacing."""

    __slots__ = ("_coro", "_share")

    def __init__(self, share: LoopShare, coro: Coroutine[Any, Any, T]) -> None:
        self._share = share
        self._coro = coro

    def __await__(self) -> Generator[Any, None, T]:
        share, coro = self._share, self._coro
        clock = share._clock
        value: Any = None
        error: BaseException | None = None
        while True:
            if error is None:
                try:
                    yield from share.wait().__await__()
                except BaseException as exc:  # cancelled while paced: the coroutine unwinds
                    error = exc
            t0 = clock()
            try:
                step = coro.send(value) if error is None else coro.throw(error)
            except StopIteration as done:
                share.pay(clock() - t0)
                result: T = done.value
                return result
            except BaseException:
                share.pay(clock() - t0)
                raise
            share.pay(clock() - t0)
            value, error = None, None
            try:
                value = yield step
            except BaseException as exc:
                error = exc
