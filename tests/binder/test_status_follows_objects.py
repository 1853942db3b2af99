"""The binder leader keeps every CRD's status true (DESIGN §3) within a few cycles of the object
changing, not at the next full resync (60 s): a JobQueue created after the jobs it governs were
admitted, a JobQueue whose selector no longer selects its job, a PodGroup re-created (its status
empty) or whose ``minMember`` was raised."""

from __future__ import annotations

from typing import Any

import pytest

from extender import wellknown
from extender.simulate.cluster import LocalCluster
from tests import builders as b
from tests.binder.test_restart_property import start_pods

pytestmark = pytest.mark.anyio


class Clock:
    """Session time that only the test moves (one binder period a cycle)."""

    def __init__(self) -> None:
        self.now = 1_900_000_000.0

    def __call__(self) -> float:
        return self.now


async def _cycles(cl: LocalCluster, clock: Clock, n: int) -> None:
    for _ in range(n):
        clock.now += 1.0
        await cl.cycle()


def _status(cl: LocalCluster, plural: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    obj = cl.emulator.get(wellknown.API_VERSION, plural, name, namespace=namespace)
    return dict(obj.get("status") or {})


async def test_a_new_jobqueue_counts_the_jobs_it_governs_in_the_next_cycles() -> None:
    clock = Clock()
    async with LocalCluster(clock=clock) as cl:
        cl.apply([b.node("n0"), b.topology("n0", ["s0"]), *b.training_job("j", 1, gpu=1, hca=1)])
        await _cycles(cl, clock, 3)
        assert cl.quota_nodes()["q-j-0"] == "n0"  # admitted and placed
        cl.apply([b.jobqueue("jq", selector={}, max_running=5)])  # an empty selector selects every job
        await cl.settle()
        await _cycles(cl, clock, 3)
        status = _status(cl, wellknown.JOBQUEUES, "jq")
        assert status.get("runningJobs") == 1, f"JobQueue jq governs one admitted job; its status says {status}"


async def test_an_edited_jobqueue_stops_counting_the_job_it_no_longer_selects() -> None:
    clock = Clock()
    async with LocalCluster(clock=clock) as cl:
        objs = [b.node("n0"), b.topology("n0", ["s0"]), b.jobqueue("jq", selector={})]
        cl.apply([*objs, *b.training_job("j", 1, gpu=1, hca=1)])
        await _cycles(cl, clock, 3)
        assert _status(cl, wellknown.JOBQUEUES, "jq").get("runningJobs") == 1
        cl.apply([b.jobqueue("jq", selector={"matchLabels": {"team": "nobody"}})])
        await cl.settle()
        await _cycles(cl, clock, 3)
        status = _status(cl, wellknown.JOBQUEUES, "jq")
        assert status.get("runningJobs") == 0, f"JobQueue jq selects no job any more; its status says {status}"


@pytest.mark.parametrize("how", ["recreate", "min-member"])
async def test_podgroup_status_follows_the_object(how: str) -> None:
    clock = Clock()
    async with LocalCluster(clock=clock) as cl:
        cl.apply([b.node("n0"), b.node("n1"), b.topology("n0", ["s0"]), b.topology("n1", ["s0"])])
        cl.apply(b.training_job("g", 2, gpu=8, hca=1))
        await _cycles(cl, clock, 2)
        await start_pods(cl)
        await _cycles(cl, clock, 2)
        assert _status(cl, wellknown.PODGROUPS, "g", "default").get("phase") == "Running"
        if how == "recreate":
            cl.emulator.delete(wellknown.API_VERSION, wellknown.PODGROUPS, "g", namespace="default")
            cl.apply([b.podgroup("g", min_member=2)])
            want = "Running"
        else:
            pg = cl.emulator.get(wellknown.API_VERSION, wellknown.PODGROUPS, "g", namespace="default")
            pg["spec"]["minMember"] = 3
            cl.emulator.update(pg)
            want = "Unknown"  # some run, fewer than minMember
        await cl.settle()
        await _cycles(cl, clock, 3)
        assert _status(cl, wellknown.PODGROUPS, "g", "default").get("phase") == want
