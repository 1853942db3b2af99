"""Hold order and the end of a hold in the cycle (issue 16 item 4, ``holds.py`` and ``keeper.py``):
which gang gets the ``max_holds`` holds — queue priority, priority, age — and what happens to a
hold when its gang is placed in the cycle, or when the binder cannot write that placement. The
cluster and its helpers are ``test_holds.py``'s.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench.cache_writes import bumped
from extender.framework.status import Reason
from extender.plugins.topology.holds import Hold
from extender.scheduler import CycleResult
from tests import builders as b
from tests.core.scenarios import policy_with_topology
from tests.core.test_holds import Cluster, two_waiting_gangs


def _submit_gang(
    c: Cluster, name: str, *, workers: int = 4, priority: int = 0, queue: str = "research", created: str = ""
) -> None:
    """A gang of whole-node workers (4), its pods of ``priority``, its PodGroup ``created``."""
    objs = b.training_job(name, workers, gpu=8, hca=1, queue=queue)
    for o in objs:
        if o["kind"] == "Pod":
            o["spec"]["priority"] = priority
        if created:
            o["metadata"]["creationTimestamp"] = created
    b.feed(c.cache, objs)


def _one_leaf_waiting(**topology: Any) -> Cluster:
    """``two_waiting_gangs``' cluster with ``big`` alone, holding s1 (n0–n3) after waiting."""
    leaves = {f"n{i}": "s1" if i < 4 else "s2" for i in range(8)}
    c = Cluster(leaves, dict.fromkeys(("n0", "n1", "n4", "n5", "n6"), 8), workers=4, **topology)
    for _ in range(3):
        c.cycle()
    assert c.holds() == {"default/big": ("n0", "n1", "n2", "n3")}
    return c


def test_a_gang_of_higher_priority_takes_the_place_of_a_lower_ones_hold() -> None:
    """``big`` (priority 0) holds s1, the one hold ``max_holds`` allows; ``urgent`` (priority 10,
    also 4 whole nodes) then waits as long: the hold goes to it, in the place ``big`` held (the
    roomiest once ``big``'s nodes count as free), and ``big`` waits anew — its failed cycles count
    from zero, its refusal names no held nodes. ``big`` cannot take it back: it comes later in
    hold order."""
    c = _one_leaf_waiting(reserve_after_cycles=2, max_holds=1)
    _submit_gang(c, "urgent", priority=10)
    c.cycle()
    c.cycle()
    assert c.holds() == {"default/big": ("n0", "n1", "n2", "n3")}  # urgent has failed 2 cycles: not yet
    result = c.cycle()
    assert c.holds() == {"default/urgent": ("n0", "n1", "n2", "n3")}
    assert c.scheduler.memory.gang_waits["default/big"] == 1  # this cycle's failure, counted anew
    assert "HoldingNodes(n0–n3 (4 nodes) for default/urgent)" in result.verdicts["default/urgent"].status.message()
    assert "HoldingNodes" not in result.verdicts["default/big"].status.message()
    for _ in range(5):
        c.cycle()
    assert c.holds() == {"default/urgent": ("n0", "n1", "n2", "n3")}


def test_an_older_gang_of_the_same_priority_takes_the_place_of_a_younger_ones_hold_not_an_equal_one() -> None:
    """Same priority: age decides. ``elder``'s PodGroup is older than ``big``'s yet its pods come
    later (``big`` holds by then): once ``elder`` has waited it holds. A gang just as old as the
    holder (``twin``) waits its turn instead: between equals the first to hold keeps it."""
    c = _one_leaf_waiting(reserve_after_cycles=1, max_holds=1)
    _submit_gang(c, "twin")
    for _ in range(3):
        c.cycle()
    assert set(c.holds()) == {"default/big"}
    _submit_gang(c, "elder", created="2020-01-01T00:00:00Z")
    for _ in range(3):
        c.cycle()
    assert set(c.holds()) == {"default/elder"}


