"""Idle quotas go back before hop ② plans (``release_idle_quota``): a gang planned in the cycle
an idle quota is released counts the room that quota held (found by the emulator property test
with random clusters: a gang took two leaves because an idle quota released later in the same
cycle still held room in the one leaf that could have held it)."""

from __future__ import annotations

from typing import Any

from extender.framework.intents import ReleaseQuota
from extender.framework.status import Reason
from extender.scheduler import Scheduler
from tests import builders as b
from tests.core.scenarios import binds, cycle, make_cache, policy_without


def _two_leaves() -> list[dict[str, Any]]:
    """Leaf s0: n0, n1; leaf s1: n2 — 8 GPUs each."""
    objs: list[dict[str, Any]] = []
    for i, leaf in enumerate(["s0", "s0", "s1"]):
        objs += [b.node(f"n{i}"), b.topology(f"n{i}", [leaf])]
    return objs


def _idle_on_n1() -> dict[str, Any]:
    """4 GPUs of n1 held by a quota the scheduler bound that nothing claims or reserves any more."""
    return b.quota("done-0", queue="other", gpu=4, hca=None, status={"phase": "QuotaBound", "nodeName": "n1"})


def test_a_gang_planned_while_an_idle_quota_goes_back_takes_the_one_leaf_it_fits() -> None:
    """With done-0 bound, s0 takes 3 of the gang's four 4-GPU workers and s1 two: the gang would
    span both leaves. done-0 goes back in the same cycle, before hop ② plans: s0 holds it whole."""
    cache = make_cache([*_two_leaves(), _idle_on_n1(), *b.training_job("big", 4, gpu=4)])
    result = cycle(cache)
    assert [i for i in result.intents if isinstance(i, ReleaseQuota)] == [
        ReleaseQuota("done-0", "n1", "no task claims it and no reservation holds it")
    ]
    assert sorted(binds(result).values()) == ["n0", "n0", "n1", "n1"]


def test_a_policy_that_does_not_run_release_idle_quota_still_releases_idle_quotas_at_the_end() -> None:
    """release_quota keeps giving idle quotas back (policies written before the action existed);
    hop ② then plans around the room they held for one more cycle."""
    policy = policy_without("release_idle_quota")
    cache = make_cache([*_two_leaves(), _idle_on_n1(), *b.training_job("big", 4, gpu=4)])
    result = cycle(cache, Scheduler(policy))
    assert [i.quota for i in result.intents if isinstance(i, ReleaseQuota)] == ["done-0"]
    assert "n2" in binds(result).values()


def test_an_idle_quota_another_controller_bound_is_not_promised_to_be_released() -> None:
    """release_quota never gives back a binding another controller wrote, so a quota that fits
    only in its room is told InsufficientQuotaIdle, not QuotaIdleOnlyAfterRelease (a wait that
    would never end)."""
    theirs = b.quota("q-theirs", gpu=8, hca=None, status={"phase": "QuotaBound", "nodeName": "n0", "boundBy": None})
    cache = make_cache([b.queue("research"), b.node("n0"), theirs, b.quota("q-new", gpu=8, hca=None)])
    b.feed(cache, [b.pod("p", hca=None, gpu=8, quota="q-new")])
    for policy in (None, policy_without("release_idle_quota")):
        result = cycle(cache, Scheduler(policy) if policy is not None else None)
        assert result.verdicts["default/p"].status.reason is Reason.INSUFFICIENT_QUOTA_IDLE
        assert not [i for i in result.intents if isinstance(i, ReleaseQuota)]
