"""The two paths besides "quota bound": single-pod jobs placed inline (QN pipeline over the
candidates, bind binds quota and pod together) and spot pods (TN pipeline with the sylas pools),
over real HTTP, request documents as kube-scheduler marshals them, every reply field checked."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from extender import wellknown
from extender.cache.cache import ClusterCache
from extender.model.task import TaskStatus
from tests import builders as b
from tests.extender.wire import (
    FILTER_KEYS,
    JSON,
    NOW,
    RecordingWriter,
    args,
    args_full,
    binding,
    cache_of,
    served,
    state_of,
)

pytestmark = pytest.mark.anyio

Obj = dict[str, Any]
INLINE_NODES = ["n0", "n1", "n2", "n3", "gone"]


def _inline_cluster() -> list[Obj]:
    objs: list[Obj] = [b.queue("research"), b.queue("other")]
    for i in range(4):
        objs += [b.node(f"n{i}", ready=i != 3), b.topology(f"n{i}", ["s1"])]
    # n1: 6 of 8 GPUs promised to another queue's quota; n2: all 8
    objs.append(b.quota("q-other", queue="other", gpu=6, hca=None, status={"phase": "QuotaBound", "nodeName": "n1"}))
    objs.append(b.quota("q-full", queue="other", gpu=8, hca=None, status={"phase": "QuotaBound", "nodeName": "n2"}))
    objs.append(b.quota("q-solo", gpu=2, hca=None))
    return objs


def _solo(**kw: Any) -> Obj:
    """A single-pod job without topology (no rdma request, no PodGroup), no quota yet."""
    return b.pod("solo", gpu=2, hca=None, annotations={wellknown.ANNO_QUEUE_NAME: "research"}, **kw)


@pytest.fixture
def inline_cache() -> ClusterCache:
    return cache_of([*_inline_cluster(), _solo()])


async def test_inline_filter_runs_the_qn_pipeline_over_the_candidates(inline_cache: ClusterCache) -> None:
    pod = inline_cache.pod(_solo_uid(inline_cache))
    assert pod is not None
    async with served(state_of(inline_cache)) as c:
        r = await c.post("/filter", content=args(dict(pod), INLINE_NODES), headers=JSON)
        rest = await c.post("/filter", content=args(dict(pod), ["n2", "n3", "gone"]), headers=JSON)
    assert r.status_code == 200
    body = r.json()
    assert list(body) == FILTER_KEYS
    assert body["Nodes"] is None
    assert body["NodeNames"] == ["n0", "n1"]  # both have room for the 2-GPU quota and the pod
    assert body["FailedNodes"] == body["FailedAndUnresolvableNodes"] == {}  # nodes pass: the lean reply
    assert body["Error"] == ""
    # the others alone: nothing passes, and each says why (resolvable or not)
    body = rest.json()
    assert body["NodeNames"] == []
    assert body["FailedNodes"] == {"n2": "InsufficientQuotaIdle(nvidia.com/gpu 2 > 0)"}
    assert body["FailedAndUnresolvableNodes"] == {"n3": "NodeNotReady(n3)", "gone": "NodeNotFound(gone)"}


async def test_inline_prioritize_scales_qn_scores_to_0_10(inline_cache: ClusterCache) -> None:
    pod = inline_cache.pod(_solo_uid(inline_cache))
    assert pod is not None
    async with served(state_of(inline_cache)) as c:
        r = await c.post("/prioritize", content=args(dict(pod), INLINE_NODES), headers=JSON)
        full = await c.post(
            "/prioritize",
            content=args_full(dict(pod), [inline_cache.node_object(n) for n in ("n0", "n1")]),  # type: ignore[misc]
            headers=JSON,
        )
    body = r.json()
    assert isinstance(body, list)
    assert [h["Host"] for h in body] == INLINE_NODES  # every candidate, in the order sent
    assert all(set(h) == {"Host", "Score"} and isinstance(h["Score"], int) for h in body)
    scores = {h["Host"]: h["Score"] for h in body}
    assert all(0 <= s <= 10 for s in scores.values())
    # binpack: the fuller of the two feasible nodes is best; the infeasible ones score nothing
    assert scores["n1"] == 10
    assert scores["n0"] < scores["n1"]
    assert scores["n2"] == scores["n3"] == scores["gone"] == 0
    # the Nodes form of the request gets the same answer for those nodes
    assert full.json() == [{"Host": "n0", "Score": scores["n0"]}, {"Host": "n1", "Score": 10}]


async def test_inline_filter_answers_the_nodes_form_with_the_node_objects(inline_cache: ClusterCache) -> None:
    pod = inline_cache.pod(_solo_uid(inline_cache))
    nodes = [inline_cache.node_object(n) for n in ("n0", "n1", "n2", "n3")]
    assert pod is not None and all(n is not None for n in nodes)
    async with served(state_of(inline_cache)) as c:
        body = (await c.post("/filter", content=args_full(dict(pod), nodes), headers=JSON)).json()  # type: ignore[arg-type]
    assert list(body) == FILTER_KEYS
    assert body["NodeNames"] is None
    assert body["Nodes"]["kind"] == "NodeList" and body["Nodes"]["metadata"] == {"resourceVersion": "77"}
    assert body["Nodes"]["items"] == [nodes[0], nodes[1]]  # the objects sent, untouched
    assert body["FailedNodes"] == body["FailedAndUnresolvableNodes"] == {}  # nodes pass: the lean reply
    assert body["Error"] == ""
    async with served(state_of(inline_cache)) as c:
        body = (await c.post("/filter", content=args_full(dict(pod), nodes[2:]), headers=JSON)).json()  # type: ignore[arg-type]
    assert body["Nodes"]["items"] == []
    assert set(body["FailedNodes"]) == {"n2"}
    assert set(body["FailedAndUnresolvableNodes"]) == {"n3"}


async def test_inline_bind_binds_quota_and_pod_together(inline_cache: ClusterCache) -> None:
    uid = _solo_uid(inline_cache)
    pod = inline_cache.pod(uid)
    assert pod is not None
    writer = RecordingWriter(inline_cache)
    async with served(state_of(inline_cache, writer=writer)) as c:
        r = await c.post("/bind", content=binding(dict(pod), "n1"), headers=JSON)
    assert r.json() == {"Error": ""}
    # the quota's status first (QuotaEmpty → QuotaBound on n1, the pod's claim recorded with it) …
    [(name, status)] = writer.quota_writes
    assert name == "q-solo"
    assert {k: status[k] for k in ("phase", "nodeName", "boundBy", "allocated")} == {
        "phase": "QuotaBound",
        "nodeName": "n1",
        "boundBy": "sky-scheduler",
        "allocated": {"nvidia.com/gpu": "2"},
    }
    [entry] = status["tasks"]
    assert entry["uid"] == "admission:" + uid and entry["name"] == "solo" and entry["expiresAt"]
    assert entry["request"] == {"nvidia.com/gpu": "2"}  # the quota's resource names only
    # … then the Binding, which carries the claim (quota-name) and the decision
    assert writer.bindings == [
        (
            "default",
            "solo",
            uid,
            "n1",
            {
                wellknown.ANNO_QUOTA_NAME: "q-solo",
                wellknown.ANNO_QUOTA_NODE: "n1",
                wellknown.ANNO_BIND_DECISION: "inline-quota",
            },
        )
    ]
    # the extender's own view: quota bound, pod assumed on the node (kube-scheduler never tells it)
    assert inline_cache.quotas["q-solo"].node_name == "n1"
    assert inline_cache.nodes["n1"].has_quota("q-solo")
    assert uid in inline_cache.assumed and inline_cache.assumed[uid].node == "n1"
    task = inline_cache.task(uid)
    assert task is not None and task.status is TaskStatus.BINDING and task.node == "n1"


async def test_inline_bind_refuses_a_node_the_pipeline_rejects(inline_cache: ClusterCache) -> None:
    uid = _solo_uid(inline_cache)
    pod = inline_cache.pod(uid)
    assert pod is not None
    writer = RecordingWriter(inline_cache)
    async with served(state_of(inline_cache, writer=writer)) as c:
        r = await c.post("/bind", content=binding(dict(pod), "n2"), headers=JSON)
    err = r.json()["Error"]
    assert err.startswith("cannot bind default/solo to n2: ")
    assert "InsufficientQuotaIdle(nvidia.com/gpu 2 > 0)" in err
    assert writer.quota_writes == [] and writer.bindings == []
    assert inline_cache.assumed == {}
    assert not inline_cache.quotas["q-solo"].node_name


async def test_a_bound_quota_chosen_inline_is_rechecked_against_the_nodes_idle() -> None:
    """A lone pod without a claim whose TQ choice is a quota already bound to n1: n1 passes only
    if the pod fits n1's idle — here a pod of another scheduler uses every GPU of n1."""
    objs: list[Obj] = [b.queue("research")]
    for i in range(2):
        objs += [b.node(f"n{i}"), b.topology(f"n{i}", ["s1"])]
    objs.append(b.quota("q-home", gpu=4, hca=None, status={"phase": "QuotaBound", "nodeName": "n1"}))
    objs.append(b.pod("intruder", namespace="other", gpu=8, hca=None, node="n1", phase="Running", scheduler="x"))
    cache = cache_of([*objs, _solo()])
    pod = cache.pod(_solo_uid(cache))
    assert pod is not None
    async with served(state_of(cache)) as c:
        body = (await c.post("/filter", content=args(dict(pod), ["n0", "n1"]), headers=JSON)).json()
    assert body["NodeNames"] == []
    assert body["FailedNodes"] == {}
    assert body["FailedAndUnresolvableNodes"] == {
        "n0": "QuotaBoundElsewhere(quota q-home is bound to n1)",
        "n1": "InsufficientIdle(nvidia.com/gpu 2 > 0)",
    }