def test_a_hold_displaced_after_its_gang_was_refused_in_the_cycle_no_longer_names_its_nodes() -> None:
    """Queues share the cluster by weight: ``research`` (weight 10, ``big``'s) goes before ``prod``
    in each cycle, so ``big`` is refused — naming its held nodes — before ``urgent`` (``prod``,
    priority 10) takes its place in the same cycle. Its verdict (and so its PodGroup condition and
    /diagnose) then says what holds: no held nodes."""
    c = _one_leaf_waiting(reserve_after_cycles=1, max_holds=1)
    research = b.queue("research")
    c.cache.on_queue_update(research, bumped(research, spec={**research["spec"], "weight": 10}))
    b.feed(c.cache, [b.queue("prod")])
    _submit_gang(c, "urgent", priority=10, queue="prod")
    c.cycle()
    result = c.cycle()
    assert set(c.holds()) == {"default/urgent"}
    assert list(result.verdicts).index("default/big") < list(result.verdicts).index("default/urgent")
    assert "HoldingNodes" not in result.verdicts["default/big"].status.message()


def test_a_lower_max_holds_keeps_the_holds_first_in_hold_order() -> None:
    """Two holds; ``max_holds`` drops to 1: the one kept is the higher-priority gang's, though its
    hold is the younger."""
    c = two_waiting_gangs(max_holds=2)
    pods = [c.cache.pod_by_name("default", f"big2-worker-{i}") for i in range(4)]
    for pod in pods:
        assert pod is not None
        c.cache.on_pod_update(pod, bumped(pod, spec={**pod["spec"], "priority": 5}))
    for _ in range(3):
        c.cycle()
    assert set(c.holds()) == {"default/big", "default/big2"}
    c.scheduler.memory.holds["default/big2"] = Hold(c.holds()["default/big2"], c.now - 1)  # the younger hold
    c.scheduler.swap_policy(policy_with_topology({"reserve_after_cycles": 1, "max_holds": 1}))
    c.cycle()
    assert set(c.holds()) == {"default/big2"}


def test_a_gang_placed_in_the_cycle_leaves_its_place_to_the_next_in_that_cycle() -> None:
    """Leaves s1 = n0–n3 and s2 = n4–n7; n0 runs an 8-GPU job, n4–n7 a 4-GPU job each. ``big``
    holds s1 (the one hold); ``other`` (4 whole nodes, 0 room now) waits behind it. When n0 frees,
    ``big`` is placed — its hold ends there — and ``other``, planned next in the same cycle, holds
    s2 at once: the one-pod job ``solo`` (4 GPUs) that comes in that cycle is kept off it, instead
    of taking room ``other`` waits for while a hold that has ended still counted."""
    leaves = {f"n{i}": "s1" if i < 4 else "s2" for i in range(8)}
    c = Cluster(leaves, {"n0": 8, "n4": 4, "n5": 4, "n6": 4, "n7": 4}, reserve_after_cycles=1, max_holds=1)
    for _ in range(3):
        c.cycle()
    assert c.holds() == {"default/big": ("n0", "n1", "n2", "n3")}
    _submit_gang(c, "other")
    for _ in range(3):
        c.cycle()
    assert c.holds() == {"default/big": ("n0", "n1", "n2", "n3")}
    c.finish("n0")
    c.submit_single("solo", gpu=4)
    result = c.cycle()
    assert sorted(c.node_of(f"q-big-{i}") for i in range(4)) == ["n0", "n1", "n2", "n3"]
    assert c.holds() == {"default/other": ("n4", "n5", "n6", "n7")}
    assert c.node_of("q-solo") == ""
    assert "held for gang default/other" in result.verdicts["default/solo"].status.message()


def test_a_hold_given_back_after_failed_writes_does_not_cost_the_next_holder_its_wait() -> None:
    """The cycle above, but the binder cannot write ``big``'s binds (``Scheduler.writes_failed``):
    ``big`` gets its hold back while ``other`` holds too — one more than ``max_holds``. The next
    cycle keeps the first in hold order (``big``'s, the older hold) and ends ``other``'s without
    restarting its count: once ``big`` is placed again, ``other`` holds at once in that cycle."""
    leaves = {f"n{i}": "s1" if i < 4 else "s2" for i in range(8)}
    c = Cluster(leaves, {"n0": 8, "n4": 4, "n5": 4, "n6": 4, "n7": 4}, reserve_after_cycles=1, max_holds=1)
    for _ in range(3):
        c.cycle()
    _submit_gang(c, "other")
    for _ in range(3):
        c.cycle()
    c.finish("n0")
    c.scheduler.run_once(c.cache.snapshot())  # its writes all fail: nothing reaches the cache
    c.scheduler.writes_failed({"q-big-0", "q-big-1", "q-big-2", "q-big-3"})
    assert set(c.holds()) == {"default/big", "default/other"}
    waited = c.scheduler.memory.gang_waits["default/other"]
    c.cycle()
    assert sorted(c.node_of(f"q-big-{i}") for i in range(4)) == ["n0", "n1", "n2", "n3"]
    assert c.holds() == {"default/other": ("n4", "n5", "n6", "n7")}
    assert c.scheduler.memory.gang_waits["default/other"] == waited + 1


