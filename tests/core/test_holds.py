"""Holds (issue 16 item 4, ``extender/plugins/topology/holds.py``), cycle by cycle through the real
scheduler on a real cache: when a waiting gang starts holding nodes, what it holds, who is kept off
them and who still runs, and when the hold ends.

The cluster: leaf s1 = n0–n3, leaf s2 = n4–n5, 8 GPUs each. One-pod jobs run on n0, n4 and n5 (a
bound quota each, its pod running there), so the gang ``big`` of 4 whole-node workers
fits nowhere: three nodes are free, all in s1 (n5 has 4 GPUs left). Only s1 could ever hold it.
"""

from __future__ import annotations

from typing import Any

from bench.cache_writes import apply_plan, bumped, run_pods
from extender import wellknown
from extender.binder.plan import plan_writes
from extender.cache.cache import ClusterCache
from extender.framework.session import FitStage
from extender.framework.status import Reason
from extender.plugins.topology.holds import Hold
from extender.scheduler import CycleResult, Scheduler
from tests import builders as b
from tests.core.scenarios import policy_with_topology

T0 = 1_800_000_000.0
BY = wellknown.COMPONENT
FILLED = {"n0": 8, "n4": 8, "n5": 4}  # node → GPUs of the running one-pod job there


LEAVES = {f"n{i}": "s1" if i < 4 else "s2" for i in range(6)}  # node → leaf


class Cluster:
    def __init__(
        self,
        leaves: dict[str, str] = LEAVES,
        filled: dict[str, int] = FILLED,
        workers: int = 4,
        min_member: int | None = None,
        **topology: Any,
    ) -> None:
        self.now = T0
        self.cache = ClusterCache(clock=lambda: self.now)
        objs: list[dict[str, Any]] = [b.queue("research")]
        for i, (n, leaf) in enumerate(leaves.items()):
            objs += [b.node(n, index=i), b.topology(n, [leaf])]
        for n, gpu in filled.items():
            bound = {"phase": "QuotaBound", "nodeName": n}
            objs.append(b.quota(f"q-fill-{n}", gpu=gpu, hca=None, status=bound))
            objs.append(b.pod(f"fill-{n}", quota=f"q-fill-{n}", gpu=gpu, hca=None, node=n, phase="Running"))
        objs += b.training_job("big", workers, gpu=8, hca=1, min_member=min_member)
        b.feed(self.cache, objs)
        self.scheduler = Scheduler(policy_with_topology(topology))

    def cycle(self) -> CycleResult:
        result = self.scheduler.run_once(self.cache.snapshot())
        apply_plan(self.cache, plan_writes(self.cache, result, extra_quotas=self.cache.take_dirty_quotas()))
        run_pods(self.cache)
        self.now += 1.0
        return result

    def submit_single(self, name: str, gpu: int = 8) -> None:
        """A one-pod job without topology (no rdma/hca): hop ② places it over all nodes."""
        b.feed(self.cache, [b.quota(f"q-{name}", gpu=gpu, hca=None), b.pod(name, quota=f"q-{name}", gpu=gpu, hca=None)])

    def finish(self, node: str, name: str = "") -> None:
        """The one-pod job on ``node`` (``fill-<node>``, or ``name``) ends: its pod and quota are deleted."""
        name = name or f"fill-{node}"
        (uid,) = [u for u in self.cache.task_job if (self.cache.pod(u) or {})["metadata"]["name"] == name]
        pod, quota = self.cache.pod(uid), self.cache.quota_object(f"q-{name}")
        assert pod is not None and quota is not None
        self.cache.on_pod_delete(pod)
        self.cache.on_quota_delete(quota)

    def replace_node(self, name: str, **changes: Any) -> None:
        """The node ``name`` as ``b.node`` builds it with ``changes`` (an informer update)."""
        old = self.cache.node_object(name)
        assert old is not None
        new = b.node(name, index=int(name.removeprefix("n")), **changes)
        new["metadata"].update(
            uid=old["metadata"]["uid"], resourceVersion=str(int(old["metadata"]["resourceVersion"]) + 1)
        )
        self.cache.on_node_update(old, new)

    def holds(self) -> dict[str, tuple[str, ...]]:
        return {job: h.nodes for job, h in self.scheduler.memory.holds.items()}

    def node_of(self, quota: str) -> str:
        return self.cache.quotas[quota].node_name


