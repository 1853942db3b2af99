"""The policy's plugin calls alone, for ``bench/binder_cycle.py`` (issue 16 item 8).

One cycle of the real scheduler is run once with its filter and score stages recorded: every call
of QN ``select``, ``predicate`` and ``node_order`` and of TQ ``select`` and ``predicate``, with its
arguments. Replaying exactly those calls on the plugin functions of the same session — each
participant called directly: no stage expression combining them, no memo, no Statement, no
planner — measures what the policy's own filters and scores cost for this input. Any scheduler
that applies this policy makes at least these calls (the planner already evaluates the QN filters
once per node per quota shape, scores a node again only after a bind changed it, and re-validates
each claim once), so the capacity floor plus this is below what any implementation of the policy
can reach, however lean its framework.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from extender import heap
from extender.cache.cache import ClusterCache
from extender.framework.policy import Policy
from extender.framework.session import Session
from extender.scheduler import Scheduler

__all__ = ["RECORDED_STAGES", "Recorded", "counts", "record_cycle", "replay_seconds"]

RECORDED_STAGES = ("qn.select", "qn.predicate", "qn.node_order", "tq.select", "tq.predicate")

Recorded = list[tuple[str, tuple[Any, ...]]]  # (stage, its arguments), in call order


@contextmanager
def _recording(calls: Recorded) -> Iterator[None]:
    """Sessions opened inside record every call of the recorded stages (a benchmark-only hook:
    the stage functions a session binds are wrapped, and the binding is restored on exit)."""
    bind_stage = Session._bind_stage

    def recording_bind(self: Session, stage: str) -> Callable[..., Any]:
        fn = bind_stage(self, stage)
        if stage not in RECORDED_STAGES:
            return fn

        def recorded(*args: Any) -> Any:
            calls.append((stage, args))
            return fn(*args)

        return recorded

    Session._bind_stage = recording_bind  # type: ignore[method-assign]
    try:
        yield
    finally:
        Session._bind_stage = bind_stage  # type: ignore[method-assign]


def record_cycle(cache: ClusterCache, policy: Policy) -> tuple[Session, Recorded]:
    """One cycle on the cache's snapshot (with a fresh scheduler), and the calls it made."""
    calls: Recorded = []
    with _recording(calls):
        result = Scheduler(policy).run_once(cache.snapshot())
    return result.session, calls


def counts(calls: Recorded) -> dict[str, int]:
    """Calls per recorded stage."""
    return dict(sorted(Counter(stage for stage, _ in calls).items()))


def replay_seconds(ssn: Session, calls: Recorded) -> float:
    """The recorded calls made again on each participating plugin's function (collection paused)."""
    stages = ssn.policy.stages
    fns = {s: [ssn._plugin_fns(p)[s] for p in stages[s].participants] for s in RECORDED_STAGES}
    with heap.paused():
        t = time.perf_counter()
        for stage, args in calls:
            for fn in fns[stage]:
                fn(*args)
        return time.perf_counter() - t
