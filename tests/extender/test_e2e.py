"""End to end on the emulator: pods created through the apiserver stand-in (so the real webhook
assigns their quotas), the real binder loop stepped by hand, and the kube-scheduler stand-in
calling filter / prioritize / bind / preempt over HTTP. Results are read back from the emulator's
API and its request journal; the extender's ledgers from the running service's cache."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from extender import wellknown
from extender.kube import client as kube_client
from extender.model.task import TaskStatus
from tests import builders as b
from tests.extender.harness import Harness, harness, worker

pytestmark = pytest.mark.anyio

Obj = dict[str, Any]
GPU = wellknown.RESOURCE_GPU


def _bind_args(h: Harness, name: str, node: str, namespace: str = "default") -> Obj:
    pod = h.pod(name, namespace)
    return {"PodName": name, "PodNamespace": namespace, "PodUID": pod["metadata"]["uid"], "Node": node}


async def _seed_job(h: Harness) -> None:
    """The seed's cluster and its 4-worker job; the webhook gives each worker its quota."""
    h.apply(b.seed_cluster() + [b.podgroup("train", min_member=4)] + [b.quota(f"q-train-{i}") for i in range(4)])
    await h.cl.settle()
    await h.create_pods([worker("train", i) for i in range(4)])


async def test_seed_example_end_to_end(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await _seed_job(h)
        # hop ①: the webhook assigned the quotas (no pod named one)
        claims = {p["metadata"]["name"]: p["metadata"]["annotations"][wellknown.ANNO_QUOTA_NAME] for p in h.cl.pods()}
        assert claims == {f"train-worker-{i}": f"q-train-{i}" for i in range(4)}
        # hop ②: the binder binds the quotas in rank order
        await h.cycle()
        assert h.cl.quota_nodes() == {f"q-train-{i}": f"n{i}" for i in range(4)}
        # hop ③: kube-scheduler → filter → bind, pod by pod
        attempts = await h.scheduler.schedule_round()
        assert [(a.pod, a.node, a.message) for a in attempts] == [
            (f"default/train-worker-{i}", f"n{i}", "") for i in range(4)
        ]
        await h.cl.settle()
        # read back through kubernetes-asyncio, as any client would
        api = kube_client.from_url(h.emulator.url, token=h.emulator.token)
        try:
            pods = await kube_client.request(api, "GET", "/api/v1/namespaces/default/pods")
        finally:
            await kube_client.close(api)
        items = sorted(pods.json()["items"], key=lambda p: p["metadata"]["name"])
        for i, p in enumerate(items):
            assert p["spec"]["nodeName"] == f"n{i}"
            anno = p["metadata"]["annotations"]
            assert anno[wellknown.ANNO_QUOTA_NAME] == f"q-train-{i}"
            assert anno[wellknown.ANNO_QUOTA_NODE] == f"n{i}"
            assert anno[wellknown.ANNO_BIND_DECISION] == "quota"  # written by the Binding only
        assert h.binding_posts() == 4
        # the extender's ledgers agree with the API: nothing assumed any more, the GPUs used
        assert h.rt.cache.assumed == {}
        for i in range(4):
            assert h.rt.cache.nodes[f"n{i}"].idle.get(GPU) == 7000
        h.rt.cache.check()


async def test_a_retried_bind_never_binds_twice(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await _seed_job(h)
        await h.cycle()
        first = _bind_args(h, "train-worker-0", "n0")
        assert (await h.post("bind", first)).json() == {"Error": ""}
        # kube-scheduler retried after a timeout: same pod UID, same node
        assert (await h.post("bind", first)).json() == {"Error": ""}
        assert h.binding_posts("train-worker-0") == 1
        # two binds of one pod at once: the second joins the first
        second = _bind_args(h, "train-worker-1", "n1")
        answers = await asyncio.gather(h.post("bind", second), h.post("bind", second))
        assert [a.json() for a in answers] == [{"Error": ""}, {"Error": ""}]
        assert h.binding_posts("train-worker-1") == 1
        # a restarted extender (no memory of its binds) sees the pod bound through the informer
        await h.cl.settle()
        h.state.recent_binds.clear()
        assert (await h.post("bind", first)).json() == {"Error": ""}
        assert h.binding_posts("train-worker-0") == 1
        wrong = {**first, "Node": "n5"}
        assert (await h.post("bind", wrong)).json() == {"Error": "pod default/train-worker-0 was already bound to n0"}
        assert h.binding_posts() == 2
        assert h.pod("train-worker-0")["spec"]["nodeName"] == "n0"


async def test_a_binding_that_landed_but_whose_answer_was_lost(tmp_path: Path) -> None:
    """The API stores the Binding and then fails the answer (the timeout that succeeded): the
    writer's retry learns "already assigned to this node", which is success; kube-scheduler's
    retry then binds nothing."""
    async with harness(tmp_path) as h:
        await _seed_job(h)
        await h.cycle()
        h.emulator.faults.add("bind", code=504, after=True, count=1)
        args = _bind_args(h, "train-worker-2", "n2")
        assert (await h.post("bind", args)).json() == {"Error": ""}
        posts = h.binding_posts("train-worker-2")
        assert posts == 2  # the one that landed, and the retry answered 409 "already assigned"
        assert (await h.post("bind", args)).json() == {"Error": ""}
        assert h.binding_posts("train-worker-2") == posts
        assert h.pod("train-worker-2")["spec"]["nodeName"] == "n2"


@pytest.mark.parametrize(
    ("code", "fragment"),
    [
        (500, "failed: the API server kept failing (create pods/binding train-worker-3: 500 InternalError"),
        (409, "refused: the pod is being deleted, or re-created with another UID"),
    ],
)
async def test_bind_failure_reports_and_forgets(tmp_path: Path, code: int, fragment: str) -> None:
    async with harness(tmp_path) as h:
        await _seed_job(h)
        await h.cycle()
        cache = h.rt.cache
        before = cache.nodes["n3"].idle.clone()
        fault = h.emulator.faults.add("bind", code=code, message=f"injected {code}" if code == 409 else None)
        args = _bind_args(h, "train-worker-3", "n3")
        error = (await h.post("bind", args)).json()["Error"]
        assert error.startswith("binding default/train-worker-3 to n3 ")
        assert fragment in error
        # forgotten: no assumed allocation, the node's idle as before, the pod pending again
        assert cache.assumed == {}
        assert cache.nodes["n3"].idle == before
        task = cache.task(args["PodUID"])
        assert task is not None and task.status is TaskStatus.ALLOCATED_TO_QUOTA and task.node == ""
        assert not h.pod("train-worker-3")["spec"].get("nodeName")
        # kube-scheduler's next attempt, once the API recovers
        fault.remove()
        attempt = await h.scheduler.schedule_one(h.pod("train-worker-3"))
        assert (attempt.node, attempt.message) == ("n3", "")


async def test_a_pod_deleted_while_assumed_gives_its_room_back(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await _seed_job(h)
        await h.cycle()
        cache = h.rt.cache
        before = cache.nodes["n1"].idle.clone()
        h.emulator.faults.add("bind", latency=0.5, count=1)  # the Binding is slow to answer
        args = _bind_args(h, "train-worker-1", "n1")
        bind = asyncio.ensure_future(h.post("bind", args))
        while True:  # until the bind has assumed the pod and waits for the API
            if args["PodUID"] in cache.assumed:
                break
            await asyncio.sleep(0.005)
        assert cache.nodes["n1"].idle.get(GPU) == before.get(GPU) - 1000  # assumed: counted
        h.emulator.delete("v1", "pods", "train-worker-1", "default")
        await h.cl.settle()
        assert cache.assumed == {}
        assert cache.nodes["n1"].idle == before
        assert cache.task(args["PodUID"]) is None
        error = (await bind).json()["Error"]
        assert (
            error == "binding default/train-worker-1 to n1 failed: the pod no longer exists (deleted while being bound)"
        )
        assert cache.nodes["n1"].idle == before
        cache.check()


async def test_preemption_evicts_spot_pods_so_that_the_quota_pod_binds(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        objs: list[Obj] = []
        for i in range(2):
            objs += [b.node(f"n{i}", extra_allocatable={wellknown.RESOURCE_SPOT_GPU: "8"}), b.topology(f"n{i}", ["s1"])]
        objs += [b.podgroup("big", min_member=1), b.quota("q-big-0", gpu=8, hca=8)]
        h.apply(objs)
        await h.cl.settle()
        spot = {wellknown.RESOURCE_SPOT_GPU: "4"}
        await h.create_pods([worker(f"spot{k}", 0, gpu=4, hca=None, extra=spot, group=False) for k in range(4)])
        fill = await h.scheduler.schedule_round()
        assert sorted(a.node for a in fill) == ["n0", "n0", "n1", "n1"]
        for p in h.cl.pods():
            assert p["metadata"]["annotations"][wellknown.ANNO_BIND_DECISION] == "spot"
            assert wellknown.ANNO_QUOTA_NAME not in p["metadata"]["annotations"]
        h.kubelet.run_bound_pods()
        await h.cl.settle()
        await h.create_pods([worker("big", 0, gpu=8, hca=8, priority=1000)])
        await h.cycle()
        assert h.cl.quota_nodes() == {"q-big-0": "n0"}
        on_n0 = sorted(p["metadata"]["name"] for p in h.cl.pods() if p["spec"].get("nodeName") == "n0")
        # kube-scheduler: in-tree fit fails everywhere → preemption → the extender keeps n0's spot pods
        first = await h.scheduler.schedule_one(h.pod("big-worker-0"))
        assert first.node == ""
        assert sorted(first.preempted) == [f"default/{n}" for n in on_n0]
        await h.cl.settle()
        second = await h.scheduler.schedule_one(h.pod("big-worker-0"))
        assert (second.node, second.message) == ("n0", "")
        left = sorted(p["metadata"]["name"] for p in h.cl.pods() if p["spec"].get("nodeName") == "n1")
        assert len(left) == 2  # n1's spot pods were not touched


async def test_quota_node_full_of_spot_pods_is_resolvable_and_preempt_restricts_victims(tmp_path: Path) -> None:
    """The extender's own answers in that flow: n0 in FailedNodes (preemption may help), the
    preempt verb keeps only n0 and there only the spot pods."""
    async with harness(tmp_path) as h:
        h.apply(
            [
                b.node("n0", extra_allocatable={wellknown.RESOURCE_SPOT_GPU: "8"}),
                b.node("n1"),
                b.topology("n0", ["s1"]),
                b.topology("n1", ["s1"]),
                b.podgroup("big", min_member=1),
                b.quota("q-big-0", gpu=8, hca=8),
            ]
        )
        await h.cl.settle()
        spot = {wellknown.RESOURCE_SPOT_GPU: "4"}
        h.apply([b.pod(f"spot{k}", gpu=4, hca=None, extra=spot, node="n0", phase="Running") for k in range(2)])
        h.apply([b.pod("other", gpu=4, hca=None, node="n1", phase="Running", scheduler="default-scheduler")])
        await h.cl.settle()
        await h.create_pods([worker("big", 0, gpu=8, hca=8, priority=1000)])
        await h.cycle()
        pod = h.pod("big-worker-0")
        body = (await h.post("filter", {"Pod": pod, "Nodes": None, "NodeNames": ["n0", "n1"]})).json()
        assert body["NodeNames"] == []
        assert body["FailedNodes"] == {"n0": "LowerPriorityPodsUseNode(nvidia.com/gpu 8 > 0)"}
        assert body["FailedAndUnresolvableNodes"] == {"n1": "QuotaBoundElsewhere(quota q-big-0 is bound to n0)"}
        uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in h.cl.pods()}
        proposed = {
            "n0": {"Pods": [{"UID": uids["spot0"]}, {"UID": uids["spot1"]}], "NumPDBViolations": 0},
            "n1": {"Pods": [{"UID": uids["other"]}], "NumPDBViolations": 0},
        }
        reply = (
            await h.post("preempt", {"Pod": pod, "NodeNameToVictims": None, "NodeNameToMetaVictims": proposed})
        ).json()
        assert reply == {"NodeNameToMetaVictims": {"n0": proposed["n0"]}}


async def test_single_pod_job_is_placed_inline_without_waiting_for_the_binder(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        objs: list[Obj] = [b.queue("research")]
        for i in range(3):
            objs += [b.node(f"n{i}"), b.topology(f"n{i}", ["s1"])]
        objs += [b.quota("q-solo", gpu=2, hca=None)]
        objs.append(
            b.quota("q-other", queue="other", gpu=6, hca=None, status={"phase": "QuotaBound", "nodeName": "n1"})
        )
        h.apply(objs)
        await h.cl.settle()
        queue = {wellknown.ANNO_QUEUE_NAME: "research"}
        # through the webhook: it assigns q-solo; no binder cycle runs before kube-scheduler
        await h.create_pods([worker("solo", 0, gpu=2, hca=None, group=False, annotations=queue)])
        assert h.pod("solo-worker-0")["metadata"]["annotations"][wellknown.ANNO_QUOTA_NAME] == "q-solo"
        attempt = await h.scheduler.schedule_one(h.pod("solo-worker-0"))
        assert (attempt.node, attempt.message) == ("n1", "")  # prioritize: the QN scores (binpack)
        quota = h.emulator.get(wellknown.API_VERSION, wellknown.QUOTAS, "q-solo")
        assert quota["status"]["phase"] == "QuotaBound" and quota["status"]["nodeName"] == "n1"
        anno = h.pod("solo-worker-0")["metadata"]["annotations"]
        assert anno[wellknown.ANNO_QUOTA_NODE] == "n1"
        assert anno[wellknown.ANNO_BIND_DECISION] == "inline-quota"
        # created without the webhook (it was down): the Binding carries the claim itself
        h.apply([b.quota("q-late", gpu=2, hca=None)])
        h.emulator.create(worker("late", 0, gpu=2, hca=None, group=False, annotations=queue))
        await h.cl.settle()
        attempt = await h.scheduler.schedule_one(h.pod("late-worker-0"))
        assert attempt.message == ""
        late = h.pod("late-worker-0")
        assert late["metadata"]["annotations"][wellknown.ANNO_QUOTA_NAME] == "q-late"
        assert late["metadata"]["annotations"][wellknown.ANNO_QUOTA_NODE] == late["spec"]["nodeName"]
        assert h.cl.quota_nodes()["q-late"] == late["spec"]["nodeName"]
        # the binder agrees with all of it: nothing to move, claims recorded in the status
        report = await h.cycle()
        assert report.failed == []
        nodes = h.cl.quota_nodes()
        assert (nodes["q-solo"], nodes["q-late"]) == ("n1", late["spec"]["nodeName"])
        status = h.emulator.get(wellknown.API_VERSION, wellknown.QUOTAS, "q-late")["status"]
        assert [t["name"] for t in status["tasks"]] == ["late-worker-0"]
        h.rt.cache.check()