def test_a_gang_holds_its_leaf_after_waiting_and_others_are_kept_off_it() -> None:
    c = Cluster(reserve_after_cycles=3)
    for _ in range(3):
        c.cycle()
    assert c.holds() == {}  # its plan failed in 3 cycles: from the next one on it holds
    c.cycle()
    # the only zone that could ever hold it, as many nodes as it needs
    assert c.holds() == {"default/big": ("n0", "n1", "n2", "n3")}
    c.submit_single("solo")
    result = c.cycle()
    assert c.node_of("q-solo") == ""  # n1–n3 are free but held; n4 and n5 are full
    verdict = result.verdicts["default/solo"]
    assert verdict.status.reason is Reason.NODE_HELD_FOR_GANG
    assert verdict.stage is FitStage.NODE_PREDICATES
    # the node that blocked the gang frees up: the gang runs on its held leaf and the hold ends
    c.finish("n0")
    c.cycle()
    assert sorted(c.node_of(f"q-big-{i}") for i in range(4)) == ["n0", "n1", "n2", "n3"]
    assert c.holds() == {}


def test_without_holds_the_single_job_takes_a_node_the_gang_needs() -> None:
    """The same sequence with holds off: what the hold prevents happens."""
    c = Cluster(reserve_after_cycles=0)
    for _ in range(4):
        c.cycle()
    assert c.holds() == {}
    c.submit_single("solo")
    c.cycle()
    assert c.node_of("q-solo") == "n1"  # the free nodes score alike: the lowest index
    c.finish("n0")
    c.cycle()
    assert all(c.node_of(f"q-big-{i}") == "" for i in range(4))  # still 3 free nodes: big waits on


def test_a_job_that_fits_off_the_held_nodes_still_runs() -> None:
    c = Cluster(reserve_after_cycles=1)
    c.cycle()
    c.cycle()
    assert c.holds() == {"default/big": ("n0", "n1", "n2", "n3")}
    c.submit_single("solo", gpu=4)  # fits n5, which the gang cannot use
    c.submit_single("whole")  # fits only held nodes
    c.cycle()
    assert c.node_of("q-solo") == "n5"
    assert c.node_of("q-whole") == ""


def test_a_hold_ends_after_hold_seconds_and_is_not_taken_again_at_once() -> None:
    c = Cluster(reserve_after_cycles=2, hold_seconds=5)
    for _ in range(3):
        c.cycle()
    assert c.holds() == {"default/big": ("n0", "n1", "n2", "n3")}
    c.now += 10  # the hold is older than hold_seconds
    c.submit_single("solo")
    c.cycle()
    assert c.holds() == {}  # expired, and the gang's failed cycles count from zero again
    assert c.node_of("q-solo") == "n1"
    c.cycle()
    assert c.holds() == {}  # failed 1 cycle since: not yet
    c.cycle()
    assert c.holds() == {"default/big": ("n0", "n1", "n2", "n3")}  # 2 cycles: it holds again


def test_a_statically_bound_quota_is_pinned_on_a_held_node() -> None:
    """``spec.staticBindNode`` is the operator's choice of node: a hold does not overrule it."""
    c = Cluster(reserve_after_cycles=1)
    c.cycle()
    c.cycle()
    assert c.holds() == {"default/big": ("n0", "n1", "n2", "n3")}
    b.feed(c.cache, [b.quota("q-pinned", gpu=2, hca=None, static_bind_node="n2")])
    c.cycle()
    assert c.node_of("q-pinned") == "n2"


def test_a_hold_moves_to_where_more_room_has_freed_up_keeping_its_start() -> None:
    """Leaves s1 = n0–n3 and s2 = n4–n7, all full but n3; the gang needs 4 whole nodes, so only a
    whole leaf holds it. It first holds s1 (room for 1 now, n3). Then n4 and n5 free up (3 free
    nodes in all: it still waits): s2 has room for 2 now, so the hold moves there, and a one-pod
    job then takes n3, which is no longer held, not n4 or n5. When n6 and n7 free up the gang runs
    in s2."""
    leaves = {f"n{i}": "s1" if i < 4 else "s2" for i in range(8)}
    filled = {n: 8 for n in leaves if n != "n3"}
    c = Cluster(leaves, filled, workers=4, reserve_after_cycles=1)
    c.cycle()
    c.cycle()
    assert c.holds() == {"default/big": ("n0", "n1", "n2", "n3")}
    since = c.scheduler.memory.holds["default/big"].since
    c.finish("n4")
    c.finish("n5")
    c.cycle()
    assert c.holds() == {"default/big": ("n4", "n5", "n6", "n7")}
    assert c.scheduler.memory.holds["default/big"].since == since  # hold_seconds counts from the start
    c.submit_single("solo")
    c.cycle()
    assert c.node_of("q-solo") == "n3"
    c.finish("n6")
    c.finish("n7")
    c.cycle()
    assert sorted(c.node_of(f"q-big-{i}") for i in range(4)) == ["n4", "n5", "n6", "n7"]
    assert c.holds() == {}


