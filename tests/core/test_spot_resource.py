"""One spot resource: ``serve --spot-resource`` (Helm ``scheduler.serve.spotResource``) is what
marks a spot pod (the cache, the webhook), what the sylas pools lend and what the spot zone room
counts. The sylas plugin's old ``resource`` argument may still name it, but never another one:
a policy whose ``sylas.resource`` differs is refused at start and on reload, with a message
saying which two names disagree — before, the two were read apart and the pools were silently
not enforced (a shared-pool pod passed a node whose shared pool had no room left)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from extender import wellknown
from extender.cache.cache import ClusterCache
from extender.cache.convert import ConvertOptions
from extender.conf import PolicyError, default_policy, default_policy_text, load_policy_bytes, load_policy_text
from extender.framework.session import Session
from extender.framework.status import Reason
from extender.policy_reload import PolicyStatus, PolicyWatcher
from extender.service import Runtime
from extender.settings import ServeSettings, add_serve_arguments, settings_from_args
from tests import builders as b

NOW = 1_800_000_000.0
CUSTOM = "example.com/spot-gpu"


def _verdict(spot_resource: str, *, pool: str, want: int) -> Reason | None:
    """The TN verdict on n0 (8 GPUs, 8 of ``spot_resource``, 2 of them the shared pool) for a
    spot pod of ``pool`` asking ``want`` of it, under the default policy."""
    node = b.node("n0", extra_allocatable={spot_resource: "8"}, annotations={wellknown.ANNO_SPOT_SHARED: "2"})
    pod = b.pod(
        "sp-0",
        gpu=want,
        hca=None,
        extra={spot_resource: str(want)},
        annotations={wellknown.ANNO_SPOT_POOL: pool},
    )
    cache = ClusterCache(ConvertOptions(spot_resource=spot_resource), clock=lambda: NOW)
    b.feed(cache, [b.queue("research"), node, pod])
    assert not cache.conversion_errors
    ssn = Session(cache.snapshot(NOW), default_policy())
    assert ssn.spot_resource == spot_resource
    task = next(t for j in ssn.jobs() for t in j.tasks.values() if t.name == "sp-0")
    assert task.spot
    n0 = ssn.node("n0")
    assert n0 is not None
    status = ssn.tn.predicate(task, n0)
    return None if status.ok else status.reason


@pytest.mark.parametrize("spot_resource", [wellknown.RESOURCE_SPOT_GPU, CUSTOM])
def test_the_pools_lend_the_configured_spot_resource(spot_resource: str) -> None:
    """Whatever ``--spot-resource`` names, the shared pool (2 here) refuses a shared pod of 4 and
    takes one of 2; the exclusive pool (6) takes 6 and refuses 7 (the node's 8 GPUs would)."""
    assert _verdict(spot_resource, pool="shared", want=4) is Reason.SPOT_POOL_EXHAUSTED
    assert _verdict(spot_resource, pool="shared", want=2) is None
    assert _verdict(spot_resource, pool="exclusive", want=6) is None
    assert _verdict(spot_resource, pool="exclusive", want=7) is Reason.SPOT_POOL_EXHAUSTED


def _with_sylas_resource(resource: str) -> str:
    text = default_policy_text()
    assert "  sylas: {}\n" in text
    return text.replace("  sylas: {}\n", f"  sylas: {{resource: {resource}}}\n")


def test_a_policy_naming_another_spot_resource_is_refused() -> None:
    other = _with_sylas_resource(CUSTOM).encode()
    with pytest.raises(PolicyError, match=r"sylas.*example.com/spot-gpu.*--spot-resource.*spot-gpu") as err:
        load_policy_bytes(other, "p.yaml", spot_resource=wellknown.RESOURCE_SPOT_GPU)
    assert str(err.value).startswith("p.yaml: ")
    # the same name is fine, and so is none (the setting rules)
    load_policy_bytes(other, "p.yaml", spot_resource=CUSTOM)
    load_policy_bytes(default_policy_text().encode(), "p.yaml", spot_resource=CUSTOM)


def test_serve_refuses_to_start_on_a_mismatch(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(_with_sylas_resource(CUSTOM))
    with pytest.raises(PolicyError, match="--spot-resource"):
        Runtime._initial_policy(ServeSettings(policy=str(path)), None)
    Runtime._initial_policy(ServeSettings(policy=str(path), spot_resource=CUSTOM), None)


def test_a_reload_naming_another_spot_resource_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(default_policy_text())
    box: dict[str, Any] = {"policy": load_policy_text(default_policy_text())}
    w = PolicyWatcher(
        str(path),
        period=1.0,
        status=PolicyStatus(source=str(path), sha256="", loaded_at=NOW),
        current=lambda: box["policy"],
        apply=lambda p: box.__setitem__("policy", p),
        spot_resource=wellknown.RESOURCE_SPOT_GPU,
    )
    first = box["policy"]
    path.write_text(_with_sylas_resource(CUSTOM))
    assert w.check() == "invalid"
    assert box["policy"] is first
    assert w.status.error is not None and "--spot-resource" in w.status.error.message


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (wellknown.RESOURCE_GPU, "is one of --gpu-resources"),  # every GPU pod would be spot, evictable
        ("cpu", "an extended resource"),  # every pod would be spot
        ("", "an extended resource"),  # no pod would be
        ("spot-gpu", "an extended resource"),
        ("kubernetes.io/spot", "an extended resource"),
        ("example.com/", "an extended resource"),
        (wellknown.RDMA_RESOURCE_PREFIX + "spot", "RDMA"),  # every spot pod would be an RDMA pod
    ],
)
def test_a_spot_resource_that_would_misclassify_pods_is_refused(value: str, why: str) -> None:
    """``--spot-resource`` decides which pods skip quotas and may be evicted: a value that is a
    GPU resource, a native resource or no extended resource at all is refused at start."""
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    with pytest.raises(ValueError, match=f"--spot-resource {value!r}.*{why}"):
        settings_from_args(parser.parse_args(["--spot-resource", value, "--webhook-port", "0"]), env={})
    ok = settings_from_args(parser.parse_args(["--spot-resource", CUSTOM, "--webhook-port", "0"]), env={})
    assert ok.spot_resource == CUSTOM


