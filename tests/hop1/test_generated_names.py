"""Pods created from ``generateName`` (Jobs, ReplicaSets: their name is not known at admission)
account for exactly the in-flight claim their admission recorded, as soon as they arrive.

The webhook names the entry on the pod (annotation ``claim-entry``); without it, the arrived pod
of a lone ``generateName`` pod matched no entry (its job is named after the generated name), so
its room counted twice — the pod's claim and the entry — until the entry expired, 30 s later:
the next pod found the quota full. A real service replica on the emulator, admissions through
its HTTPS webhook as kube-apiserver sends them, no binder cycle in between.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from extender import wellknown
from tests import builders as b
from tests.hop1.harness import QUOTA, annos, hop1_cluster, new_pod, over_claimed
from tests.hop1.test_race import Poller

pytestmark = pytest.mark.anyio

NS = "default"


def _generated(prefix: str, **kw: Any) -> dict[str, Any]:
    """A lone pod of a ReplicaSet-like owner: ``generateName``, a queue, one GPU."""
    pod = new_pod(prefix + "x", gpu=1, hca=None, **kw)
    meta = pod["metadata"]
    del meta["name"]
    meta["generateName"] = prefix
    meta.setdefault("annotations", {})[wellknown.ANNO_QUEUE_NAME] = "research"
    return pod


async def test_each_generated_pod_accounts_for_its_own_claim_when_it_arrives() -> None:
    objs = [*b.seed_cluster(), b.quota("two", gpu=2, hca=None)]
    async with hop1_cluster(replicas=1, objs=objs) as h:
        first = await h.admit(_generated("web-7d9f-"))
        await h.settle()  # the informer delivered it: its claim replaces its entry
        assert annos(first)[QUOTA] == "two"
        entry = annos(first)[wellknown.ANNO_CLAIM_ENTRY]
        assert entry.startswith("admission:")
        assert [t["uid"] for t in h.quota("two")["status"]["tasks"]] == [entry]

        second = await h.admit(_generated("web-7d9f-"))
        assert annos(second)[QUOTA] == "two", "the first pod's room was counted twice"
        assert annos(second)[wellknown.ANNO_CLAIM_ENTRY] != entry
        await h.settle()
        third = await h.admit(_generated("web-7d9f-"))
        assert QUOTA not in annos(third)  # two GPUs, two pods: full
        assert over_claimed(h.pods(NS), h.quotas()) == {}

        await h.cycle()  # the leader rewrites both entries in their pods' form
        tasks = h.quota("two")["status"]["tasks"]
        assert sorted(t["name"] for t in tasks) == sorted(p["metadata"]["name"] for p in (first, second))
        assert not any(t.get("expiresAt") for t in tasks)


async def test_two_replicas_racing_with_pods_of_one_owner_cannot_both_win_one_quota() -> None:
    """Both admissions inside the other replica's informer lag: the claim writes decide. Two pods
    of one owner share the stand-in ``web-7d9f-*`` at admission, which names neither of them:
    the second write must count the first entry, not take it for its own pod's earlier one."""
    objs = [*b.seed_cluster(), b.quota("one", gpu=1, hca=None)]
    async with hop1_cluster(replicas=2, objs=objs) as h:
        fronts = (h.apiserver_for(h.replicas[0]), h.apiserver_for(h.replicas[1]))
        pods = []
        for _ in range(2):
            pod = _generated("web-7d9f-")
            pod["metadata"]["namespace"] = NS
            pods.append(pod)
        answered = await asyncio.gather(*(f._admit(p) for f, p in zip(fronts, pods, strict=True)))
        assert sorted(str(annos(p).get(QUOTA)) for p in answered) == ["None", "one"]
        tasks = h.quota("one")["status"]["tasks"]
        assert len(tasks) == 1, tasks


@pytest.mark.parametrize("gated", [True, False], ids=["all-in-the-informer-lag", "interleaved"])
async def test_sixty_generated_pods_through_three_replicas_take_each_place_once(gated: bool) -> None:
    """60 lone one-GPU pods of five ReplicaSet-like owners for 30 places (30 one-GPU quotas),
    admitted concurrently through three replicas: no instant of the API state — polled
    throughout — shows a quota over-claimed, every place is handed out once, and once the pods
    are in, the leader's loop rewrites every entry in its pod's form and comes to rest."""
    objs = [*b.seed_cluster(), *(b.quota(f"q1-{i:02d}", gpu=1, hca=None) for i in range(30))]
    async with hop1_cluster(replicas=2, objs=objs) as h:
        fronts = [h.apiserver] + [h.apiserver_for(r) for r in h.replicas]
        pods = []
        for i in range(60):
            pod = _generated(f"rs{i % 5}-7d9f-")  # every owner on every replica
            pod["metadata"]["namespace"] = NS
            pods.append(pod)
        with Poller(h) as poller:
            if gated:
                answered = await asyncio.gather(*(fronts[i % 3]._admit(p) for i, p in enumerate(pods)))
                for p in answered:
                    h.cluster.emulator.create(p)
            else:

                async def create(i: int, pod: dict[str, Any]) -> dict[str, Any]:
                    admitted = await fronts[i % 3]._admit(pod)
                    h.cluster.emulator.create(admitted)
                    return admitted

                answered = await asyncio.gather(*(create(i, p) for i, p in enumerate(pods)))
            await h.settle()
            await poller.stop()
        assert poller.polls > 3
        assert poller.broken == [], poller.broken[:3]
        given = [annos(p).get(QUOTA) for p in answered]
        assert sum(1 for q in given if q) == 30 and len({q for q in given if q}) == 30
        await h.cycles_until_quiet()
        assert over_claimed(h.pods(NS), h.quotas()) == {}
        for name, obj in h.quotas().items():
            tasks = (obj.get("status") or {}).get("tasks") or []
            holders = [p["metadata"]["name"] for p in h.pods(NS) if annos(p).get(QUOTA) == name]
            assert [t["name"] for t in tasks] == holders and not any(t.get("expiresAt") for t in tasks), obj
