"""A node's ``scheduling.infini-ai.com/spot-shared`` annotation that is no quantity of the spot
resource (a typo: ``2 GPUs``, ``two``, ``-2``) is said, not read as a shared pool of 0.

Before, the typo silently made the shared pool 0 and the exclusive pool the whole node: shared
spot pods were refused with ``SpotPoolExhausted`` ("shared spot pool has 0 of 1 left", as if the
pool were full) and exclusive pods took the GPUs the operator meant to share. Now spot pods of
either pool are refused on that node with ``SpotPoolInvalid``, naming the annotation and its
value — the reason kube-scheduler's events and ``/diagnose`` show — until it is fixed; pods of
no pool (training pods) are untouched.

A value above what the node has of the spot resource (``80`` on a node of 8: a typo for ``8``, or
``40`` for ``4``) is as much a typo: it was capped to the whole node, so the exclusive pool
quietly became 0 and exclusive spot pods were refused with ``SpotPoolExhausted`` ("exclusive spot
pool has 0 of 1 left"). As kube-apiserver refuses an out-of-range value rather than clamping it,
it is now ``SpotPoolInvalid`` too, naming the value and the node's capacity; and the cache logs
the node's unreadable annotation once (as it logs a Node it cannot convert).
"""

from __future__ import annotations

import logging

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


@pytest.mark.parametrize("typo", ["2 GPUs", "two", "-2", "1.5x", "80", "8.5"])
@pytest.mark.parametrize("pool", ["shared", "exclusive"])
def test_a_typo_in_spot_shared_is_the_reason_spot_pods_are_refused(typo: str, pool: str) -> None:
    status = _verdict(typo, pool=pool)
    assert not status.ok
    assert status.reason is Reason.SPOT_POOL_INVALID
    detail = status.failures[0].detail
    assert wellknown.ANNO_SPOT_SHARED in detail and repr(typo) in detail
    assert wellknown.ANNO_SPOT_SHARED in unblock(Reason.SPOT_POOL_INVALID.value)


@pytest.mark.parametrize("pool", ["shared", "exclusive"])
def test_too_much_spot_shared_names_the_node_capacity(pool: str) -> None:
    detail = _verdict("80", pool=pool).failures[0].detail
    assert "'80'" in detail and "8" in detail.replace("'80'", "")


@pytest.mark.parametrize("shared", ["0", "2", "8", "8000m"])
@pytest.mark.parametrize("pool", ["shared", "exclusive"])
def test_a_valid_spot_shared_still_lends(shared: str, pool: str) -> None:
    lends = {"shared": shared not in ("0",), "exclusive": shared not in ("8", "8000m")}[pool]
    assert _verdict(shared, pool=pool).ok is lends


def test_the_cache_logs_an_unreadable_spot_shared_once(caplog: pytest.LogCaptureFixture) -> None:
    node = b.node(
        "n0",
        extra_allocatable={wellknown.RESOURCE_SPOT_GPU: "8"},
        annotations={wellknown.ANNO_SPOT_SHARED: "80"},
    )
    cache = ClusterCache(clock=lambda: NOW)
    with caplog.at_level(logging.WARNING):
        b.feed(cache, [node])
        cache.on_node_update(node, node)
    said = [r.getMessage() for r in caplog.records if wellknown.ANNO_SPOT_SHARED in r.getMessage()]
    assert len(said) == 1 and "n0" in said[0] and "'80'" in said[0]
    assert "n0" in cache.node_problems
    fixed = b.node(
        "n0", extra_allocatable={wellknown.RESOURCE_SPOT_GPU: "8"}, annotations={wellknown.ANNO_SPOT_SHARED: "8"}
    )
    cache.on_node_update(node, fixed)
    assert "n0" not in cache.node_problems


def test_pods_of_no_spot_pool_ignore_the_annotation() -> None:
    assert _verdict("two", pool=None).ok
