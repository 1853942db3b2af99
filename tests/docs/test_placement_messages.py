"""The reasons docs/placement.md and docs/extender.md quote are the ones the scheduler gives: each
quoted message is produced here, by the real conversion, cache and scheduler, on the cluster the
page describes, and must appear in the page word for word (an operator greps for it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from extender import wellknown
from extender.cache.cache import ClusterCache
from extender.cache.convert import format_time, parse_time
from extender.conf import default_policy
from extender.diagnose import UNBLOCK
from extender.framework.status import Reason
from extender.scheduler import Scheduler
from tests import builders as b
from tests.core.test_holds import Cluster

ROOT = Path(__file__).resolve().parents[2]
NOW = 1_800_000_000.0
Obj = dict[str, Any]


def _verdict_message(objs: list[Obj], job: str) -> str:
    """The binder's verdict on ``job`` after one cycle over ``objs`` (and a queue research)."""
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, [b.queue("research"), *objs])
    assert not cache.conversion_errors
    result = Scheduler(default_policy()).run_once(cache.snapshot(NOW))
    return result.verdicts[f"default/{job}"].status.message()


def _leaf(switch: str, *nodes: Obj) -> list[Obj]:
    return [o for n in nodes for o in (n, b.topology(n["metadata"]["name"], [switch]))]


def _mount_point(ready: bool) -> dict[str, Any]:
    beat = format_time(parse_time(b.TS) + 60)  # heard of after the node became Ready
    return {"type": wellknown.STORAGE_CONDITION_PREFIX + "fs1", "status": str(ready), "lastHeartbeatTime": beat}


def test_placement_quotes_the_no_zone_fits_of_a_gang_too_big_for_every_zone() -> None:
    # 8 × 1 GPU over leaves with 5 and 2 GPUs: the roomiest leaf takes 5 of the 8
    objs = _leaf("s1", b.node("n0", gpu=5, index=0)) + _leaf("s2", b.node("n1", gpu=2, index=1))
    message = _verdict_message(objs + b.training_job("w", 8), "w")
    assert message == "NoZoneFits(no zone holds 8×1 GPU: the roomiest, roce#s1, takes 5 of 8)"
    assert f"`{message}`" in " ".join((ROOT / "docs" / "placement.md").read_text().split())


def test_placement_quotes_a_refusing_node_s_reason_before_no_zone_fits() -> None:
    # 2 whole-node workers needing fs1 on a leaf of two nodes: fs1 is ready on n0 only
    nodes = [b.node(f"n{i}", index=i, conditions=[_mount_point(i == 0)]) for i in range(2)]
    job = b.training_job("w", 2, gpu=8, hca=8)
    for o in job:
        if o["kind"] == "Pod":
            o["metadata"]["annotations"][wellknown.ANNO_REQUIRED_MOUNT_POINTS] = "fs1"
    message = _verdict_message(_leaf("s1", *nodes) + job, "w")
    zones = "NoZoneFits(no zone holds 2×8 GPU: the roomiest, roce#s1, takes 1 of 2)"
    assert message == f"StorageNotReady(mount point fs1 not ready); {zones}"
    page = " ".join((ROOT / "docs" / "placement.md").read_text().split())
    assert f"`{message}`" in page


def test_extender_diagnose_example_quotes_the_real_message() -> None:
    # five whole-node RDMA workers on four nodes (one leaf)
    objs = _leaf("s1", *[b.node(f"n{i}", index=i) for i in range(4)])
    message = _verdict_message(objs + b.training_job("wide", 5, gpu=8, hca=8), "wide")
    assert message == "NoZoneFits(no zone holds 5×8 GPU: the roomiest, roce#s1, takes 4 of 5)"
    page = (ROOT / "docs" / "extender.md").read_text()
    assert page.count(f'"message": "{message}"') == 3  # the stop, its rung and the last cycle
    assert f'"unblock": "{UNBLOCK[Reason.NO_ZONE_FITS]}"' in page
    assert "(quota q-wide-0 not bound: no zone holds 5×8 GPU: the roomiest, roce#s1, takes 4 of 5)" in page


def test_placement_quotes_the_holder_s_reason_hold_first() -> None:
    # leaf s1 = n0–n3 all busy, s2 = n4–n7 with one busy node: a gang of 4 whole nodes fits
    # neither, and after one failed cycle (reserve_after_cycles: 1) holds s2, the roomier
    leaves = {f"n{i}": "s1" if i < 4 else "s2" for i in range(8)}
    c = Cluster(leaves, dict.fromkeys(("n0", "n1", "n2", "n3", "n4"), 8), workers=4, reserve_after_cycles=1)
    c.cycle()
    message = c.cycle().verdicts["default/big"].status.message()
    hold = "HoldingNodes(n4–n7 (4 nodes) for default/big)"
    assert message == f"{hold}; NoZoneFits(no zone holds 4×8 GPU: the roomiest, roce#s2, takes 3 of 4)"
    page = " ".join((ROOT / "docs" / "placement.md").read_text().split())
    assert f"`{message}`" in page
