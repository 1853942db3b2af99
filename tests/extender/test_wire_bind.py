"""``/bind`` and ``/preempt`` over real HTTP: every answer kube-scheduler can get, byte-exact
requests (the research note's samples and variants), the Binding and the extender's ledgers
checked after each. The API writes go to a recording writer; test_e2e does them for real."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from extender import wellknown
from extender.cache.cache import ClusterCache
from extender.kube.errors import ApiFailure, BindConflict, GiveUp, NotFound
from extender.model.resources import Resource
from extender.model.task import TaskStatus
from extender.state import ServiceState
from tests import builders as b
from tests.extender.test_wire import NODES, _cluster, _sample, _sample_pod
from tests.extender.wire import JSON, RecordingWriter, binding, cache_of, served, state_of

pytestmark = pytest.mark.anyio

Obj = dict[str, Any]
UID = "6b0f3c2e-9d4a-4f3e-8a51-3c1d2e7f9a10"  # the sample pod


@pytest.fixture
def cache() -> ClusterCache:
    pod = _sample_pod()
    pod.setdefault("status", {"phase": "Pending"})
    return cache_of([*_cluster(), pod])


def _idle(cache: ClusterCache, node: str) -> Resource:
    return cache.nodes[node].idle.clone()


async def test_bind_sample_creates_the_binding_and_assumes_the_pod(cache: ClusterCache) -> None:
    writer = RecordingWriter(cache)
    before = _idle(cache, "gpu-n01")
    async with served(state_of(cache, writer=writer)) as c:
        r = await c.post("/bind", content=_sample("extender-bind-request.json"), headers=JSON)
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    assert r.content == b'{"Error":""}'  # ExtenderBindingResult, exactly
    assert writer.bindings == [
        (
            "ml-research",
            "llama-sft-worker-1",
            UID,
            "gpu-n01",
            {wellknown.ANNO_QUOTA_NODE: "gpu-n01", wellknown.ANNO_BIND_DECISION: "quota"},
        )
    ]
    assert writer.quota_writes == []  # the quota was bound by the binder already
    # the extender's own assumed allocation: kube-scheduler never tells it about pods it assumed
    assert cache.assumed[UID].node == "gpu-n01"
    task = cache.task(UID)
    assert task is not None and task.status is TaskStatus.BINDING and task.node == "gpu-n01"
    after = _idle(cache, "gpu-n01")
    assert after.get(wellknown.RESOURCE_GPU) == before.get(wellknown.RESOURCE_GPU) - 8000
    # filter now passes the node again for this pod only (a retry), and says so for the others
    doc = json.loads(_sample("extender-filter-request.json"))
    async with served(state_of(cache, writer=writer)) as c:
        body = (await c.post("/filter", json=doc)).json()
        doc["NodeNames"] = [n for n in NODES if n != "gpu-n01"]
        others = (await c.post("/filter", json=doc)).json()
    assert body["NodeNames"] == ["gpu-n01"]
    assert body["FailedAndUnresolvableNodes"] == {}  # a node passes: the lean reply
    assert others["NodeNames"] == []
    assert others["FailedAndUnresolvableNodes"] == dict.fromkeys(
        doc["NodeNames"], "WaitingForBind(pod is being bound to gpu-n01)"
    )


async def test_bind_retry_is_idempotent_per_pod_uid(cache: ClusterCache) -> None:
    writer = RecordingWriter(cache)
    state = state_of(cache, writer=writer)
    async with served(state) as c:
        first = await c.post("/bind", content=_sample("extender-bind-request.json"), headers=JSON)
        again = await c.post("/bind", content=_sample("extender-bind-request.json"), headers=JSON)
        doc = json.loads(_sample("extender-bind-request.json"))
        doc["Node"] = "gpu-n02"
        other = await c.post("/bind", json=doc)
    assert first.json() == again.json() == {"Error": ""}
    assert len(writer.bindings) == 1  # the retry did not bind twice
    assert other.json() == {"Error": "pod ml-research/llama-sft-worker-1 was already bound to gpu-n01"}


async def test_bind_of_a_pod_the_api_shows_bound_succeeds_without_a_binding(cache: ClusterCache) -> None:
    pod = _sample_pod()
    pod["spec"]["nodeName"] = "gpu-n01"
    pod["status"] = {"phase": "Running"}
    pod["metadata"]["resourceVersion"] = "48213999"
    cache.on_pod_update(pod, pod)
    writer = RecordingWriter(cache)
    async with served(state_of(cache, writer=writer)) as c:
        same = await c.post("/bind", content=_sample("extender-bind-request.json"), headers=JSON)
    doc = json.loads(_sample("extender-bind-request.json"))
    doc["Node"] = "gpu-n02"
    async with served(state_of(cache, writer=writer)) as c:  # a restarted extender: no memory of binds
        other = await c.post("/bind", json=doc)
    assert same.json() == {"Error": ""}
    assert other.json() == {"Error": "pod ml-research/llama-sft-worker-1 is already bound to gpu-n01, not gpu-n02"}
    assert writer.bindings == []


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (
            BindConflict('pod llama-sft-worker-1 is already assigned to node "gpu-n05"', node="gpu-n05"),
            "binding ml-research/llama-sft-worker-1 to gpu-n01 refused: the pod is already bound to gpu-n05",
        ),
        (
            NotFound(404, "NotFound", 'pods "llama-sft-worker-1" not found'),
            "binding ml-research/llama-sft-worker-1 to gpu-n01 failed: the pod no longer exists",
        ),
        (
            GiveUp("gave up", attempts=5, last=ApiFailure(503, "ServiceUnavailable", "etcd is down")),
            "kube-scheduler retries the pod after its back-off",
        ),
        (RuntimeError("connection reset"), "RuntimeError: connection reset; kube-scheduler retries the pod"),
    ],
)
async def test_bind_failure_says_why_and_forgets_the_assumption(
    cache: ClusterCache, exc: Exception, expected: str
) -> None:
    writer = RecordingWriter(cache)
    writer.fail = exc
    before = _idle(cache, "gpu-n01")
    async with served(state_of(cache, writer=writer)) as c:
        r = await c.post("/bind", content=_sample("extender-bind-request.json"), headers=JSON)
    assert r.status_code == 200
    assert expected in r.json()["Error"]
    assert cache.assumed == {}
    assert _idle(cache, "gpu-n01") == before
    task = cache.task(UID)
    assert task is not None and task.status is TaskStatus.ALLOCATED_TO_QUOTA and not task.node
    # and a retry (kube-scheduler's, after its back-off) binds
    writer.fail = None
    async with served(state_of(cache, writer=writer)) as c:
        r = await c.post("/bind", content=_sample("extender-bind-request.json"), headers=JSON)
    assert r.json() == {"Error": ""}
    assert len(writer.bindings) == 1


def _bind_doc(**changes: Any) -> bytes:
    doc = json.loads(_sample("extender-bind-request.json"))
    doc.update(changes)
    return orjson.dumps(doc)


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (b"{oops", "malformed request body: not JSON"),
        (b'"PodName"', "malformed request body: expected a JSON object"),
        (b'{"PodName": "p", "PodNamespace": "ns"}', "PodName, PodNamespace, PodUID and Node are required"),
        (
            _bind_doc(PodUID="00000000-0000-0000-0000-000000000000"),
            "pod ml-research/llama-sft-worker-1 (00000000-0000-0000-0000-000000000000) is not in the scheduler's "
            "cache; it may have been deleted",
        ),
        (_bind_doc(Node="gpu-n99"), "node gpu-n99 is not in the scheduler's cache"),
        (
            _bind_doc(Node="gpu-n02"),
            "quota q-llama-sft-1 of pod ml-research/llama-sft-worker-1 is bound to gpu-n01, not gpu-n02",
        ),
    ],
)
async def test_bind_refusals_are_errors_a_person_can_act_on(cache: ClusterCache, payload: bytes, expected: str) -> None:
    writer = RecordingWriter(cache)
    async with served(state_of(cache, writer=writer)) as c:
        r = await c.post("/bind", content=payload, headers=JSON)
    assert r.status_code == 200
    assert r.json() == {"Error": r.json()["Error"]}
    assert expected in r.json()["Error"]
    assert writer.bindings == []
    assert cache.assumed == {}


async def test_bind_rechecks_the_node(cache: ClusterCache) -> None:
    down = b.node("gpu-n01", cpu="128", memory="2Ti", ready=False)
    down["metadata"]["resourceVersion"] = "2"
    cache.on_node_update(down, down)
    writer = RecordingWriter(cache)
    async with served(state_of(cache, writer=writer)) as c:
        r = await c.post("/bind", content=_sample("extender-bind-request.json"), headers=JSON)
    assert r.json() == {"Error": "cannot bind ml-research/llama-sft-worker-1 to gpu-n01: NodeNotReady(gpu-n01)"}
    assert writer.bindings == []


async def test_bind_of_a_gang_member_without_quota_points_to_diagnose(cache: ClusterCache) -> None:
    pg = b.podgroup("gang", namespace="ml-research", min_member=2)
    members = [b.pod(f"gang-{i}", namespace="ml-research", group="gang", hca=None) for i in range(2)]
    b.feed(cache, [pg, *members])
    writer = RecordingWriter(cache)
    async with served(state_of(cache, writer=writer)) as c:
        r = await c.post("/bind", content=binding(members[0], "gpu-n03"), headers=JSON)
    assert r.json() == {
        "Error": "pod ml-research/gang-0 holds no quota yet; the binder assigns one "
        "(see /diagnose/pod/ml-research/gang-0)"
    }


async def test_bind_without_api_access_or_before_sync_answers_at_once(cache: ClusterCache) -> None:
    async with served(state_of(cache)) as c:
        no_writer = await c.post("/bind", content=_sample("extender-bind-request.json"), headers=JSON)
    state = state_of(cache, writer=RecordingWriter(cache))
    state.synced = lambda: False
    async with served(state) as c:
        unsynced = await c.post("/bind", content=_sample("extender-bind-request.json"), headers=JSON)
    assert no_writer.json() == {"Error": "this extender has no API access configured; cannot bind"}
    assert unsynced.json() == {"Error": "the scheduler's cache is not synced yet; the bind will be retried"}
    assert cache.assumed == {}


# --- preempt --------------------------------------------------------------------------------


def _spot_on(cache: ClusterCache, node: str, n: int, *, priority: int = 0) -> list[str]:
    uids = []
    for i in range(n):
        uid = f"c3d4e5f6-0000-4000-8000-00000000a00{i + 1}"
        spot = b.pod(
            f"spot-{node}-{i}",
            namespace="batch",
            gpu=4,
            hca=None,
            extra={wellknown.RESOURCE_SPOT_GPU: "4"},
            node=node,
            phase="Running",
            uid=uid,
            priority=priority,
        )
        cache.on_pod_add(spot)
        uids.append(uid)
    return uids


async def test_preempt_answers_the_full_pods_form_with_uids(cache: ClusterCache) -> None:
    """``nodeCacheCapable: false``: victims arrive as whole pods, the reply is always MetaVictims."""
    uids = _spot_on(cache, "gpu-n01", 2)
    doc = json.loads(_sample("extender-preempt-request.json"))
    doc["NodeNameToVictims"] = {
        "gpu-n01": {"Pods": [cache.pod(u) for u in uids], "NumPDBViolations": 1},
        "gpu-n02": {"Pods": [cache.pod(uids[0])], "NumPDBViolations": 0},
    }
    doc["NodeNameToMetaVictims"] = None
    async with served(state_of(cache)) as c:
        r = await c.post("/preempt", json=doc)
    assert r.status_code == 200
    assert r.json() == {
        "NodeNameToMetaVictims": {"gpu-n01": {"Pods": [{"UID": u} for u in uids], "NumPDBViolations": 1}}
    }


async def test_preempt_counts_the_pdb_violations_its_own_victims_may_make(cache: ClusterCache) -> None:
    """kube-scheduler proposed one spot pod and counted 1 PDB violation; the preemptor needs the
    whole node, so reclaim evicts both: the other, which kube-scheduler did not judge, may violate
    a budget too (the answer is the most the victims can violate, not kube-scheduler's count)."""
    uids = _spot_on(cache, "gpu-n01", 2)
    doc = json.loads(_sample("extender-preempt-request.json"))
    doc["NodeNameToMetaVictims"] = {"gpu-n01": {"Pods": [{"UID": uids[0]}], "NumPDBViolations": 1}}
    async with served(state_of(cache)) as c:
        body = (await c.post("/preempt", json=doc)).json()
    assert body == {"NodeNameToMetaVictims": {"gpu-n01": {"Pods": [{"UID": u} for u in uids], "NumPDBViolations": 2}}}


async def test_preempt_keeps_only_spot_victims_of_lower_priority_and_only_as_many_as_needed(
    cache: ClusterCache,
) -> None:
    uids = _spot_on(cache, "gpu-n01", 2)
    higher = b.pod("important", namespace="batch", gpu=0, hca=None, node="gpu-n01", phase="Running", priority=200000)
    cache.on_pod_add(higher)
    doc = json.loads(_sample("extender-preempt-request.json"))
    doc["NodeNameToMetaVictims"]["gpu-n01"]["Pods"].append({"UID": higher["metadata"]["uid"]})
    async with served(state_of(cache)) as c:
        body = (await c.post("/preempt", json=doc)).json()
    assert body == {"NodeNameToMetaVictims": {"gpu-n01": {"Pods": [{"UID": u} for u in uids], "NumPDBViolations": 0}}}


async def test_preempt_drops_a_node_where_the_allowed_victims_free_too_little(cache: ClusterCache) -> None:
    _spot_on(cache, "gpu-n01", 1)
    other = b.pod("other", namespace="batch", gpu=4, hca=None, node="gpu-n01", phase="Running", scheduler="x")
    cache.on_pod_add(other)
    doc = json.loads(_sample("extender-preempt-request.json"))
    doc["NodeNameToMetaVictims"]["gpu-n01"]["Pods"] = [
        {"UID": "c3d4e5f6-0000-4000-8000-00000000a001"},
        {"UID": other["metadata"]["uid"]},
    ]
    async with served(state_of(cache)) as c:
        body = (await c.post("/preempt", json=doc)).json()
    assert body == {"NodeNameToMetaVictims": {}}


async def test_preempt_passes_other_schedulers_pods_through(cache: ClusterCache) -> None:
    """Extenders are shared by every profile: the stock scheduler's preemption is not ours to veto."""
    uids = _spot_on(cache, "gpu-n01", 2)
    doc = json.loads(_sample("extender-preempt-request.json"))
    doc["Pod"]["spec"]["schedulerName"] = "default-scheduler"
    doc["NodeNameToMetaVictims"]["gpu-n05"] = {"Pods": [], "NumPDBViolations": 0}  # a placeholder: dropped
    doc["NodeNameToMetaVictims"]["gpu-n03"] = {"Pods": [{"UID": "x-1"}], "NumPDBViolations": 2}
    async with served(state_of(cache)) as c:
        body = (await c.post("/preempt", json=doc)).json()
    assert body == {
        "NodeNameToMetaVictims": {
            "gpu-n01": {"Pods": [{"UID": u} for u in uids], "NumPDBViolations": 0},
            "gpu-n03": {"Pods": [{"UID": "x-1"}], "NumPDBViolations": 2},
        }
    }


@pytest.mark.parametrize("situation", ["unsynced", "unknown pod", "quota unbound"])
async def test_preempt_refuses_quietly_when_it_cannot_judge(cache: ClusterCache, situation: str) -> None:
    _spot_on(cache, "gpu-n01", 2)
    doc = json.loads(_sample("extender-preempt-request.json"))
    state: ServiceState = state_of(cache)
    if situation == "unsynced":
        state.synced = lambda: False
    elif situation == "unknown pod":
        doc["Pod"]["metadata"]["uid"] = "00000000-0000-0000-0000-000000000000"
    else:
        q = b.quota("q-llama-sft-1", gpu=8, hca=8)
        q["metadata"]["resourceVersion"] = "99"
        cache.on_quota_update(q, q)
    async with served(state) as c:
        r = await c.post("/preempt", json=doc)
    assert r.status_code == 200
    assert r.json() == {"NodeNameToMetaVictims": {}}


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [(b"nope", "not JSON"), (b'{"NodeNameToMetaVictims": {}}', "has no Pod")],
)
async def test_malformed_preempt_is_a_clear_error(cache: ClusterCache, payload: bytes, fragment: str) -> None:
    async with served(state_of(cache)) as c:
        r = await c.post("/preempt", content=payload, headers=JSON)
    assert r.status_code == 200
    body = r.json()
    assert body["NodeNameToMetaVictims"] is None
    assert fragment in body["Error"]


