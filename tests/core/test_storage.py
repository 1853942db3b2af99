"""The ``storage`` plugin (seed 六 6.2): a mount point is ready on a node when its condition
``infiniai-fs-<id>`` is ``True`` and its heartbeat is no older than the node's Ready transition
(a tolerance, default 90 s, for daemons that heartbeat less often); checked at all three hops —
a task claiming a bound quota (TQ), a quota with such claimants (QN), the final placement (TN) —
and a refusal says ``StorageNotReady``, counted per node when many refuse alike."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml

from extender import wellknown
from extender.cache.cache import ClusterCache
from extender.cache.convert import format_time, parse_time
from extender.conf import default_policy, default_policy_text, load_policy_text
from extender.framework.policy import Policy
from extender.framework.session import Session
from extender.framework.status import Reason
from extender.plugins.storage import not_ready
from extender.scheduler import Scheduler
from tests import builders as b

NOW = 1_800_000_000.0
READY_AT = parse_time(b.TS)  # every builder node turned Ready then
MP = "mp001"


def _fs(status: str, heartbeat_after_ready: float) -> dict[str, Any]:
    beat = format_time(READY_AT + heartbeat_after_ready)
    return {"type": wellknown.STORAGE_CONDITION_PREFIX + MP, "status": status, "lastHeartbeatTime": beat}


NODES = {
    "n0": [_fs("True", 60)],  # reported after the node became Ready
    "n1": [_fs("False", 60)],  # reported, not mounted
    "n2": [],  # never reported
    "n3": [_fs("True", -200)],  # last heard of long before the node's Ready transition: stale
    "n4": [_fs("True", -60)],  # an older daemon's heartbeat, within the 90 s tolerance
}


def _cache(nodes: dict[str, list[dict[str, Any]]], extra: Sequence[dict[str, Any]] = ()) -> ClusterCache:
    cache = ClusterCache(clock=lambda: NOW)
    objs = [b.queue("research")] + [b.node(n, conditions=c) for n, c in nodes.items()]
    b.feed(cache, objs + list(extra))
    assert not cache.conversion_errors
    return cache


def _needs_mp(name: str, **kw: Any) -> dict[str, Any]:
    return b.pod(name, hca=None, annotations={wellknown.ANNO_REQUIRED_MOUNT_POINTS: MP}, **kw)


def _policy(tolerance: float) -> Policy:
    doc = yaml.safe_load(default_policy_text())
    doc["plugins"]["storage"]["heartbeat_tolerance_seconds"] = tolerance
    return load_policy_text(yaml.safe_dump(doc), "test")


def test_a_mount_point_is_ready_only_when_true_and_heard_of_since_the_node_became_ready() -> None:
    nodes = _cache(NODES).snapshot(NOW).nodes
    assert {n for n in NODES if not not_ready(nodes[n], [MP], 90.0)} == {"n0", "n4"}
    assert {n for n in NODES if not not_ready(nodes[n], [MP], 0.0)} == {"n0"}  # no tolerance
    assert not_ready(nodes["n2"], [MP, "mp002"], 90.0) == [MP, "mp002"]
    assert not_ready(nodes["n1"], [], 90.0) == []  # a pod that needs none fits anywhere


def test_tn_hop_places_a_pod_only_where_its_mount_points_are_ready() -> None:
    ssn = Session(_cache(NODES, [_needs_mp("p")]).snapshot(NOW), default_policy())
    task = next(t for j in ssn.jobs() for t in j.tasks.values())
    got = {n.name: ssn.tn.predicate(task, n).reason for n in ssn.nodes()}
    assert got == dict.fromkeys(["n1", "n2", "n3"], Reason.STORAGE_NOT_READY) | {"n0": None, "n4": None}
    status = ssn.tn.predicate(task, ssn.node("n2"))
    assert status.message() == f"StorageNotReady(mount point {MP} not ready)"


def test_qn_hop_binds_a_quota_only_where_its_claimants_mount_points_are_ready() -> None:
    objs = [b.quota("q0", hca=None), _needs_mp("p", quota="q0")]
    result = Scheduler(default_policy()).run_once(_cache(NODES, objs).snapshot(NOW))
    assert result.quotas["q0"].node_name in ("n0", "n4")
    # only unready nodes: the job waits, and says why, counting the nodes
    unready = {n: c for n, c in NODES.items() if n in ("n1", "n2", "n3")}
    result = Scheduler(default_policy()).run_once(_cache(unready, objs).snapshot(NOW))
    verdict = result.verdicts["default/p"]
    assert verdict.status.reason is Reason.STORAGE_NOT_READY
    assert f"3 nodes: mount point {MP} not ready" in verdict.status.message()
    # the tolerance is the policy's: without it, n4's older heartbeat does not count
    only_n4 = {"n4": NODES["n4"]}
    assert Scheduler(_policy(90)).run_once(_cache(only_n4, objs).snapshot(NOW)).quotas["q0"].node_name == "n4"
    assert "q0" not in Scheduler(_policy(0)).run_once(_cache(only_n4, objs).snapshot(NOW)).quotas


def test_tq_hop_keeps_a_pod_off_a_quota_bound_where_its_mount_point_is_not_ready() -> None:
    bound = {"phase": "QuotaBound", "nodeName": ""}
    objs = [
        b.quota("q-bad", hca=None, status={**bound, "nodeName": "n2"}),
        b.quota("q-good", hca=None, status={**bound, "nodeName": "n0"}),
        _needs_mp("p"),
    ]
    ssn = Session(_cache(NODES, objs).snapshot(NOW), default_policy())
    task = next(t for j in ssn.jobs() for t in j.tasks.values())
    bad, good = ssn.quota("q-bad"), ssn.quota("q-good")
    assert bad is not None and good is not None
    assert ssn.tq.predicate(task, bad).reason is Reason.STORAGE_NOT_READY
    assert ssn.tq.predicate(task, good).ok
