"""What the extender's apps share: the snapshot and the session reused between requests only
while they are exactly what a fresh one would be."""

from __future__ import annotations

from extender.cache.cache import ClusterCache
from extender.conf import default_policy, default_policy_text, load_policy_text
from extender.state import ServiceState
from tests import builders as b


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _state() -> tuple[ServiceState, ClusterCache, Clock]:
    clock = Clock()
    cache = ClusterCache(clock=clock)
    b.feed(cache, [b.node("n0"), b.node("n1"), b.quota("q0"), b.pod("p0", quota="q0")])
    return ServiceState(cache=cache, policy=default_policy(), clock=clock), cache, clock


def test_snapshot_is_reused_until_the_cache_changes_and_always_carries_the_time() -> None:
    state, cache, clock = _state()
    first = state.snapshot()
    clock.now += 5
    second = state.snapshot()
    assert second.generation == first.generation
    assert second.now == first.now + 5  # the same view, now
    assert second.pending_jobs is first.pending_jobs  # nothing copied again
    cache.on_pod_add(b.pod("p1", quota="q0"))
    third = state.snapshot()
    assert third.generation > first.generation
    assert "default/p1" in (third.pending_jobs or ())
    assert third.node_order == cache.snapshot().node_order


def test_session_is_reused_only_while_it_is_what_a_fresh_one_would_be() -> None:
    state, cache, clock = _state()
    s1 = state.session()
    assert state.session() is s1
    clock.now += 0.5
    assert state.session() is s1  # younger than session_reuse_seconds
    clock.now += 1.0
    s2 = state.session()
    assert s2 is not s1 and s2.now == clock.now  # too old: its now would be stale
    cache.assume(next(iter(cache.task_job)), "n0")  # any change to the cache
    s3 = state.session()
    assert s3 is not s2 and s3.snap.generation == cache.generation
    stmt = s3.statement()  # a session a statement wrote into is never handed out again
    stmt.allocate_quota_to_node("q0", "n1")
    assert state.session() is not s3
    stmt.discard()


def test_a_swapped_policy_is_not_served_from_the_reused_session() -> None:
    """A policy reload (``Runtime.swap_policy``) replaces ``state.policy`` between requests: the
    next request opens a session with the new policy although the cache has not changed."""
    state, _, clock = _state()
    old = state.policy
    first = state.session()
    assert state.session() is first and first.policy is old
    new = load_policy_text(default_policy_text().replace("unschedulable_cycles: 30", "unschedulable_cycles: 7"))
    state.policy = new  # same cache generation, same instant: only the policy differs
    second = state.session()
    assert second is not first and second.policy is new and second.now == clock.now
    assert state.session() is second


def test_a_status_only_nodetopology_write_changes_nothing_the_scheduler_reads() -> None:
    """The discovery agents' heartbeat updates NodeTopology status every few minutes per node:
    the cache keeps the object but neither rebuilds the node nor bumps its generation (which
    would throw away every reused snapshot and session)."""
    state, cache, _ = _state()
    topo = b.topology("n0", ["leaf-a"])
    cache.on_topology_add(topo)
    zone = cache.nodes["n0"].zone
    assert zone  # the zone came from the NodeTopology
    gen, node, snap = cache.generation, cache.nodes["n0"], state.snapshot()
    beat = {**topo, "metadata": {**topo["metadata"], "resourceVersion": "2"}, "status": {"observedAt": "x"}}
    cache.on_topology_update(topo, beat)
    assert cache.generation == gen and cache.nodes["n0"] is node and state.snapshot().generation == snap.generation
    moved = {
        **beat,
        "metadata": {**beat["metadata"], "resourceVersion": "3"},
        "spec": b.topology("n0", ["leaf-b"])["spec"],
    }
    cache.on_topology_update(beat, moved)
    assert cache.generation > gen and cache.nodes["n0"].zone not in ("", zone)
    cache.on_topology_delete(moved)
    assert cache.nodes["n0"].zone == ""
