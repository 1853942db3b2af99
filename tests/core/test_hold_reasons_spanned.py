"""What a gang held hard to one unit of a tier (``highestTierAllowed``, mode hard) is told when its
bound siblings already span more than one such unit (issue 16 item 4, ``verdicts.above_limit``,
``refusals.fits_only_above``): no unit can ever hold it with them, so it is told that plainly —
its siblings already span those units — not the room of "the roomiest of its siblings'" units,
which reads as if more room there would let it run. No hold is taken or ended for it.
"""

from __future__ import annotations

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

DOMAINS = ["1a", "1a", "1b", "1b", "1a", "1b"]
HOLDS: dict[str, tuple[str, ...]] = {"default/big": ("n1",), "default/other": ("n3",)}


def _objects(mixed: bool) -> list[dict[str, Any]]:
    """Domains 1a (n0, n1, n4) and 1b (n2, n3, n5) of one leaf, all empty; ``g0`` (pods of priority
    10), held to one NVLink domain, has whole-node workers bound on n0 (1a) and n2 (1b) and one
    more to place — with a CPU-only launcher, if ``mixed``."""
    nodes = [NodeSpec(f"n{i}", i, 1, "A100", True, False, 0, domain=d) for i, d in enumerate(DOMAINS)]
    if mixed:
        worker = Member(8, 8)
        gang = MixedGang("g0", [Member(0, 2), worker, worker, worker], bound={1: "n0", 2: "n2"})
        objs = MixedCluster(nodes, [gang]).objects()
    else:
        objs = Cluster(nodes, [Gang("g0", 3, 8, False, bound={0: "n0", 1: "n2"})]).objects()
    for o in objs:
        if o["kind"] == "Pod":
            o["spec"]["priority"] = 10
    return held_to_nvlink(objs)


def _cycle(mixed: bool) -> tuple[CycleResult, Scheduler]:
    """One cycle of ``g0``, first in hold order and long waiting, beside ``big`` holding n1 and
    ``other`` n3 (gangs of 4 whole nodes, pod priority 0)."""
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, _objects(mixed))
    for name in ("big", "other"):
        b.feed(cache, b.training_job(name, 4, gpu=8, hca=1))
    sched = Scheduler(policy_with_topology({"max_holds": 3, "reserve_after_cycles": 1}))
    sched.memory.holds.update({job: Hold(nodes, NOW) for job, nodes in HOLDS.items()})
    sched.memory.gang_waits["default/g0"] = 5
    return sched.run_once(cache.snapshot(NOW)), sched


@pytest.mark.parametrize("mixed", [False, True], ids=["one-size", "mixed"])
def test_a_gang_whose_siblings_span_two_nvlink_domains_is_told_so_and_holds_nothing(mixed: bool) -> None:
    """``g0``'s siblings sit in 1a and 1b: it is told they already span both, and that no NVLink
    domain can hold it with them — not "the roomiest of its siblings' NVLink domains". It binds
    nothing, holds nothing, and ``big`` and ``other`` keep their holds."""
    result, sched = _cycle(mixed)
    status = result.verdicts["default/g0"].status
    text = status.message()
    assert status.reason is Reason.FITS_ONLY_ABOVE_ALLOWED_TIER, text
    assert "its bound siblings already span 2 NVLink domains (1a, 1b)" in text, text
    assert "roomiest" not in text and "held for" not in text, text
    assert set(sched.memory.holds) == set(HOLDS), sched.memory.holds  # none ended, none taken for g0
    assert not any(q.name.startswith("q-g0-") and q.node_name not in ("", "n0", "n2") for q in result.session.quotas())
