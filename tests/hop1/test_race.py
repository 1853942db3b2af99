"""Two webhook replicas racing for the same quotas; the binder loop is the arbiter (issue 5 §2,
DESIGN §4 invariant 3).

Each replica is a whole service process on the same emulator — its own informers, cache and
in-flight registry — so neither knows what the other handed out until its informer delivers the
created pods. Admissions go through the real HTTPS endpoints as kube-apiserver sends them; the
pods are stored in the emulator; the leader's binder loop then re-validates every claim.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from extender.simulate.actors import ApiServerStandIn
from tests import builders as b
from tests.hop1.harness import (
    QUOTA,
    QUOTA_NODE,
    REASON,
    Hop1,
    annos,
    claims_from_pods,
    hop1_cluster,
    new_pod,
    over_claimed,
)

pytestmark = pytest.mark.anyio

NS = "default"


class Front(ApiServerStandIn):
    """kube-apiserver in front of one replica's webhook, remembering what the webhook answered.
    ``admit`` and ``store`` apart let a test answer every admission before storing any pod: the
    worst case for two replicas, every admission inside the other replica's informer lag."""

    def __init__(self, inner: ApiServerStandIn) -> None:
        super().__init__(inner.emulator, inner.webhook_url, inner.client)
        self.admitted: dict[str, str | None] = {}  # pod → quota named by the webhook's answer

    async def admit(self, pod: dict[str, Any]) -> dict[str, Any]:
        pod = {**pod, "spec": {**pod["spec"]}, "metadata": {**pod["metadata"]}}
        pod["spec"].setdefault("schedulerName", "default-scheduler")  # API defaulting
        pod["metadata"].setdefault("namespace", NS)
        mutated = await self._admit(pod)
        self.admitted[mutated["metadata"]["name"]] = annos(mutated).get(QUOTA)
        return mutated

    def store(self, pod: dict[str, Any]) -> dict[str, Any]:
        return self.emulator.create(pod)

    async def create_pod(self, pod: dict[str, Any]) -> dict[str, Any]:
        return self.store(await self.admit(pod))


def _capacity_objs() -> list[dict[str, Any]]:
    """8 nodes × 8 GPUs; 60 one-GPU places in queue research: 40 one-GPU quotas (free) and
    10 two-GPU quotas, already bound two per node on n0–n4."""
    objs = b.seed_cluster()
    objs += [b.quota(f"q1-{i:02d}", gpu=1, hca=None) for i in range(40)]
    objs += [
        b.quota(f"q2-{i}", gpu=2, hca=None, status={"phase": "QuotaBound", "nodeName": f"n{i // 2}"}) for i in range(10)
    ]
    objs += [b.podgroup(f"job{j}", min_member=1) for j in range(10)]
    return objs


def _places(h: Hop1) -> int:
    return sum(int(q["spec"]["request"]["nvidia.com/gpu"]) for q in h.quotas().values())


def _check_api_state(h: Hop1) -> None:
    """What must hold after every cycle of the loop, read back from the API."""
    pods = h.pods(NS)
    quotas = h.quotas()
    assert over_claimed(pods, quotas) == {}, "invariant 3 broken in the API state"
    # status.tasks is current: exactly the pods whose annotation names the quota
    by_quota: dict[str, set[str]] = {name: set() for name in quotas}
    for p in pods:
        q = annos(p).get(QUOTA)
        if q:
            by_quota[q].add(p["metadata"]["name"])
    for name, obj in quotas.items():
        listed = {t["name"] for t in (obj.get("status") or {}).get("tasks") or []}
        assert listed == by_quota[name], f"status.tasks of {name} is stale: {listed} != {by_quota[name]}"
    # quota-node only on pods that hold a bound quota, and it names that quota's node
    for p in pods:
        anns = annos(p)
        q = anns.get(QUOTA)
        want = (quotas[q].get("status") or {}).get("nodeName", "") if q else ""
        assert anns.get(QUOTA_NODE, "") == want, p["metadata"]["name"]