def _kept_off_by_big(priority: int) -> tuple[Cluster, CycleResult]:
    """``big`` (4 whole nodes, priority 0) holds s1 = n0–n3, where n1–n3 are free; ``urgent`` (3
    whole nodes, ``priority``) would fit there now, but is kept off (``NodeHeldForGang``) for as
    many cycles as a gang waits before it holds (2); the cluster and the next cycle's result."""
    c = Cluster(reserve_after_cycles=2)
    for _ in range(3):
        c.cycle()
    assert c.holds() == {"default/big": ("n0", "n1", "n2", "n3")}
    objs = b.training_job("urgent", 3, gpu=8, hca=1)
    for o in objs:
        if o["kind"] == "Pod":
            o["spec"]["priority"] = priority
    b.feed(c.cache, objs)
    for _ in range(2):
        result = c.cycle()
        assert result.verdicts["default/urgent"].status.reason is Reason.NODE_HELD_FOR_GANG
    assert set(c.holds()) == {"default/big"}
    return c, c.cycle()


def test_a_gang_of_higher_priority_kept_off_only_by_a_lower_ones_hold_takes_its_place() -> None:
    """``urgent`` (priority 10) comes first in hold order: once it has waited as long as any gang
    waits for a hold, it takes ``big``'s place — ``big`` waits anew — and runs on n1–n3 in that
    cycle, instead of waiting behind a lower gang's hold for ``hold_seconds``."""
    c, result = _kept_off_by_big(10)
    assert sorted(c.node_of(f"q-urgent-{i}") for i in range(3)) == ["n1", "n2", "n3"]
    assert c.holds() == {}  # urgent's hold ended as it was placed, in that cycle
    assert c.scheduler.memory.gang_waits["default/big"] == 1  # displaced: this cycle's failure, counted anew
    assert "HoldingNodes" not in result.verdicts["default/big"].status.message()


def test_a_gang_kept_off_by_the_hold_of_its_equal_waits_for_it() -> None:
    """``urgent`` of ``big``'s priority and age: between equals the first to hold keeps it, and
    the other waits for it (a hold delays others, never scatters them)."""
    c, result = _kept_off_by_big(0)
    for _ in range(5):
        assert result.verdicts["default/urgent"].status.reason is Reason.NODE_HELD_FOR_GANG
        assert c.holds() == {"default/big": ("n0", "n1", "n2", "n3")}
        assert all(c.node_of(f"q-urgent-{i}") == "" for i in range(3))
        result = c.cycle()


def test_a_gang_of_higher_priority_takes_the_place_it_needs_while_a_hold_is_still_free() -> None:
    """``max_holds: 2``, one hold in force: ``big``'s (priority 0) on s1, the only leaf that could
    ever hold 4 whole nodes. ``urgent`` (priority 10, 4 whole nodes) finds no free place to hold —
    s2 has two nodes — and comes first in hold order: it takes ``big``'s place, as it would were
    the book full, rather than wait behind a lower gang's hold with a place left unused."""
    c = Cluster(reserve_after_cycles=2, max_holds=2)
    for _ in range(3):
        c.cycle()
    assert c.holds() == {"default/big": ("n0", "n1", "n2", "n3")}
    _submit_gang(c, "urgent", priority=10)
    for _ in range(2):
        c.cycle()
    assert set(c.holds()) == {"default/big"}  # urgent has failed 2 cycles: not yet
    result = c.cycle()
    assert c.holds() == {"default/urgent": ("n0", "n1", "n2", "n3")}
    assert "HoldingNodes(n0–n3 (4 nodes) for default/urgent)" in result.verdicts["default/urgent"].status.message()
    assert c.scheduler.memory.gang_waits["default/big"] == 1  # displaced: this cycle's failure, counted anew


