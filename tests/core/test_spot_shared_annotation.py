"""A node's ``scheduling.infini-ai.com/spot-shared`` annotation that is no quantity of the spot
resource (a typo: ``2 GPUs``, ``two``, ``-2``) is said, not read as a shared pool of 0.

Before, the typo silently made the shared pool 0 and the exclusive pool the whole node: shared
spot pods were refused with ``SpotPoolExhausted`` ("shared spot pool has 0 of 1 left", as if the
pool were full) and exclusive pods took the GPUs the operator meant to share. Now spot pods of
either pool are refused on that node with ``SpotPoolInvalid``, naming the annotation and its
value — the reason kube-scheduler's events and ``/diagnose`` show — until it is fixed; pods of
no pool (training pods) are untouched.
"""

from __future__ import annotations

import pytest

from extender import wellknown
from extender.cache.cache import ClusterCache
from extender.conf import default_policy
from extender.diagnose import unblock
from extender.framework.session import Session
from extender.framework.status import Reason, Status
from tests import builders as b

NOW = 1_800_000_000.0


def _verdict(shared: str, *, pool: str | None) -> Status:
    """The TN verdict on n0 (8 GPUs, 8 spot GPUs, ``spot-shared: <shared>``) for a 1-GPU pod:
    a spot pod of ``pool``, or (None) a pod of no pool."""
    node = b.node(
        "n0",
        extra_allocatable={wellknown.RESOURCE_SPOT_GPU: "8"},
        annotations={wellknown.ANNO_SPOT_SHARED: shared},
    )
    if pool is None:
        objs = [b.quota("q0", gpu=1, hca=1, status={"phase": "QuotaBound", "nodeName": "n0"})]
        pod = b.pod("p-0", quota="q0", gpu=1, hca=1)
    else:
        objs = []
        pod = b.pod(
            "p-0",
            gpu=1,
            hca=None,
            extra={wellknown.RESOURCE_SPOT_GPU: "1"},
            annotations={wellknown.ANNO_SPOT_POOL: pool},
        )
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, [b.queue("research"), node, *objs, pod])
    assert not cache.conversion_errors
    ssn = Session(cache.snapshot(NOW), default_policy())
    task = next(t for j in ssn.jobs() for t in j.tasks.values() if t.name == "p-0")
    n0 = ssn.node("n0")
    assert n0 is not None
    return ssn.tn.predicate(task, n0)


@pytest.mark.parametrize("typo", ["2 GPUs", "two", "-2", "1.5x"])
@pytest.mark.parametrize("pool", ["shared", "exclusive"])
def test_a_typo_in_spot_shared_is_the_reason_spot_pods_are_refused(typo: str, pool: str) -> None:
    status = _verdict(typo, pool=pool)
    assert not status.ok
    assert status.reason is Reason.SPOT_POOL_INVALID
    detail = status.failures[0].detail
    assert wellknown.ANNO_SPOT_SHARED in detail and repr(typo) in detail
    assert wellknown.ANNO_SPOT_SHARED in unblock(Reason.SPOT_POOL_INVALID.value)


@pytest.mark.parametrize("pool", ["shared", "exclusive"])
def test_a_valid_spot_shared_still_lends(pool: str) -> None:
    assert _verdict("2", pool=pool).ok


def test_pods_of_no_spot_pool_ignore_the_annotation() -> None:
    assert _verdict("two", pool=None).ok
