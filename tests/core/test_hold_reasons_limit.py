"""What a gang held hard to one NVLink domain (``highestTierAllowed: nvlink``, hard) is told when it
would fit only above that limit even were nothing held (issue 16 item 4, ``verdicts.py``): it
waits for its limit (``FitsOnlyAboveAllowedTier``), not for holders (``NodeHeldForGang``) — no
hold keeps it off, so none is named, and none ends for it (``keeper.HoldKeeper.overrule``).
Before, it was told every holder of its leaf, and a gang first in hold order ended their holds,
in places it could never use together, while it went on waiting.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from extender.cache.cache import ClusterCache
from extender.framework.status import Reason
from extender.plugins.topology.holds import Hold
from extender.scheduler import CycleResult, Scheduler
from tests import builders as b
from tests.core.mixed_gangs import Member, MixedCluster, MixedGang
from tests.core.scenarios import policy_with_topology
from tests.core.topo_cluster import NOW, NodeSpec, held_to_nvlink
from tests.core.topo_gangs import Cluster, Gang

DOMAINS = ["1a", "1a", "1b", "1b", "1a"]
HOLDS: dict[str, tuple[str, ...]] = {"default/big": ("n1",), "default/other": ("n3",)}


def _gang_objects(mixed: bool) -> list[dict[str, Any]]:
    """Domains a (n0, n1, and n4, NotReady) and b (n2, n3) of one leaf, all empty; ``g0`` (pods of
    priority 10) has a whole-node worker bound on n0 and two more to place — with a CPU-only
    launcher, if ``mixed`` —: a holds only one of them (n1), so it fits only across the leaf."""
    nodes = [NodeSpec(f"n{i}", i, 1, "A100", i < 4, False, 0, domain=d) for i, d in enumerate(DOMAINS)]
    if mixed:
        worker = Member(8, 8)
        gang = MixedGang("g0", [Member(0, 2), worker, worker, worker], bound={1: "n0"})
        objs = MixedCluster(nodes, [gang]).objects()
    else:
        objs = Cluster(nodes, [Gang("g0", 3, 8, False, bound={0: "n0"})]).objects()
    for o in objs:
        if o["kind"] == "Pod":
            o["spec"]["priority"] = 10
    return held_to_nvlink(objs)


def _cycle(mixed: bool, holds: Mapping[str, tuple[str, ...]], **topology: Any) -> tuple[CycleResult, Scheduler]:
    """One cycle of ``g0`` beside ``big`` and ``other`` (gangs of 4 whole nodes, pod priority 0),
    with these holds."""
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, _gang_objects(mixed))
    for name in ("big", "other"):
        b.feed(cache, b.training_job(name, 4, gpu=8, hca=1))
    sched = Scheduler(policy_with_topology({"max_holds": 3, **topology}))
    sched.memory.holds.update({job: Hold(nodes, NOW) for job, nodes in holds.items()})
    return sched.run_once(cache.snapshot(NOW)), sched


@pytest.mark.parametrize("mixed", [False, True], ids=["one-size", "mixed"])
def test_a_gang_over_its_nvlink_limit_without_holds_is_told_its_limit_not_the_holders(mixed: bool) -> None:
    """``big`` holds n1 (in a), ``other`` n3 (in b). Were nothing held, ``g0`` would still fit only
    across the leaf: it is told so, with the room of its siblings' domain a, and no holder is
    named."""
    result, _ = _cycle(mixed, HOLDS, reserve_after_cycles=5)
    status = result.verdicts["default/g0"].status
    assert status.reason is Reason.FITS_ONLY_ABOVE_ALLOWED_TIER, status.message()
    assert "held for" not in status.message(), status.message()
    assert "its siblings' NVLink domain, 1a, takes" in status.message(), status.message()


@pytest.mark.parametrize("mixed", [False, True], ids=["one-size", "mixed"])
def test_a_gang_over_its_nvlink_limit_without_holds_ends_no_hold(mixed: bool) -> None:
    """The same, ``g0`` first in hold order and holding n4 (taken before n4 failed): it takes no
    hold's place — lifting them would not let it run. All holds stay; it binds nothing."""
    holds = {**HOLDS, "default/g0": ("n4",)}
    result, sched = _cycle(mixed, holds, reserve_after_cycles=1)
    assert {job: h.nodes for job, h in sched.memory.holds.items()} == holds
    assert not any(q.name.startswith("q-g0-") and q.node_name not in ("", "n0") for q in result.session.quotas())