def _solo_uid(cache: ClusterCache) -> str:
    obj = cache.pod_by_name("default", "solo")
    assert obj is not None
    return str(obj["metadata"]["uid"])


# --- spot pods: TN pipeline with the sylas pools ------------------------------------------------

SPOT = wellknown.RESOURCE_SPOT_GPU
SPOT_NODES = ["s0", "s1", "s2", "s3", "s4"]


def _spot_cluster() -> list[Obj]:
    objs: list[Obj] = []
    spot8 = {SPOT: "8"}
    objs.append(b.node("s0", extra_allocatable=spot8, annotations={wellknown.ANNO_SPOT_SHARED: "2"}))
    objs.append(b.node("s1", extra_allocatable=spot8))  # every GPU promised to a quota
    objs.append(b.node("s2", extra_allocatable=spot8))  # exclusive pool used up
    objs.append(b.node("s3"))  # lends no spot GPUs
    objs.append(b.node("s4", extra_allocatable=spot8, ready=False))
    objs.append(b.quota("q-x", gpu=8, hca=None, status={"phase": "QuotaBound", "nodeName": "s1"}))
    for i in range(2):
        objs.append(
            b.pod(f"filler-{i}", namespace="batch", gpu=4, hca=None, extra={SPOT: "4"}, node="s2", phase="Running")
        )
    return objs