@pytest.mark.parametrize("max_holds", [2, 3])
def test_a_gang_whose_only_place_two_lower_holds_share_takes_both(max_holds: int) -> None:
    """One leaf, n0–n3, every node busy. ``big`` and ``big2`` (2 whole nodes each, priority 0)
    hold n0–n1 and n2–n3. ``urgent`` (priority 10, 4 whole nodes) comes first in hold order and
    its only place is the whole leaf: it needs both holds ended, not one — ending one at a time
    leaves it nothing to hold, so it would wait behind two lower gangs' holds. Both are displaced
    (their gangs wait anew), whether the book is full or has a place left."""
    leaves = {f"n{i}": "s1" for i in range(4)}
    c = Cluster(leaves, dict.fromkeys(leaves, 8), workers=2, reserve_after_cycles=1, max_holds=max_holds)
    b.feed(c.cache, b.training_job("big2", 2, gpu=8, hca=1))
    for _ in range(3):
        c.cycle()
    assert c.holds() == {"default/big": ("n0", "n1"), "default/big2": ("n2", "n3")}
    _submit_gang(c, "urgent", priority=10)
    c.cycle()
    result = c.cycle()
    assert c.holds() == {"default/urgent": ("n0", "n1", "n2", "n3")}
    assert "n0–n3 (4 nodes) for default/urgent" in result.verdicts["default/urgent"].status.message()
    assert c.scheduler.memory.gang_waits["default/big"] == 1  # displaced: this cycle's failure, counted anew
    assert c.scheduler.memory.gang_waits["default/big2"] == 1


def test_a_mixed_gang_holds_the_nodes_its_quotas_take_not_copies_of_its_largest() -> None:
    """One leaf n0–n7 of 8-GPU nodes, each running a 4-GPU job (n7 an 8-GPU one): ``big`` (one
    8-GPU worker) holds n0. ``mix`` asks one 8-GPU worker and seven 1-GPU ones — two empty nodes
    take it. Counted as eight copies of its largest quota it needed eight whole nodes, more than
    the seven not held, so it held nothing at all (and on an emptier cluster it would hold eight
    nodes for 15 GPUs). It holds two."""
    leaves = {f"n{i}": "s1" for i in range(8)}
    c = Cluster(leaves, {**{f"n{i}": 4 for i in range(7)}, "n7": 8}, workers=1, reserve_after_cycles=1, max_holds=2)
    objs = [b.podgroup("mix", min_member=8)]
    for i in range(8):
        gpu = 8 if i == 0 else 1
        objs += [
            b.quota(f"q-mix-{i}", gpu=gpu),
            b.pod(f"mix-worker-{i}", group="mix", quota=f"q-mix-{i}", gpu=gpu, index=i),
        ]
    b.feed(c.cache, objs)
    for _ in range(3):
        c.cycle()
    assert c.holds() == {"default/big": ("n0",), "default/mix": ("n1", "n2")}


def test_a_gang_kept_off_by_two_lower_holds_ends_only_the_one_it_needs() -> None:
    """Leaf s1 = n0–n7, all free; leaf s2 = n8, taken by ``big`` (one 8-GPU worker). ``a`` and
    ``b`` (8 whole nodes each, kept to one leaf, priority 0) hold n0–n1 and n6–n7. ``urgent``
    (priority 10, 5 whole nodes) would take s1 were nothing held: it is kept off by both holds,
    and takes the place of only as many as it needs — one, the last in hold order (``b``) —;
    ``a`` keeps its hold and its count of failed cycles."""
    leaves = {f"n{i}": "s1" if i < 8 else "s2" for i in range(9)}
    c = Cluster(leaves, {}, workers=1, reserve_after_cycles=1, max_holds=3)
    c.cycle()
    assert c.node_of("q-big-0") == "n8"
    for name in ("a", "b"):
        objs = b.training_job(name, 8, gpu=8, hca=1)
        objs[0]["spec"]["topology"] = {"highestTierAllowed": "leaf", "mode": "hard"}
        b.feed(c.cache, objs)
    _submit_gang(c, "urgent", workers=5, priority=10)
    c.scheduler.memory.holds.update({"default/a": Hold(("n0", "n1"), c.now), "default/b": Hold(("n6", "n7"), c.now)})
    result = c.cycle()
    assert result.verdicts["default/urgent"].status.reason is Reason.NODE_HELD_FOR_GANG
    c.cycle()
    placed = {c.node_of(f"q-urgent-{i}") for i in range(5)}
    assert len(placed) == 5 and placed <= {"n2", "n3", "n4", "n5", "n6", "n7"}, placed
    assert set(c.holds()) == {"default/a"}
    assert (c.scheduler.memory.gang_waits["default/a"], c.scheduler.memory.gang_waits["default/b"]) == (2, 1)