def _domain_free_cycle(mixed: bool, waited: int) -> tuple[CycleResult, Scheduler]:
    """Domains a (n0, n1), b (n2, n3: n2 runs a whole-node job) and c (n4) of one leaf; ``g0``
    (pods of priority 10, held hard to one NVLink domain, nothing bound: two whole-node workers,
    and a CPU-only launcher if ``mixed``) fits only a. ``big`` (priority 5) holds n1, in a;
    ``other`` (priority 0) holds n4, in c, which never holds ``g0``. ``g0`` has ``waited`` failed
    cycles; one cycle."""
    doms = ["1a", "1a", "1b", "1b", "1c"]
    nodes = [NodeSpec(f"n{i}", i, 1, "A100", True, False, 8 if i == 2 else 0, domain=d) for i, d in enumerate(doms)]
    if mixed:
        worker = Member(8, 8)
        objs = MixedCluster(nodes, [MixedGang("g0", [Member(0, 2), worker, worker])]).objects()
    else:
        objs = Cluster(nodes, [Gang("g0", 2, 8, False)]).objects()
    for o in objs:
        if o["kind"] == "Pod":
            o["spec"]["priority"] = 10
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, held_to_nvlink(objs))
    for name, priority in (("big", 5), ("other", 0)):
        job = b.training_job(name, 4, gpu=8, hca=1)
        for o in job:
            if o["kind"] == "Pod":
                o["spec"]["priority"] = priority
        b.feed(cache, job)
    sched = Scheduler(policy_with_topology({"max_holds": 3, "reserve_after_cycles": 1}))
    sched.memory.holds.update({"default/big": Hold(("n1",), NOW), "default/other": Hold(("n4",), NOW)})
    sched.memory.gang_waits["default/g0"] = waited
    return sched.run_once(cache.snapshot(NOW)), sched


@pytest.mark.parametrize("mixed", [False, True], ids=["one-size", "mixed"])
def test_a_gang_held_to_one_nvlink_domain_is_told_only_the_holders_of_the_domain_it_would_take(mixed: bool) -> None:
    """Were nothing held, ``g0`` would run in a: it waits for ``big`` — not for ``other``, whose
    node n4 it could never use with a."""
    result, _ = _domain_free_cycle(mixed, 0)
    status = result.verdicts["default/g0"].status
    assert status.reason is Reason.NODE_HELD_FOR_GANG, status.message()
    assert status.message().endswith("held for default/big)"), status.message()


@pytest.mark.parametrize("mixed", [False, True], ids=["one-size", "mixed"])
def test_a_gang_held_to_one_nvlink_domain_ends_only_the_hold_in_the_domain_it_takes(mixed: bool) -> None:
    """``g0``, first in hold order and waiting long enough to hold, takes ``big``'s place and runs
    in a in that cycle; ``other`` keeps its hold on n4 (before, the keeper ended it too; it may
    then follow the room, as every waiting holder's does)."""
    result, sched = _domain_free_cycle(mixed, 1)
    placed = sorted(q.node_name for q in result.session.quotas() if q.name.startswith("q-g0-"))
    assert set(placed) == {"n0", "n1"}, (placed, result.verdicts["default/g0"].status.message())
    assert "default/big" not in sched.memory.holds
    other = sched.memory.holds.get("default/other")
    assert other is not None and "n4" in other.nodes, sched.memory.holds