def _spot_pod(name: str, amount: int, pool: str | None = None) -> Obj:
    anno = {wellknown.ANNO_SPOT_POOL: pool} if pool else None
    return b.pod(name, namespace="batch", gpu=amount, hca=None, extra={SPOT: str(amount)}, annotations=anno)


async def test_spot_filter_and_prioritize_use_the_tn_pipeline_with_sylas_pools() -> None:
    pod = _spot_pod("spot", 2)
    cache = cache_of([*_spot_cluster(), pod])
    async with served(state_of(cache)) as c:
        body = (await c.post("/filter", content=args(pod, SPOT_NODES), headers=JSON)).json()
        rest = (await c.post("/filter", content=args(pod, SPOT_NODES[2:]), headers=JSON)).json()
        scores = (await c.post("/prioritize", content=args(pod, SPOT_NODES), headers=JSON)).json()
    assert list(body) == FILTER_KEYS
    assert body["NodeNames"] == ["s0", "s1"]
    assert body["FailedNodes"] == body["FailedAndUnresolvableNodes"] == {}  # nodes pass: the lean reply
    assert rest["NodeNames"] == []
    assert rest["FailedNodes"] == {}
    assert rest["FailedAndUnresolvableNodes"] == {
        "s2": "SpotPoolExhausted(exclusive spot pool has 0 of 2 left)",
        "s3": "SpotPoolExhausted(exclusive spot pool has 0 of 2 left)",
        "s4": "NodeNotReady(s4)",
    }
    assert body["Error"] == ""
    assert [h["Host"] for h in scores] == SPOT_NODES
    by_host = {h["Host"]: h["Score"] for h in scores}
    # sylas: a node whose GPUs no quota holds is preferred (its spot pods are evicted later)
    assert by_host == {"s0": 10, "s1": 0, "s2": 0, "s3": 0, "s4": 0}


