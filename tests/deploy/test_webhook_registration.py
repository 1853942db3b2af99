"""The chart's MutatingWebhookConfiguration and the emulator: the sandbox registers exactly what the
chart renders by default, and the emulator accepts the rendered object (its validation is
kube-apiserver's) and calls the real webhook through it."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from extender.emulator import Emulator
from extender.simulate.registration import webhook_configuration
from tests.deploy.chart import one, render_variant


def _without_ca(config: dict[str, object]) -> dict[str, object]:
    out = copy.deepcopy(config)
    for hook in out["webhooks"]:  # type: ignore[attr-defined]
        hook["clientConfig"].pop("caBundle", None)
    out.pop("metadata", None)
    return out


def test_the_sandbox_registers_what_the_chart_renders() -> None:
    rendered = one(render_variant("default"), "MutatingWebhookConfiguration")
    ours = webhook_configuration(b"-----BEGIN CERTIFICATE-----\n")
    assert rendered["metadata"]["name"] == ours["metadata"]["name"]
    assert _without_ca(rendered) == _without_ca(ours)


@pytest.mark.anyio
async def test_the_rendered_configuration_is_accepted_and_called_by_the_emulator(tmp_path: Path) -> None:
    from tests.emulator.webhooks import RecordingWebhook, annotate

    rendered = one(render_variant("default"), "MutatingWebhookConfiguration")
    service = rendered["webhooks"][0]["clientConfig"]["service"]
    dns = f"{service['name']}.{service['namespace']}.svc"
    hook = await RecordingWebhook(tmp_path, hosts=(dns,)).start()
    try:
        hook.routes[service["path"]] = annotate("example.com/admitted", "yes")
        rendered["webhooks"][0]["clientConfig"]["caBundle"] = hook.ca_bundle  # what the chart's Secret holds
        async with Emulator() as emu:
            emu.create(rendered)
            emu.map_service(service["namespace"], service["name"], service["port"], hook.address)
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p", "namespace": "default"},
                "spec": {"schedulerName": "sky-scheduler", "containers": [{"name": "c", "image": "busybox"}]},
            }
            result = await emu.create_admitted(pod)
        assert result.obj["metadata"]["annotations"] == {"example.com/admitted": "yes"}
        assert hook.calls[0].path == "/mutate/pods" and hook.calls[0].query == "timeout=3s"
    finally:
        await hook.stop()