def _spot_pod(pool: str, node: str | None = None) -> dict[str, Any]:
    return b.pod(
        "sp",
        gpu=1,
        hca=None,
        extra={wellknown.RESOURCE_SPOT_GPU: "1"},
        annotations={wellknown.ANNO_SPOT_POOL: pool},
        node=node,
        phase="Running" if node else "Pending",
    )


@pytest.mark.parametrize("pool", ["Shared", "share", "exclusiv", ""])
def test_a_spot_pod_naming_no_pool_is_refused_with_why(pool: str) -> None:
    """``spot-pool: Shared`` is no pool: the pod is not placed in the exclusive one as if nothing
    were said (it was), its filter answer says what is wrong (InvalidPod). A pod already running
    with such a value still counts on its node (in the exclusive pool, which lends by default)."""
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, [b.queue("research"), b.node("n0", extra_allocatable={wellknown.RESOURCE_SPOT_GPU: "8"})])
    cache.on_pod_add(_spot_pod(pool))
    problem = cache.pod_problem("default", "sp")
    assert problem is not None and wellknown.ANNO_SPOT_POOL in problem and "shared or exclusive" in problem
    cache.on_pod_delete(_spot_pod(pool))
    running = _spot_pod(pool, node="n0")
    cache.on_pod_add(running)
    assert cache.pod_problem("default", "sp") is None
    assert cache.snapshot(NOW).nodes["n0"].idle.get(wellknown.RESOURCE_SPOT_GPU) == 7000


@pytest.mark.parametrize("pool", ["shared", "exclusive"])
def test_both_pools_are_accepted(pool: str) -> None:
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, [b.queue("research"), _spot_pod(pool)])
    assert cache.conversion_errors == {}
