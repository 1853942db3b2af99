"""Keeping CPython's cyclic garbage collector off the scheduler's hot paths.

The cache holds a few hundred thousand long-lived objects (nodes, quotas, pods and their API
documents). CPython's *full* collection walks every tracked object, so at 5,000 nodes and 16,000
quotas one costs 0.15–0.25 s — and it starts whenever the young generations overflow: in the
middle of a binder cycle, or of an extender request that otherwise takes a millisecond. Two measures, both
standard for long-running CPython services:

* :func:`settle` — collect, then ``gc.freeze()``: everything alive moves to the
  permanent generation, which collections skip. Reference counting still frees frozen objects
  the moment they are dropped (a replaced pod document, a deleted node); only garbage *cycles*
  among frozen objects wait — until the next settle, which unfreezes first so that nothing leaks
  for longer than ``--gc-refreeze-seconds``. The service settles after the cache's first sync and
  then every ``--gc-refreeze-seconds``, so that the heap grown since (new pods) leaves the walk too.
* :func:`paused` — no automatic collection inside a synchronous section (one binder
  cycle: snapshot → actions → write plan). Its garbage is mostly freed by reference counting as
  the cycle goes; the cycles it leaves (a session and its plugins' closures) are collected by the
  next young-generation collection after the section, which walks only young objects.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Iterator

__all__ = ["YOUNG_LIMIT", "keep_if_large", "paused", "settle"]


def settle() -> float:
    """Collect everything (frozen objects included), then freeze the survivors. Returns the
    seconds it took (a full collection: call it where a pause is harmless)."""
    t0 = time.perf_counter()
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    return time.perf_counter() - t0


YOUNG_LIMIT = 50_000
"""Objects made (and alive) since the last collection above which :func:`keep_if_large` freezes."""


def keep_if_large() -> bool:
    """End of a paused section that made more than :data:`YOUNG_LIMIT` objects (a binder cycle
    placing thousands of quotas): freeze them, as :func:`settle` freezes the cache, instead of
    leaving them to the next young collection — which would walk every one of them at once, on
    whichever thread allocates next (0.1–0.4 s at 16,000 quotas: the event loop stalls). What of
    them is garbage is freed by reference counting as usual; garbage *cycles* among them wait
    for the next settle (``--gc-refreeze-seconds``). Small sections are left alone: an idle
    cycle's few objects cost a young collection nothing. Returns whether it froze."""
    if gc.get_count()[0] <= YOUNG_LIMIT:
        return False
    gc.freeze()
    return True


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """No automatic collection inside (nesting and an already disabled collector are fine)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
