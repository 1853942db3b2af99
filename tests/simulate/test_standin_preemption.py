"""The simulator's kube-scheduler stand-in preempts only for pods kube-scheduler preempts for.

kube-scheduler's DefaultPreemption runs no preemption for a pod whose ``spec.preemptionPolicy``
is ``Never`` (set from a non-preempting PriorityClass: ``PodEligibleToPreemptOthers`` answers
"not eligible due to preemptionPolicy=Never"): no dry run, no ``/preempt`` call, no victims.
Before, the stand-in ran its dry run and called ``/preempt`` for such a pod too and evicted what
the extender allowed: a scenario with a non-preempting pod showed evictions a real cluster never
makes. The control: the same pod with the default policy (``PreemptLowerPriority``) preempts.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from extender import wellknown
from extender.emulator import Emulator
from extender.simulate.actors import KubeSchedulerStandIn
from extender.simulate.cluster import strip_server_fields
from tests import builders as b

Obj = dict[str, Any]


class Recorder:
    """The extender as the stand-in sees it: records each verb; ``/preempt`` allows the victims
    it is offered."""

    def __init__(self) -> None:
        self.verbs: list[str] = []

    async def post_json(self, url: str, body: Any) -> tuple[int, Any]:
        verb = url.rsplit("/", 1)[-1]
        self.verbs.append(verb)
        if verb == "preempt":
            return 200, {"NodeNameToMetaVictims": body["NodeNameToMetaVictims"]}
        return 200, {}


def _emulator(policy: str | None) -> Emulator:
    """n0 with 8 GPUs, all used by a running 0-priority pod of the default scheduler (so that
    kube-scheduler's own resource fit fails and its PostFilter runs), and the pending
    100-priority pod ``train-0`` of ours asking for 4 GPUs, ``preemptionPolicy: <policy>``."""
    emu = Emulator()
    emu.apply(strip_server_fields(b.node("n0")))
    low = b.pod("low", gpu=8, hca=None, node="n0", phase="Running", priority=0, scheduler="default-scheduler")
    emu.apply(strip_server_fields(low))
    pod = b.pod("train-0", gpu=4, hca=None, priority=100)
    pod["spec"]["schedulerName"] = wellknown.SCHEDULER_NAME
    if policy is not None:
        pod["spec"]["preemptionPolicy"] = policy
    emu.apply(strip_server_fields(pod))
    return emu


@pytest.mark.parametrize("policy", ["Never", "PreemptLowerPriority", None])
def test_the_stand_in_preempts_only_for_a_pod_that_may_preempt(policy: str | None) -> None:
    emu = _emulator(policy)
    ext = Recorder()
    sched = KubeSchedulerStandIn(emu, "http://extender", ext)  # type: ignore[arg-type]
    (pod,) = sched.pending()
    attempt = asyncio.run(sched.schedule_one(pod))
    assert not attempt.node
    if policy == "Never":
        assert "preempt" not in ext.verbs, ext.verbs
        assert attempt.preempted == []
        assert [p["metadata"]["name"] for p in emu.list("v1", "pods")] == ["low", "train-0"]
    else:
        assert ext.verbs == ["preempt"]
        assert attempt.preempted == ["default/low"]