def test_a_hold_stays_while_no_other_set_has_more_room_now() -> None:
    """The same cluster; only n4 frees up: s2's room now (1) is no more than the held leaf's (1,
    n3), so the hold stays where the gang's room is already kept."""
    leaves = {f"n{i}": "s1" if i < 4 else "s2" for i in range(8)}
    filled = {n: 8 for n in leaves if n != "n3"}
    c = Cluster(leaves, filled, workers=4, reserve_after_cycles=1)
    c.cycle()
    c.cycle()
    c.finish("n4")
    c.cycle()
    assert c.holds() == {"default/big": ("n0", "n1", "n2", "n3")}


def two_waiting_gangs(max_holds: int) -> Cluster:
    """Leaves s1 = n0–n3 and s2 = n4–n7; free: n2, n3 (s1) and n7 (s2), so neither 4-node gang
    fits (3 free nodes in all). ``big`` is older than ``big2``."""
    leaves = {f"n{i}": "s1" if i < 4 else "s2" for i in range(8)}
    filled = dict.fromkeys(("n0", "n1", "n4", "n5", "n6"), 8)
    c = Cluster(leaves, filled, workers=4, reserve_after_cycles=1, max_holds=max_holds)
    younger = b.training_job("big2", 4, gpu=8, hca=1)
    for o in younger:
        o["metadata"]["creationTimestamp"] = "2030-01-01T00:00:00Z"
    b.feed(c.cache, younger)
    return c


def test_at_most_max_holds_gangs_hold_the_oldest_first() -> None:
    c = two_waiting_gangs(max_holds=1)
    for _ in range(3):
        c.cycle()
    assert c.holds() == {"default/big": ("n0", "n1", "n2", "n3")}  # the roomier leaf, for the older gang
    c = two_waiting_gangs(max_holds=2)
    for _ in range(3):
        c.cycle()
    assert c.holds() == {"default/big": ("n0", "n1", "n2", "n3"), "default/big2": ("n4", "n5", "n6", "n7")}


def test_a_new_leader_continues_a_recorded_hold_and_lets_an_expired_one_go() -> None:
    """``Scheduler.take_over``: the holds the PodGroups record replace what the new leader's
    scheduler remembered; a hold keeps its start, so one older than ``hold_seconds`` ends at once."""
    c = Cluster(reserve_after_cycles=1, hold_seconds=60)
    c.cycle()
    c.cycle()
    held = dict(c.scheduler.memory.holds)
    assert {job: h.nodes for job, h in held.items()} == {"default/big": ("n0", "n1", "n2", "n3")}

    fresh = Scheduler(c.scheduler.policy)
    fresh.take_over(held)
    c.scheduler = fresh
    c.submit_single("solo")
    c.cycle()
    assert c.holds() == {"default/big": ("n0", "n1", "n2", "n3")}
    assert c.scheduler.memory.holds["default/big"].since == held["default/big"].since
    assert c.node_of("q-solo") == ""  # kept off the held nodes from the new leader's first cycle

    old = {"default/big": Hold(("n0", "n1", "n2", "n3"), c.now - 61)}  # begun before hold_seconds
    c.scheduler = Scheduler(c.scheduler.policy)
    c.scheduler.take_over(old)
    c.cycle()
    assert c.holds() == {}
    assert c.node_of("q-solo") == "n1"


