"""What an operator reads about a gang that runs while part of it waits (``minMember`` below its
size: the part that fits is placed, the rest waits for room).

Such a gang is not stuck: it runs. Its verdict — the binder's Events, the PodGroup's condition,
``/diagnose`` — says how much of it is placed before why the rest waits, with the rest's own
reason (``placed 3 of 4 (minMember 2); 1 waits: NoZoneFits(…)``), whether it is a topology gang
or one placed quota by quota. A gang short of its ``minMember`` is told only why it waits.
"""

from __future__ import annotations

from extender.actions.bind import waiting_reason
from extender.binder import status as st
from extender.diagnose import diagnose_job
from extender.framework.status import Reason
from extender.scheduler import CycleResult, Scheduler
from tests import builders as b
from tests.core.test_holds import Cluster

PART = "placed 3 of 4 (minMember 2); 1 waits: NoZoneFits("


def _told(c: Cluster, result: CycleResult, job: str = "default/big") -> tuple[str, str, str]:
    """(the binder's verdict, the PodGroup's Unschedulable condition, /diagnose's message)."""
    verdict = result.verdicts[job]
    cache_job = c.cache.jobs[job]
    pg = st.podgroup_status(cache_job, c.cache.quotas, verdict, {}, "now")
    (cond,) = [x for x in pg["conditions"] if x["type"] == "Unschedulable"]
    fresh = c.scheduler.run_once(c.cache.snapshot())
    ssn_job = fresh.session.job(job)
    assert ssn_job is not None
    doc = diagnose_job(fresh.session, ssn_job, verdict)
    return verdict.status.message(), cond["message"], doc["message"]


def test_a_topology_gang_at_its_min_member_says_it_runs_and_what_waits() -> None:
    """``big`` (4 whole-node workers, minMember 2): three run on n1–n3, the fourth waits."""
    c = Cluster(min_member=2)
    first = c.cycle()  # the cycle that places the three
    assert [c.node_of(f"q-big-{i}") for i in range(4)] == ["n1", "n2", "n3", ""]
    assert first.verdicts["default/big"].status.reason is Reason.NO_ZONE_FITS
    assert first.verdicts["default/big"].status.message().startswith(PART), first.verdicts["default/big"]
    later = c.cycle()  # the rest alone, beside its running siblings
    verdict, condition, diagnosed = _told(c, later)
    assert verdict.startswith(PART), verdict
    assert condition.startswith(f"ZoneSelection: {PART}"), condition
    assert diagnosed.startswith(PART), diagnosed


def test_a_gang_short_of_its_min_member_is_told_only_why_it_waits() -> None:
    c = Cluster(min_member=4)
    result = c.cycle()
    message = result.verdicts["default/big"].status.message()
    assert message.startswith("NoZoneFits("), message


def test_a_gang_placed_quota_by_quota_says_it_runs_and_what_waits() -> None:
    """Without RDMA: three 8-GPU workers, minMember 2, on two empty nodes."""
    objs = [b.queue("research"), b.node("n0"), b.node("n1")]
    objs += b.training_job("job", 3, gpu=8, hca=None, min_member=2)
    c = Cluster()
    c.cache = type(c.cache)(clock=lambda: c.now)
    b.feed(c.cache, objs)
    c.scheduler = Scheduler(c.scheduler.policy)
    result = c.cycle()
    assert sorted(c.node_of(f"q-job-{i}") for i in range(3)) == ["", "n0", "n1"]
    message = result.verdicts["default/job"].status.message()
    assert message.startswith("placed 2 of 3 (minMember 2); 1 waits: InsufficientQuotaIdle"), message


def test_the_waiting_pod_s_own_filter_reason_says_its_gang_runs() -> None:
    """kube-scheduler's FailedScheduling message for the fourth worker (its quota unbound) is the
    extender's filter reason: it says the gang runs, then why this quota waits."""
    c = Cluster(min_member=2)
    c.cycle()
    result = c.cycle()
    ssn = result.session
    quota = ssn.quota("q-big-3")
    task = next(t for t in ssn.job("default/big").tasks.values() if t.quota == "q-big-3")  # type: ignore[union-attr]
    why = waiting_reason(ssn, task, quota, result.verdicts["default/big"])
    assert why.reason is Reason.NO_ZONE_FITS
    assert why.message().startswith(f"NoZoneFits(quota q-big-3 not bound: {PART[: -len(': NoZoneFits(')]}"), why