async def test_spot_pod_of_the_shared_pool_fits_only_the_shared_pool() -> None:
    small, big = _spot_pod("small", 2, "shared"), _spot_pod("big", 3, "shared")
    cache = cache_of([*_spot_cluster(), small, big])
    async with served(state_of(cache)) as c:
        ok = (await c.post("/filter", content=args(small, ["s0", "s1"]), headers=JSON)).json()
        ok_rest = (await c.post("/filter", content=args(small, ["s1"]), headers=JSON)).json()
        no = (await c.post("/filter", content=args(big, ["s0", "s1"]), headers=JSON)).json()
    assert ok["NodeNames"] == ["s0"]
    assert ok["FailedAndUnresolvableNodes"] == {}
    assert ok_rest["FailedAndUnresolvableNodes"] == {"s1": "SpotPoolExhausted(shared spot pool has 0 of 2 left)"}
    assert no["NodeNames"] == []
    assert no["FailedAndUnresolvableNodes"] == {
        "s0": "SpotPoolExhausted(shared spot pool has 2 of 3 left)",
        "s1": "SpotPoolExhausted(shared spot pool has 0 of 3 left)",
    }


async def test_spot_bind_binds_without_quota_and_assumes_the_pool() -> None:
    first, second = _spot_pod("spot-a", 4), _spot_pod("spot-b", 4)
    cache = cache_of([*_spot_cluster(), first, second])
    writer = RecordingWriter(cache)
    async with served(state_of(cache, writer=writer)) as c:
        r = await c.post("/bind", content=binding(first, "s0"), headers=JSON)
        # the assumed pod holds 4 of the 6 exclusive spot GPUs of s0: the next 4 do not fit
        after = (await c.post("/filter", content=args(second, ["s0"]), headers=JSON)).json()
    assert r.json() == {"Error": ""}
    assert writer.quota_writes == []
    assert writer.bindings == [
        ("batch", "spot-a", first["metadata"]["uid"], "s0", {wellknown.ANNO_BIND_DECISION: "spot"})
    ]
    assert after["NodeNames"] == []
    assert after["FailedAndUnresolvableNodes"] == {"s0": "SpotPoolExhausted(exclusive spot pool has 2 of 4 left)"}


