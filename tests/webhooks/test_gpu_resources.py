"""``--gpu-resources``: GPUs of any vendor are GPUs — the webhook injects their pods, binpack and
sylas weigh them — and the list reaches the session from the settings."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from extender import wellknown
from extender.cache.cache import ClusterCache
from extender.cache.convert import ConvertOptions
from extender.conf import default_policy
from extender.framework.session import Session
from extender.plugins.binpack import GPU_ALIAS, resolve_weights
from extender.settings import add_serve_arguments, settings_from_args
from extender.simulate.certs import TLSFiles
from tests import builders as b
from tests.webhooks import helpers as h
from webhooks.state import WebhookConfig

AMD = "amd.com/gpu"
INJECT = {wellknown.LABEL_INJECT: wellknown.LABEL_INJECT_ENABLED}


def _amd_pod(name: str) -> dict[str, Any]:
    return h.admission_pod(
        name, namespace="team-a", scheduler="default-scheduler", gpu=None, hca=None, extra={AMD: "1"}
    )


@pytest.mark.anyio
@pytest.mark.parametrize(("resources", "injected"), [((AMD,), True), ((wellknown.RESOURCE_GPU,), False)])
async def test_an_amd_gpu_pod_is_injected_when_amd_is_a_gpu_resource(
    tls: TLSFiles, resources: tuple[str, ...], injected: bool
) -> None:
    objs = [b.node("n0"), b.quota("q-0", queue="default", gpu=None, hca=None, request={AMD: "1"})]
    state = h.make_state(objs, namespaces={"team-a": INJECT}, config=WebhookConfig(gpu_resources=resources))
    async with h.serve(state, tls) as hook:
        a = await hook.pod(_amd_pod("amd-0"))
    assert (a.pod["spec"]["schedulerName"] == wellknown.SCHEDULER_NAME) is injected
    assert (a.quota == "q-0") is injected


def test_settings_thread_the_list_to_the_webhook_and_the_session() -> None:
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    s = settings_from_args(
        parser.parse_args(["--gpu-resources", f"{AMD}, gpu.intel.com/i915", "--webhook-port", "0"]), env={}
    )
    assert s.gpu_resource_names() == (AMD, "gpu.intel.com/i915")
    assert WebhookConfig.from_settings(s).gpu_resources == (AMD, "gpu.intel.com/i915")
    cache = ClusterCache(ConvertOptions(gpu_resources=s.gpu_resource_names()), clock=lambda: 1.0)
    assert Session(cache.snapshot(), default_policy()).gpu_resources == (AMD, "gpu.intel.com/i915")
    with pytest.raises(ValueError, match="--gpu-resources must name at least one"):
        settings_from_args(parser.parse_args(["--gpu-resources", " , ", "--webhook-port", "0"]), env={})


def test_binpack_weighs_every_configured_gpu_resource() -> None:
    weights = {GPU_ALIAS: 10.0, "cpu": 1.0, "nvidia.com/gpu": 3.0}
    assert resolve_weights(weights, (AMD, "nvidia.com/gpu")) == {"cpu": 1.0, "nvidia.com/gpu": 3.0, AMD: 10.0}
    assert resolve_weights({"cpu": 1.0}, (AMD,)) == {"cpu": 1.0}


def test_binpack_packs_amd_nodes_as_it_packs_nvidia_ones() -> None:
    """The same cluster in either vendor's resource: binpack scores the same nodes the same."""

    def scores(resource: str) -> dict[str, float]:
        def swap(o: dict[str, Any]) -> dict[str, Any]:
            alloc = (o.get("status") or {}).get("allocatable")
            if alloc and wellknown.RESOURCE_GPU in alloc:
                alloc[resource] = alloc.pop(wellknown.RESOURCE_GPU)
            return o

        objs = [swap(o) for o in b.seed_cluster()]
        cache = ClusterCache(ConvertOptions(gpu_resources=(resource,)), clock=lambda: 1.0)
        b.feed(cache, objs)
        q = b.quota("q-0", gpu=None, hca=None, request={resource: "4"})
        b.feed(cache, [q])
        ssn = Session(cache.snapshot(), default_policy())
        plugin = default_policy().plugins["binpack"]
        fn = plugin.open(ssn)["qn.node_order"]
        quota = ssn.quota("q-0")
        assert quota is not None
        return {n: fn(quota, ssn.node(n)) for n in ("n0", "n1")}

    nvidia, amd = scores(wellknown.RESOURCE_GPU), scores(AMD)
    assert amd == nvidia and all(v > 0 for v in amd.values())
