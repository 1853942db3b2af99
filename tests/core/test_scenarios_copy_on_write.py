"""Scenarios: whatever a cycle decides, it decides in its own copy-on-write overlay; the cache
it ran on is left exactly as it was."""

from __future__ import annotations

from extender.framework.intents import ReleaseClaim
from tests.core.props import cache_state
from tests.core.scenarios import (
    binds,
    cycle,
    drifted,
    make_cache,
    racing,
    three_free_nodes,
)


def test_the_cycle_never_mutates_the_cache() -> None:
    """Drift, a race, an over-full gang and new bindings in one cycle: the cache stays as it was."""
    objs = three_free_nodes(True) + racing(free_quota=True)[4:]  # skip racing()'s own two nodes
    objs += [o for o in drifted() if o["kind"] in ("Quota", "Pod", "PodGroup")]
    cache = make_cache(objs)
    before = cache_state(cache)
    result = cycle(cache)
    assert binds(result)  # the cycle did decide things …
    assert any(isinstance(i, ReleaseClaim) for i in result.intents)
    assert cache_state(cache) == before  # … in its own copy-on-write overlay only
