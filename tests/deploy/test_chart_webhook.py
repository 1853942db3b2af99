"""The chart's MutatingWebhookConfiguration: its entries match the serve container's webhook
listener, which namespaces and pods reach it, and a chart without the webhook."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from tests.deploy.chart import (
    ALL_VARIANTS,
    NAMESPACE,
    VARIANTS,
    Obj,
    container,
    find,
    one,
    render,
    render_variant,
)
from tests.deploy.rendered import pods_webhook, serve_args, webhook_entries


@pytest.mark.parametrize("variant", [v for v in ALL_VARIANTS if v != "no-webhook"])
def test_webhook_configuration(variant: str) -> None:

    objs = render_variant(variant)
    for hook in webhook_entries(objs):
        _check_webhook_entry(objs, hook, variant)
    assert [h["name"].split(".")[0] for h in webhook_entries(objs)] == ["pods", "inject"]


def _check_webhook_entry(objs: Sequence[Obj], hook: dict[str, Any], variant: str) -> None:
    from webhooks.app import MUTATE_PATH

    assert hook["clientConfig"]["service"]["path"] == MUTATE_PATH == "/mutate/pods"
    assert hook["rules"] == [
        {
            "operations": ["CREATE"],
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["pods"],
            "scope": "Namespaced",
        }
    ]
    assert hook["sideEffects"] == "NoneOnDryRun"  # claims are written on Quotas, never for a dry run
    assert hook["admissionReviewVersions"] == ["v1"]
    assert hook["matchPolicy"] == "Equivalent" and hook["reinvocationPolicy"] == "Never"
    if hook["name"].startswith("pods."):
        assert hook["failurePolicy"] == VARIANTS[variant].get("webhook", {}).get("failurePolicy", "Ignore")
    assert hook["timeoutSeconds"] == 3
    # the Service routes to the serve container's webhook port
    svc_ref = hook["clientConfig"]["service"]
    svc = one(objs, "Service", svc_ref["name"])
    assert svc["metadata"]["namespace"] == svc_ref["namespace"] == NAMESPACE
    (port,) = svc["spec"]["ports"]
    assert port["port"] == svc_ref["port"] and port["targetPort"] == "webhook"
    dep = one(objs, "Deployment", "sky-scheduler")
    assert svc["spec"]["selector"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    serve_ports = {p["name"]: p["containerPort"] for p in container(dep, "sky-scheduler")["ports"]}
    assert serve_ports["webhook"] == serve_args(objs).webhook_port


def _namespace_matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    for expr in selector.get("matchExpressions", []):
        value = labels.get(expr["key"])
        op = expr["operator"]
        if op == "In" and value not in expr["values"]:
            return False
        if op == "NotIn" and value is not None and value in expr["values"]:
            return False
        if op == "Exists" and value is None:
            return False
        if op == "DoesNotExist" and value is not None:
            return False
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def test_webhook_namespace_selection() -> None:
    def ns(name: str, **labels: str) -> dict[str, str]:
        return {"kubernetes.io/metadata.name": name, **labels}

    inject = "scheduling.infini-ai.com/inject"
    sel = pods_webhook(render_variant("default"))["namespaceSelector"]
    assert _namespace_matches(sel, ns("ml-research"))
    assert _namespace_matches(sel, ns("ml-research", **{inject: "enabled"}))
    assert not _namespace_matches(sel, ns("ml-research", **{inject: "disabled"}))
    assert not _namespace_matches(sel, ns(NAMESPACE)), "the release namespace is never sent to the webhook"
    assert not _namespace_matches(sel, ns("kube-system"))
    opt_in = pods_webhook(render_variant("everything"))["namespaceSelector"]
    assert _namespace_matches(opt_in, ns("ml-research", **{inject: "enabled"}))
    assert not _namespace_matches(opt_in, ns("ml-research"))
    assert not _namespace_matches(opt_in, ns(NAMESPACE, **{inject: "enabled"}))
    other = render({"webhook": {"excludedNamespaces": []}}, extra=["--namespace", "sched"])
    assert not _namespace_matches(pods_webhook(other)["namespaceSelector"], ns("sched"))


def test_webhook_disabled() -> None:
    objs = render_variant("no-webhook")
    assert not find(objs, "MutatingWebhookConfiguration")
    assert not find(objs, "Secret")
    assert not [s for s in find(objs, "Service") if s["metadata"]["name"].endswith("-webhook")]
    assert serve_args(objs).webhook_port == 0


def test_only_the_schedulers_pods_reach_the_webhook() -> None:
    """matchConditions (CEL) restrict the calls to pods naming sky-scheduler, and — in inject-enabled
    namespaces — pods naming no scheduler or the default one: the schedulers the webhook injects."""
    from webhooks.state import DEFAULT_SCHEDULER, WebhookConfig

    pods, inject = webhook_entries(render_variant("default"))
    (cond,) = pods["matchConditions"]
    assert cond["expression"] == "has(object.spec.schedulerName) && object.spec.schedulerName == 'sky-scheduler'"
    (cond,) = inject["matchConditions"]
    injectable = ", ".join(f"'{s}'" for s in WebhookConfig().injectable_schedulers)
    assert WebhookConfig().injectable_schedulers == ("", DEFAULT_SCHEDULER)
    assert cond["expression"] == f"!has(object.spec.schedulerName) || object.spec.schedulerName in [{injectable}]"
    inject_label = "scheduling.infini-ai.com/inject"
    sel = inject["namespaceSelector"]
    assert _namespace_matches(sel, {"kubernetes.io/metadata.name": "ml", inject_label: "enabled"})
    assert not _namespace_matches(sel, {"kubernetes.io/metadata.name": "ml"})
    assert not _namespace_matches(sel, {"kubernetes.io/metadata.name": NAMESPACE, inject_label: "enabled"})
    other = render({"schedulerName": "gpu-sched", "webhook": {"injection": {"enabled": False}}})
    (only,) = webhook_entries(other)
    assert "== 'gpu-sched'" in only["matchConditions"][0]["expression"]
    strict = render({"webhook": {"injection": {"failurePolicy": "Fail"}}})
    assert [h["failurePolicy"] for h in webhook_entries(strict)] == ["Ignore", "Fail"]
