"""The simulator's kube-scheduler stand-in preempts as DefaultPreemption does
(``extender/simulate/preemption.py``): on each node it proposes the victims
``SelectVictimsOnNode`` would (every lower-priority pod out, then the most important reprieved
while the preemptor still fits), and among the nodes the extender's ``/preempt`` answer keeps it
evicts on the one ``pickOneNodeForPreemption`` picks: the fewest PDB violations, the lowest
highest-priority victim, the least sum of priorities, the fewest victims, the latest start of
the highest-priority victims.

Before, it proposed the lowest-priority pods until the preemptor fit (more victims than needed
when a low one was small) and evicted on the alphabetically first node the extender answered,
whatever its victims: in every case below the old stand-in evicts on ``n0`` (or both pods of
``n0``), kube-scheduler elsewhere.

Each node has 8 GPUs, used by running pods of the default scheduler (``name:gpu:priority[:start
offset in seconds]``); the pending pod of ours asks 8 GPUs (4 in the reprieve case) at priority
100. The extender stand-in allows what it is offered, with the PDB violations a case gives.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from extender import wellknown
from extender.cache.convert import format_time
from extender.emulator import Emulator
from extender.simulate.actors import KubeSchedulerStandIn
from extender.simulate.cluster import strip_server_fields
from extender.simulate.preemption import pick_node
from tests import builders as b

Obj = dict[str, Any]
START = 1_800_000_000.0
LOWEST = -(2**31)


class Extender:
    """``/preempt`` keeps every node and victim offered; ``violations``: node → the PDB
    violations it answers there (else the proposed count); ``empty``: nodes it answers without
    victims."""

    def __init__(self, violations: dict[str, int] | None = None, empty: tuple[str, ...] = ()) -> None:
        self.violations = violations or {}
        self.empty = empty
        self.offered: dict[str, list[str]] = {}

    async def post_json(self, url: str, body: Any) -> tuple[int, Any]:
        assert url.endswith("/preempt"), url
        answer = body["NodeNameToMetaVictims"]
        self.offered = {n: [p["UID"] for p in v["Pods"]] for n, v in answer.items()}
        for node, count in self.violations.items():
            if node in answer:
                answer[node]["NumPDBViolations"] = count
        for node in self.empty:
            answer[node]["Pods"] = []
        return 200, {"NodeNameToMetaVictims": answer}


def preempt(
    nodes: dict[str, list[str]], *, gpu: int = 8, violations: dict[str, int] | None = None, empty: tuple[str, ...] = ()
) -> list[str]:
    """The pods the stand-in evicts for the pending pod ``train-0`` (``gpu`` GPUs, priority 100)
    on ``nodes``: node → its running pods ``name:gpu:priority[:start offset]``."""
    emu = Emulator()
    for node, pods in nodes.items():
        emu.apply(strip_server_fields(b.node(node)))
        for spec in pods:
            name, size, prio, *offset = spec.split(":")
            pod = b.pod(
                name, gpu=int(size), hca=None, node=node, phase="Running", priority=int(prio), scheduler="default"
            )
            pod["status"]["startTime"] = format_time(START + float(offset[0] if offset else 0))
            emu.apply(strip_server_fields(pod))
    pending = b.pod("train-0", gpu=gpu, hca=None, priority=100)
    pending["spec"]["schedulerName"] = wellknown.SCHEDULER_NAME
    emu.apply(strip_server_fields(pending))
    sched = KubeSchedulerStandIn(emu, "http://extender", Extender(violations, empty))  # type: ignore[arg-type]
    (pod,) = sched.pending()
    attempt = asyncio.run(sched.schedule_one(pod))
    assert not attempt.node
    return attempt.preempted


@pytest.mark.parametrize(
    ("nodes", "violations", "evicted"),
    [
        pytest.param({"n0": ["a:8:50"], "n1": ["b:8:10"]}, None, ["b"], id="lowest-highest-priority"),
        pytest.param({"n0": ["a:4:10", "c:4:10"], "n1": ["b:8:10"]}, None, ["b"], id="least-sum-of-priorities"),
        pytest.param({"n0": ["a:8:5"], "n1": ["b:8:10"]}, {"n0": 1}, ["b"], id="fewest-pdb-violations-first"),
        pytest.param(
            {"n0": ["a:4:-2147483648", "c:4:-2147483648"], "n1": ["b:8:-2147483648"]}, None, ["b"], id="fewest-victims"
        ),
        pytest.param({"n0": ["a:8:10:0"], "n1": ["b:8:10:60"]}, None, ["b"], id="latest-start"),
        pytest.param({"n0": ["a:8:10:60"], "n1": ["b:8:10:0"]}, None, ["a"], id="latest-start-either-way"),
    ],
)
def test_the_node_is_the_one_kube_scheduler_picks(
    nodes: dict[str, list[str]], violations: dict[str, int] | None, evicted: list[str]
) -> None:
    assert preempt(nodes, violations=violations) == [f"default/{name}" for name in evicted]


def test_a_node_gives_up_only_the_victims_it_must() -> None:
    """For 4 GPUs on n0 (a 2-GPU pod at priority 0, a 6-GPU one at 5), evicting the 6-GPU pod
    is enough: reprieved most important first, the 6-GPU pod does not fit back, the 2-GPU one
    does. The lowest first until the pod fits took both."""
    assert preempt({"n0": ["low:2:0", "mid:6:5"]}, gpu=4) == ["default/mid"]


def test_an_answer_without_victims_for_a_node_fails_the_preemption() -> None:
    """kube-scheduler's callExtenders: a node the extender answers with no victims is an error of
    a non-ignorable extender (the chart's ``ignorable: false``): no preemption at all. Before, the
    stand-in evicted on n0 anyway."""
    assert preempt({"n0": ["a:8:10"], "n1": ["b:8:10"]}, empty=("n1",)) == []


def test_the_last_tie_is_broken_by_node_name() -> None:
    # kube-scheduler takes the first of its candidate map (arbitrary order); the stand-in the name
    pod: Obj = b.pod("v", gpu=8, hca=None, node="n0", phase="Running", priority=10)
    assert pick_node({"n1": ([pod], 0), "n0": ([pod], 0)}, START) == "n0"
    assert pick_node({}, START) is None
