"""Work that reads the cache on a worker thread while the event loop keeps answering.

A binder cycle (``Scheduler.run_once`` and the write plan: a second or more at 16,000 quotas)
and the verbs of very large requests are pure functions of the cache, but long ones: run on the
event loop they stall every other request of every port. :meth:`ReadGate.off_loop` runs such a
function on a worker thread instead. The rule that keeps that correct:

* **While any off-loop reader runs, nothing changes the cache.** Every writer on the event loop
  — the informers' deliveries, the extender's assume / forget and its inline quota write, the
  binder's applying of its writes' answers — first awaits :meth:`ReadGate.writable` and then
  changes the cache *synchronously* (no ``await`` in between), so a reader never sees a torn or
  moving cache: what it reads is the cache as it was when it started, as a cycle on the loop saw
  it. Readers on the loop (the verbs, ``/diagnose``, the webhook) go on meanwhile: reading is
  what they do. Deliveries are delayed, not dropped (each informer applies its events in order
  once the gate opens); a bind waits at most for the reader in progress.
* Off-loop readers hold the interpreter in turns with the event loop (the GIL). While one runs,
  the interpreter's switch interval is lowered to :data:`SWITCH_INTERVAL`, so the loop gets the
  interpreter back within that long whenever it has something to do (a request arriving, a
  response to send) instead of within the default 5 ms; it is restored when the last one ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Final, TypeVar

__all__ = ["SWITCH_INTERVAL", "ReadGate"]

T = TypeVar("T")

SWITCH_INTERVAL: Final = 0.0005
"""Seconds between the interpreter's forced thread switches while an off-loop reader runs."""


class ReadGate:
    """Off-loop readers of one cache, and the writers on the loop that wait for them."""

    def __init__(self, *, threads: int = 2) -> None:
        self._readers = 0
        self._idle: asyncio.Event | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._threads = threads
        self._saved_interval: float | None = None

    @property
    def busy(self) -> bool:
        """An off-loop reader is running: a change of the cache must wait (:meth:`writable`)."""
        return self._readers > 0

    async def writable(self) -> None:
        """Return once no off-loop reader runs. Change the cache right after, without an await."""
        while self._readers:
            if self._idle is None:
                self._idle = asyncio.Event()
            await self._idle.wait()

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        """Writers wait, as for an off-loop reader, while the caller changes the cache on the loop
        in steps with awaits between them (each step leaves the cache whole: readers on the loop
        see it before or after a step). Entered without a pause: right after :meth:`off_loop`
        returns, no writer gets in between."""
        self._enter()
        try:
            yield
        finally:
            self._leave()

    async def off_loop(self, fn: Callable[[], T]) -> T:
        """``fn()`` on a worker thread, the cache's writers held until it returns."""
        loop = asyncio.get_running_loop()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self._threads, thread_name_prefix="sky-cache-reader")
        self._enter()
        fut = loop.run_in_executor(self._executor, fn)
        try:
            return await asyncio.shield(fut)
        finally:
            # cancelled or not, the thread reads on until fn returns: the writers wait for that
            if fut.done():
                self._leave()
            else:
                fut.add_done_callback(lambda _: self._leave())

    def _enter(self) -> None:
        if self._readers == 0:
            self._saved_interval = sys.getswitchinterval()
            sys.setswitchinterval(min(SWITCH_INTERVAL, self._saved_interval))
            if self._idle is not None:
                self._idle.clear()
        self._readers += 1

    def _leave(self) -> None:
        self._readers -= 1
        if self._readers == 0:
            if self._saved_interval is not None:
                sys.setswitchinterval(self._saved_interval)
            if self._idle is not None:
                self._idle.set()

    def close(self) -> None:
        """Let the worker threads go (idempotent; the gate can be used again after)."""
        if self._executor is not None:
            self._executor.shutdown(wait=False)
            self._executor = None