def test_a_node_too_small_for_a_worker_is_not_held() -> None:
    """Leaf s1 = n0–n3; n0 has 7 GPUs left allocatable (one failed), n1 and n2 are full. ``big``
    (3 workers of 8 GPUs) can never use n0: it holds n1–n3, and a 4-GPU one-pod job still runs
    on n0."""
    c = Cluster({f"n{i}": "s1" for i in range(4)}, {"n1": 8, "n2": 8}, workers=3, reserve_after_cycles=1)
    c.replace_node("n0", gpu=7)
    for _ in range(3):
        c.cycle()
    assert c.holds() == {"default/big": ("n1", "n2", "n3")}
    c.submit_single("solo", gpu=4)
    c.cycle()
    assert c.node_of("q-solo") == "n0"


def test_a_partly_bound_gang_holds_only_nodes_of_its_bound_quotas_gpu_model() -> None:
    """n0–n1 are A100 (leaf s1), n2–n5 H100 (leaf s2). ``big`` (2 whole-node workers, no GPU model
    asked) has worker 0 bound and running on n0; n1 is full, so worker 1 waits: it may go only
    to an A100 node (a gang never mixes models). Its hold must be n1, never an H100 node it could
    not use (and which other jobs would be kept off for nothing)."""
    c = Cluster({f"n{i}": "s1" if i < 2 else "s2" for i in range(6)}, {"n1": 8}, workers=2, reserve_after_cycles=1)
    for i in range(2, 6):
        c.replace_node(f"n{i}", gpu_model="H100")
    quota, pod = c.cache.quota_object("q-big-0"), c.cache.pod_by_name("default", "big-worker-0")
    assert quota is not None and pod is not None
    c.cache.on_quota_update(quota, bumped(quota, status={"phase": "QuotaBound", "nodeName": "n0", "boundBy": BY}))
    c.cache.on_pod_update(pod, bumped(pod, spec={**pod["spec"], "nodeName": "n0"}, status={"phase": "Running"}))
    for _ in range(3):
        c.cycle()
    assert c.node_of("q-big-1") == ""
    assert c.holds() == {"default/big": ("n1",)}


def test_turning_holds_off_in_the_policy_ends_the_holds_in_force() -> None:
    """A policy reload with ``reserve_after_cycles: 0`` (the documented off switch): the hold
    taken under the old policy ends at once, and a one-pod job takes a node it held."""
    c = Cluster(reserve_after_cycles=1)
    c.cycle()
    c.cycle()
    assert c.holds() == {"default/big": ("n0", "n1", "n2", "n3")}
    c.scheduler.swap_policy(policy_with_topology({"reserve_after_cycles": 0}))
    c.submit_single("solo")
    c.cycle()
    assert c.holds() == {}
    assert c.node_of("q-solo") == "n1"


def test_a_lower_max_holds_ends_the_holds_of_the_youngest_gangs() -> None:
    c = two_waiting_gangs(max_holds=2)
    for _ in range(3):
        c.cycle()
    assert set(c.holds()) == {"default/big", "default/big2"}
    c.now += 5  # big2's hold is the younger one: take it from a later cycle
    c.scheduler.memory.holds["default/big2"] = Hold(c.holds()["default/big2"], c.now - 1)
    c.scheduler.swap_policy(policy_with_topology({"reserve_after_cycles": 1, "max_holds": 1}))
    c.cycle()
    assert c.holds() == {"default/big": ("n0", "n1", "n2", "n3")}


def test_a_gang_with_a_hard_leaf_limit_holds_within_one_leaf_only() -> None:
    """Leaves s1 = n0–n1, s2 = n2–n3; n0 is full. ``big`` (3 whole-node workers) must stay in one
    leaf (``highestTierAllowed: leaf``, mode hard), and no leaf ever holds it: it holds nothing
    (a hold across leaves would keep others off nodes it can never use), and a one-pod job runs."""
    leaves = {"n0": "s1", "n1": "s1", "n2": "s2", "n3": "s2"}
    c = Cluster(leaves, {"n0": 8}, workers=3, reserve_after_cycles=1)
    pg = c.cache.podgroup_object("default/big")
    assert pg is not None
    spec = {**pg["spec"], "topology": {"highestTierAllowed": "leaf", "mode": "hard"}}
    c.cache.on_podgroup_update(pg, bumped(pg, spec=spec))
    for _ in range(3):
        result = c.cycle()
    assert result.verdicts["default/big"].status.reason is Reason.FITS_ONLY_ABOVE_ALLOWED_TIER
    assert c.holds() == {}
    c.submit_single("solo")
    c.cycle()
    assert c.node_of("q-solo") == "n1"