async def test_spot_preemptor_gets_no_victims() -> None:
    pod = _spot_pod("spot", 2)
    cache = cache_of([*_spot_cluster(), pod])
    victims = list(cache.nodes["s2"].tasks)
    body = {
        "Pod": pod,
        "NodeNameToVictims": None,
        "NodeNameToMetaVictims": {"s2": {"Pods": [{"UID": u} for u in victims], "NumPDBViolations": 0}},
    }
    async with served(state_of(cache)) as c:
        r = await c.post("/preempt", content=orjson.dumps(body), headers=JSON)
    assert r.json() == {"NodeNameToMetaVictims": {}}


@pytest.mark.parametrize("leads", [True, False])
async def test_inline_filter_keeps_off_nodes_held_for_a_waiting_gang(inline_cache: ClusterCache, leads: bool) -> None:
    """Holds (issue 16 item 4) live in the binder's scheduler memory; the extender's snapshot
    carries them while this replica leads, so a pod bound inline keeps off held nodes too."""
    from extender.binder.loop import BinderLoop
    from extender.conf import default_policy
    from extender.plugins.topology.holds import Hold
    from extender.scheduler import Scheduler

    pod = inline_cache.pod(_solo_uid(inline_cache))
    assert pod is not None
    scheduler = Scheduler(default_policy())
    scheduler.memory.holds = {"default/big": Hold(("n0",), since=1_000_000.0 - 5)}
    loop = BinderLoop(inline_cache, scheduler, RecordingWriter(inline_cache), is_leader=lambda: leads)
    async with served(state_of(inline_cache, loop=loop, is_leader=lambda: leads)) as c:
        r = await c.post("/filter", content=args(dict(pod), INLINE_NODES), headers=JSON)
        only = await c.post("/filter", content=args(dict(pod), ["n0"]), headers=JSON)
    if not leads:  # a replica that runs no cycles knows only recorded holds (none here: no PodGroup)
        assert r.json()["NodeNames"] == ["n0", "n1"]
        return
    assert r.json()["NodeNames"] == ["n1"]
    assert only.json()["NodeNames"] == []
    assert only.json()["FailedNodes"] == {"n0": "NodeHeldForGang(held for gang default/big)"}


@pytest.mark.parametrize("where", ["podgroup", "quota"])
async def test_a_replica_that_does_not_lead_keeps_off_the_holds_the_leader_recorded(
    inline_cache: ClusterCache, where: str
) -> None:
    """The leader records each hold — a gang's in its PodGroup's ``status.hold``, a job of one
    pod's in the ``status.hold`` of the quota it claims: a replica that runs no cycles reads it
    from its cache, and its inline filter keeps off the held nodes too; once the leader removes
    it (the hold ended), the node is offered again."""
    pod = inline_cache.pod(_solo_uid(inline_cache))
    assert pod is not None
    from extender.cache.convert import format_time

    hold = {"nodes": ["n0"], "since": format_time(NOW - 5)}
    if where == "podgroup":
        holder, obj = "default/big", b.podgroup("big", min_member=4)
        obj["status"] = {"phase": "Unschedulable", "hold": hold}
        add, update = inline_cache.on_podgroup_add, inline_cache.on_podgroup_update
        ended_status = {"phase": "Pending"}
    else:
        holder, obj = "default/lone", b.quota("q-lone", gpu=8)
        obj["status"] = {"phase": "QuotaEmpty", "hold": {"job": "default/lone", **hold}}
        add, update = inline_cache.on_quota_add, inline_cache.on_quota_update
        ended_status = {"phase": "QuotaEmpty"}
    add(obj)
    state = state_of(inline_cache, is_leader=lambda: False)
    async with served(state) as c:
        held = await c.post("/filter", content=args(dict(pod), ["n0"]), headers=JSON)
        update(obj, dict(obj, status=ended_status, metadata={**obj["metadata"], "resourceVersion": "2"}))
        free = await c.post("/filter", content=args(dict(pod), ["n0"]), headers=JSON)
    assert held.json()["FailedNodes"] == {"n0": f"NodeHeldForGang(held for gang {holder})"}
    assert free.json()["NodeNames"] == ["n0"]
