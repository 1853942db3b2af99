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

from extender.cache.claims import DEFAULT_CLAIM_TTL
from extender.model.resources import Resource
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


def _status_over_claimed(quotas: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Invariant 3 on what the Quota objects record: Σ status.tasks (in-flight claims included)."""
    out: dict[str, str] = {}
    for name, q in quotas.items():
        status = q.get("status") or {}
        total = Resource.total(Resource.from_list(t.get("request")) for t in status.get("tasks") or ())
        cap = Resource.from_list(q["spec"]["request"]) + Resource.from_list(status.get("shadowResource"))
        if not total.less_equal(cap):
            out[name] = f"{total} > {cap}"
    return out


class Poller:
    """Reads the API state every few milliseconds while admissions run and records every
    instant invariant 3 is broken — by the pods' claims or by the quotas' recorded claims."""

    def __init__(self, h: Hop1) -> None:
        self.h = h
        self.polls = 0
        self.broken: list[dict[str, str]] = []
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while not self._stop.is_set():
            quotas = self.h.quotas()
            bad = {**over_claimed(self.h.pods(NS), quotas), **_status_over_claimed(quotas)}
            self.polls += 1
            if bad:
                self.broken.append(bad)
            await asyncio.sleep(0.002)

    def __enter__(self) -> Poller:
        self._task = asyncio.ensure_future(self._run())
        return self

    async def stop(self) -> None:
        self._stop.set()
        assert self._task is not None
        await self._task

    def __exit__(self, *exc: object) -> None:
        self._stop.set()


@pytest.mark.parametrize("gated", [True, False], ids=["all-in-the-informer-lag", "interleaved"])
async def test_hundred_concurrent_admissions_through_three_replicas_never_over_claim(gated: bool) -> None:
    """Three service replicas (each its own informers, cache and webhook) admit 100 one-GPU pods
    concurrently for 60 places. Each claim is recorded on its Quota before the answer, so no
    instant of the API state — polled throughout — shows a quota over-claimed, even when every
    answer is given before any pod is stored (every admission inside the others' informer lag)."""
    async with hop1_cluster(replicas=2, objs=_capacity_objs()) as h:
        places = _places(h)
        assert places == 60
        front = [Front(h.apiserver)] + [Front(h.apiserver_for(r)) for r in h.replicas]
        pods = [new_pod(f"job{i % 10}-w{i // 10}", group=f"job{i % 10}", gpu=1, hca=None) for i in range(100)]
        with Poller(h) as poller:
            if gated:
                admitted_pods = await asyncio.gather(*(front[i % 3].admit(p) for i, p in enumerate(pods)))
                for i, p in enumerate(admitted_pods):
                    front[i % 3].store(p)
            else:
                await asyncio.gather(*(front[i % 3].create_pod(p) for i, p in enumerate(pods)))
            await h.settle()
            await poller.stop()
        assert poller.polls > 3
        assert poller.broken == [], poller.broken[:3]
        assert sum(len(f.admitted) for f in front) == 100
        admitted = {n: q for f in front for n, q in f.admitted.items()}
        # every place was handed out once, and only once, by the replicas together
        assert sum(1 for q in admitted.values() if q) == places
        assert over_claimed(h.pods(NS), h.quotas()) == {}
        # the replicas raced: claims were answered by more than one of them (none waited for the binder)
        assert sum(1 for f in front if any(f.admitted.values())) >= 2

        # the leader's loop: the in-flight entries become the pods' own, nothing moves
        cycles = 0
        while True:
            report = await h.cycle()
            cycles += 1
            _check_api_state(h)
            if not report.quota_writes and not report.pod_writes:
                break
            assert cycles < 4, "the loop does not come to rest"
        final = {p["metadata"]["name"]: annos(p).get(QUOTA) for p in h.pods(NS)}
        assert final == admitted, "the binder moved a claim the webhooks recorded"
        claims = claims_from_pods(h.pods(NS), h.quotas())
        assert sum(r.get("nvidia.com/gpu") for r in claims.values()) == places * 1000
        dropped = [n for n, q in final.items() if not q]
        assert len(dropped) == 40
        assert all(REASON in annos(h.pod(n)) for n in dropped), "a pod without a quota should say why it waits"
        for obj in h.quotas().values():
            assert not any(t.get("expiresAt") for t in (obj.get("status") or {}).get("tasks") or ()), obj
        h.cluster.rt.cache.check()
        mine = h.cluster.rt.cache
        for r in h.replicas:
            assert {n: sorted(q.claims) for n, q in r.rt.cache.quotas.items()} == {
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
        # the claim is on the quota before either answer returned: one of them won it
        tasks = h.quota("only")["status"]["tasks"]
        assert len(tasks) == 1 and tasks[0]["expiresAt"], tasks
        winner = tasks[0]["name"]
        assert {**first.admitted, **second.admitted} == {winner: "only", ("b-0" if winner == "a-0" else "a-0"): None}
        first.store(pa)
        second.store(pb)
        await h.settle()
        assert over_claimed(h.pods(NS), h.quotas()) == {}

        await h.cycle()
        status = h.quota("only")["status"]
        assert [t["name"] for t in status["tasks"]] == [winner]
        assert "expiresAt" not in status["tasks"][0]  # the pod's own entry now
        assert status["phase"] == "QuotaBound"
        loser = "b-0" if winner == "a-0" else "a-0"
        anns = annos(h.pod(loser))
        assert QUOTA not in anns and QUOTA_NODE not in anns
        assert "NoQuota" in anns.get(REASON, ""), anns
        report = await h.cycle()
        assert report.pod_writes == 0
        assert Counter(annos(p).get(QUOTA) for p in h.pods(NS)) == Counter({"only": 1, None: 1})


async def test_a_dry_run_claims_nothing_and_a_pod_that_never_comes_frees_its_claim() -> None:
    objs = [*b.seed_cluster(), b.quota("only", gpu=8, hca=None), b.podgroup("a"), b.podgroup("b")]
    async with hop1_cluster(replicas=1, objs=objs) as h:
        front = Front(h.apiserver_for(h.replicas[0]))
        front.dry_run = True
        await front.admit(new_pod("a-0", group="a", gpu=8, hca=None))
        assert front.admitted == {"a-0": "only"}
        assert not (h.quota("only").get("status") or {}).get("tasks"), "a dry run recorded a claim"
        front.dry_run = False
        await front.admit(new_pod("a-0", group="a", gpu=8, hca=None))  # never stored: denied later
        assert [t["name"] for t in h.quota("only")["status"]["tasks"]] == ["a-0"]
        await h.settle()
        other = Front(h.apiserver)
        await other.admit(new_pod("b-0", group="b", gpu=8, hca=None))
        assert other.admitted == {"b-0": None}, "the claim of a pod not yet created must hold its room"
        # after the claim interval the leader clears it, and the room is free again
        h.clock.advance(DEFAULT_CLAIM_TTL + 1)
        await h.cycle()
        assert not (h.quota("only").get("status") or {}).get("tasks")
        await other.create_pod(new_pod("b-1", group="b", gpu=8, hca=None))
        assert other.admitted["b-1"] == "only"