def test_a_hold_over_two_leaves_lists_its_nodes_in_node_index_order() -> None:
    """Leaf ``b`` = n0–n1, leaf ``a`` = n2–n3 (names not in index order); n0 is full, so ``big``
    (4 whole-node workers) holds both leaves. The hold and /diagnose read n0–n3, not ``n2–n1``."""
    c = Cluster({"n0": "b", "n1": "b", "n2": "a", "n3": "a"}, {"n0": 8}, workers=4, reserve_after_cycles=1)
    for _ in range(3):
        result = c.cycle()
    assert c.holds() == {"default/big": ("n0", "n1", "n2", "n3")}
    assert "HoldingNodes(n0–n3 (4 nodes) for default/big)" in result.verdicts["default/big"].status.message()


def test_a_gang_running_at_its_min_member_holds_nothing_for_the_rest() -> None:
    """``big`` (4 whole-node workers, minMember 2) runs three on n1–n3; its fourth waits for room.
    That is a running gang short of room for one more member, not a waiting gang: it earns no hold,
    and a one-pod job still takes the next node that frees up."""
    c = Cluster(min_member=2, reserve_after_cycles=1)
    for _ in range(4):
        result = c.cycle()
    assert [c.node_of(f"q-big-{i}") for i in range(4)] == ["n1", "n2", "n3", ""]
    assert result.verdicts["default/big"].status.reason is Reason.NO_ZONE_FITS
    assert c.holds() == {}
    assert c.scheduler.memory.gang_waits == {}
    c.finish("n4")
    c.submit_single("solo")
    c.cycle()
    assert "n4" in (c.node_of("q-solo"), c.node_of("q-big-3"))


def test_a_hold_ends_when_its_gang_reaches_its_min_member() -> None:
    """``big`` (4 whole-node workers) holds s1 after waiting; its PodGroup then lowers minMember to
    3, so the three free nodes of s1 let it run: the hold ends with that, while a fourth worker
    still waits."""
    c = Cluster(reserve_after_cycles=1)
    for _ in range(3):
        c.cycle()
    assert c.holds() == {"default/big": ("n0", "n1", "n2", "n3")}
    pg = c.cache.podgroup_object("default/big")
    assert pg is not None
    c.cache.on_podgroup_update(pg, bumped(pg, spec={**pg["spec"], "minMember": 3}))
    c.cycle()
    assert sorted(c.node_of(f"q-big-{i}") for i in range(4)) == ["", "n1", "n2", "n3"]
    assert c.holds() == {}


def test_a_hold_lasts_only_while_its_gang_could_run_were_the_nodes_free() -> None:
    """``big`` holds s1. It then backs off (its quotas released once): it could not run this cycle
    even on empty nodes, so its hold ends — it keeps its count of failed cycles — and a one-pod job
    takes a node of s1 rather than leave it idle for ``hold_seconds``. The cycle its back-off is
    over, ``big`` fails again and holds at once."""
    c = Cluster(reserve_after_cycles=1)
    for _ in range(3):
        c.cycle()
    assert c.holds() == {"default/big": ("n0", "n1", "n2", "n3")}
    c.scheduler.memory.backoff["default/big"] = c.now + 0.5  # over by the cycle after next
    c.submit_single("solo")
    result = c.cycle()
    assert result.verdicts["default/big"].status.reason is Reason.BACKOFF
    assert c.node_of("q-solo") == "n1"
    assert c.holds() == {}
    c.cycle()
    assert c.holds() == {"default/big": ("n0", "n1", "n2", "n3")}


def test_a_gang_missing_a_pod_holds_nothing() -> None:
    """``big`` holds s1, then a pod of it is deleted (its controller makes a new one): a gang short
    of minMember pods cannot run, so its hold ends and a one-pod job may take a node of s1."""
    c = Cluster(reserve_after_cycles=1)
    for _ in range(3):
        c.cycle()
    assert c.holds() == {"default/big": ("n0", "n1", "n2", "n3")}
    pod = c.cache.pod_by_name("default", "big-worker-3")
    assert pod is not None
    c.cache.on_pod_delete(pod)
    c.submit_single("solo")
    result = c.cycle()
    assert result.verdicts["default/big"].status.reason is Reason.GANG_NOT_READY
    assert c.node_of("q-solo") == "n1"
    assert c.holds() == {}