@pytest.mark.parametrize("gated", [True, False], ids=["all-in-the-informer-lag", "interleaved"])
async def test_hundred_concurrent_admissions_through_two_replicas_never_over_claim(gated: bool) -> None:
    async with hop1_cluster(replicas=1, objs=_capacity_objs()) as h:
        places = _places(h)
        assert places == 60
        front = [Front(h.apiserver), Front(h.apiserver_for(h.replicas[0]))]
        pods = [new_pod(f"job{i % 10}-w{i // 10}", group=f"job{i % 10}", gpu=1, hca=None) for i in range(100)]
        if gated:
            admitted_pods = await asyncio.gather(*(front[i % 2].admit(p) for i, p in enumerate(pods)))
            for i, p in enumerate(admitted_pods):
                front[i % 2].store(p)
        else:
            await asyncio.gather(*(front[i % 2].create_pod(p) for i, p in enumerate(pods)))
        await h.settle()

        assert {len(f.admitted) for f in front} == {50}
        admitted = {**front[0].admitted, **front[1].admitted}
        if gated:
            # each replica saw 60 free places for its 50 pods: both handed out every pod a quota,
            # 100 claims on 60 places — the race the loop must undo
            assert sum(1 for q in admitted.values() if q) == 100
            assert over_claimed(h.pods(NS), h.quotas()), "the replicas did not race (test precondition)"

        # the leader's loop: the API state is right after every cycle, from the first one on
        cycles = 0
        while True:
            report = await h.cycle()
            cycles += 1
            _check_api_state(h)
            if not report.quota_writes and not report.pod_writes:
                break
            assert cycles < 3, "the loop does not come to rest"
        # every pod that can have a quota has one: the 60 places are all claimed, 40 pods wait
        final = {p["metadata"]["name"]: annos(p).get(QUOTA) for p in h.pods(NS)}
        assert sum(1 for q in final.values() if q) == places
        claims = claims_from_pods(h.pods(NS), h.quotas())
        assert sum(r.get("nvidia.com/gpu") for r in claims.values()) == places * 1000
        if gated:
            moved = [n for n, q in final.items() if q and q != admitted[n]]
            dropped = [n for n, q in final.items() if not q]
            assert len(dropped) == 40
            # the losers of the double-claimed places were moved to the places nobody took
            assert moved, "no loser was re-assigned"
            assert all(REASON in annos(h.pod(n)) for n in dropped), "a pod that lost its claim should say why it waits"
        h.cluster.rt.cache.check()
        # the second replica's cache converges on the same claims (it reads the same API)
        other = h.replicas[0].rt.cache
        mine = h.cluster.rt.cache
        assert {n: sorted(q.claims) for n, q in other.quotas.items()} == {
            n: sorted(q.claims) for n, q in mine.quotas.items()
        }


async def test_two_replicas_racing_for_one_quota_cannot_both_win() -> None:
    objs = [*b.seed_cluster(), b.quota("only", gpu=8, hca=None), b.podgroup("a"), b.podgroup("b")]
    async with hop1_cluster(replicas=1, objs=objs) as h:
        first, second = Front(h.apiserver), Front(h.apiserver_for(h.replicas[0]))
        pa, pb = await asyncio.gather(
            first.admit(new_pod("a-0", group="a", gpu=8, hca=None)),
            second.admit(new_pod("b-0", group="b", gpu=8, hca=None)),
        )
        first.store(pa)
        second.store(pb)
        await h.settle()
        assert first.admitted == {"a-0": "only"} and second.admitted == {"b-0": "only"}
        assert set(over_claimed(h.pods(NS), h.quotas())) == {"only"}

        await h.cycle()
        holders = [p["metadata"]["name"] for p in h.pods(NS) if annos(p).get(QUOTA) == "only"]
        assert len(holders) == 1
        status = h.quota("only")["status"]
        assert [t["name"] for t in status["tasks"]] == holders
        assert status["phase"] == "QuotaBound"
        loser = "b-0" if holders == ["a-0"] else "a-0"
        anns = annos(h.pod(loser))
        assert QUOTA not in anns and QUOTA_NODE not in anns
        assert "over-claimed" in anns.get(REASON, ""), anns
        # nothing else to do: the loser waits for room
        report = await h.cycle()
        assert report.pod_writes == 0
        assert Counter(annos(p).get(QUOTA) for p in h.pods(NS)) == Counter({"only": 1, None: 1})
