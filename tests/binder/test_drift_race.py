"""Invariant 1 at every instant through the seed's drift (issue 18 §2).

The default scenario as the sandbox plays it — one second between steps, not the simulator's 30:
``train-worker-1`` is found running on n4 while job llama (three whole-node workers) wants
n4. The quota ledger must follow the pod at once (fix_quota_binding's throttle is for the full
rebuild, not for the pod event), and no quota may be bound to a node whose live pods plus bound
quotas would exceed it. A poller reads the API every few milliseconds throughout.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

import pytest

from extender import wellknown
from extender.model.resources import Resource
from extender.simulate.runner import Simulation
from extender.simulate.scenario import load_scenario

pytestmark = pytest.mark.anyio

Obj = dict[str, Any]


def _requests(pod: Obj) -> Resource:
    total = Resource.empty()
    for c in pod["spec"].get("containers") or ():
        total.iadd(Resource.from_list((c.get("resources") or {}).get("requests")))
    return total


def overcommitted(sim: Simulation) -> dict[str, str]:
    """Nodes whose bound quotas (invariant 1) — plus the live pods no quota bound there accounts
    for — exceed their allocatable, from the API objects."""
    emu = sim.emulator
    quotas = {q["metadata"]["name"]: q for q in emu.list(wellknown.API_VERSION, wellknown.QUOTAS)}
    on: defaultdict[str, Resource] = defaultdict(Resource.empty)
    for q in quotas.values():
        node = (q.get("status") or {}).get("nodeName")
        if node:
            on[node].iadd(Resource.from_list(q["spec"]["request"]))
    committed = {n: r.clone() for n, r in on.items()}
    for p in emu.list("v1", "pods"):
        node = p["spec"].get("nodeName")
        if not node or (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        name = (p["metadata"].get("annotations") or {}).get(wellknown.ANNO_QUOTA_NAME)
        quota = quotas.get(name or "")
        if quota is not None and (quota.get("status") or {}).get("nodeName") != node:
            declared = set(quota["spec"]["request"])
            stray = Resource({k: v for k, v in _requests(p).q.items() if k in declared})
            committed.setdefault(node, Resource.empty()).iadd(stray)
    out: dict[str, str] = {}
    for n in emu.list("v1", "nodes"):
        name = n["metadata"]["name"]
        alloc = Resource.from_list(n["status"]["allocatable"])
        for what, total in (("quotas", on.get(name)), ("quotas + pods", committed.get(name))):
            if total is not None and not total.less_equal(alloc):
                out[name] = f"{what} {total} > {alloc}"
    return out


async def _poll(sim: Simulation, stop: asyncio.Event, broken: list[dict[str, str]], polls: list[int]) -> None:
    while not stop.is_set():
        bad = overcommitted(sim)
        polls[0] += 1
        if bad:
            broken.append(bad)
        await asyncio.sleep(0.002)


async def test_the_seed_drift_while_llama_wants_n4_never_overcommits_a_node_or_breaks_rank_order() -> None:
    scenario = load_scenario(None)
    assert scenario.name == "seed-8-node"
    train, drift, llama = scenario.steps
    async with Simulation(scenario) as sim:
        assert sim.clock is not None
        await sim.run_step(0, train)
        rt = sim.cluster.rt
        # the sandbox's timing: the full fix_quota_binding rebuild has just run, so its throttle
        # (10 s) is closed for the next cycles — the drift lands inside that window
        for _ in range(12):
            await sim.cycle()
            if rt.scheduler.memory.last_fix == sim.clock.now:
                break
        assert rt.scheduler.memory.last_fix == sim.clock.now, "test precondition: a full fix just ran"
        stop, broken, polls = asyncio.Event(), list[dict[str, str]](), [0]
        poller = asyncio.ensure_future(_poll(sim, stop, broken, polls))
        try:
            sim.clock.advance(1)
            for event in drift.events:
                await sim.apply_event(event)
            for job in llama.jobs:
                await sim.submit(job)
            await sim.cluster.settle()
            await sim.cycle()
            q1 = sim.emulator.get(wellknown.API_VERSION, wellknown.QUOTAS, "q-train-1")["status"]
            assert q1.get("nodeName") == "n4", f"the quota did not follow its pod at once: {q1.get('nodeName')}"
            for _ in range(20):
                if not await sim.round():
                    break
        finally:
            stop.set()
            await poller
        assert polls[0] > 5
        assert broken == [], broken[:3]
        quotas = {
            q["metadata"]["name"]: (q.get("status") or {}).get("nodeName")
            for q in sim.emulator.list(wellknown.API_VERSION, wellknown.QUOTAS)
        }
        assert quotas["q-train-1"] == "n4"
        assert not overcommitted(sim)
        # llama's ranks ascend with node index, and all three run
        nodes = []
        for i in range(3):
            pod = sim.emulator.get("v1", "pods", f"llama-worker-{i}", "default")
            assert pod["status"]["phase"] == "Running", pod["metadata"]["name"]
            nodes.append(pod["spec"]["nodeName"])
        index = {n["metadata"]["name"]: int(n["metadata"]["name"][1:]) for n in sim.emulator.list("v1", "nodes")}
        assert [index[n] for n in nodes] == sorted(index[n] for n in nodes), nodes
        assert "n4" not in nodes, nodes