@pytest.mark.parametrize("verb", ["filter", "prioritize", "bind", "preempt"])
async def test_every_verb_refuses_oversized_bodies(cache: ClusterCache, verb: str) -> None:
    state = state_of(cache, writer=RecordingWriter(cache), max_body_bytes=4096)
    async with served(state) as c:
        declared = await c.post(f"/{verb}", content=b" " * 5000, headers=JSON)

        async def chunks() -> Any:  # no Content-Length: refused while streaming
            for _ in range(10):
                yield b" " * 1000

        streamed = await c.post(f"/{verb}", content=chunks(), headers=JSON)
    for r in (declared, streamed):
        assert r.status_code == 413
        body = r.json()
        if verb == "prioritize":
            assert body == []
        else:
            assert "exceeds the limit of 4096 bytes" in body["Error"]
    assert cache.assumed == {}


@pytest.mark.parametrize("verb", ["filter", "prioritize"])
async def test_every_candidate_is_answered_for(cache: ClusterCache, verb: str) -> None:
    doc = json.loads(_sample("extender-filter-request.json"))
    if verb == "filter":
        doc["NodeNames"] = [n for n in NODES if n != "gpu-n01"]  # nothing passes: every one has a reason
    async with served(state_of(cache)) as c:
        body = (await c.post(f"/{verb}", json=doc)).json()
    if verb == "filter":
        assert body["NodeNames"] == []
        answered = set(body["FailedNodes"]) | set(body["FailedAndUnresolvableNodes"]) | {"gpu-n01"}
    else:
        answered = {h["Host"] for h in body}
    assert answered == set(NODES)
