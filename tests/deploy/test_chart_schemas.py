"""Offline schema validation of what the chart renders: every object against the Kubernetes
schemas of kubernetes-validate, the CRDs against apiextensions, and the custom resources of other
projects (cert-manager, Prometheus Operator) by their own contracts."""

from __future__ import annotations

import os
from typing import Any

import jsonschema
import pytest
import yaml

from tests.deploy import kubescheduler
from tests.deploy.chart import (
    ALL_VARIANTS,
    CHART,
    KUBE_VERSION,
    find,
    one,
    render_variant,
)

# Kinds kubernetes-validate has no schema for: custom resources of other projects.
CUSTOM_RESOURCES = {
    ("cert-manager.io/v1", "Issuer"): "cert-manager CRD (not a built-in kind)",
    ("cert-manager.io/v1", "Certificate"): "cert-manager CRD (not a built-in kind)",
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "Prometheus Operator CRD (not a built-in kind)",
}


def _kv() -> Any:
    try:
        import kubernetes_validate
    except ImportError:
        msg = "kubernetes-validate is not installed (pip install kubernetes-validate)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return kubernetes_validate


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


@pytest.mark.parametrize("variant", ALL_VARIANTS)
def test_rendered_objects_validate_against_kubernetes_schemas(variant: str) -> None:
    kv = _kv()
    problems, skipped = [], []
    for o in render_variant(variant):
        key = (o["apiVersion"], o["kind"])
        if key in CUSTOM_RESOURCES:
            skipped.append(f"{o['kind']} {o['metadata']['name']}: {CUSTOM_RESOURCES[key]}")
            continue
        try:
            kv.validate(o, KUBE_VERSION, strict=True)
        except kv.SchemaNotFoundError:
            problems.append(f"{o['kind']} {o['metadata']['name']}: no schema, and not a known custom resource")
        except kv.ValidationError as e:
            problems.append(f"{o['kind']} {o['metadata']['name']}: {_first_line(e)}")
    assert not problems, "\n".join(problems)
    if variant in {"cert-manager", "everything"}:
        assert skipped, "the custom resources of this variant were not rendered"


def test_custom_resources_are_skipped_only_with_a_reason() -> None:
    rendered = {(o["apiVersion"], o["kind"]) for v in ALL_VARIANTS for o in render_variant(v)}
    unknown_groups = {k for k in rendered if "." in k[0].split("/")[0] and k not in CUSTOM_RESOURCES}
    builtin_groups = (
        "apps",
        "policy",
        "rbac.authorization.k8s.io",
        "admissionregistration.k8s.io",
        "networking.k8s.io",
    )
    assert {k for k in unknown_groups if not k[0].startswith(builtin_groups)} == set()


def test_chart_crds_validate_against_the_apiextensions_schema() -> None:
    kv = _kv()
    for path in sorted((CHART / "crds").glob("*.yaml")):
        docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
        assert len(docs) == 1, path
        try:
            kv.validate(docs[0], KUBE_VERSION, strict=True)
        except kv.ValidationError as e:
            pytest.fail(f"{path.name}: {_first_line(e)}")


def test_cert_manager_objects_are_well_formed() -> None:
    """No cert-manager schema offline: check the fields cert-manager's v1 API requires."""
    objs = render_variant("cert-manager")
    issuers = {i["metadata"]["name"]: i for i in find(objs, "Issuer")}
    certs = {c["metadata"]["name"]: c for c in find(objs, "Certificate")}
    assert set(issuers) == {"sky-scheduler-selfsigned", "sky-scheduler-webhook-ca"}
    assert issuers["sky-scheduler-selfsigned"]["spec"] == {"selfSigned": {}}
    assert issuers["sky-scheduler-webhook-ca"]["spec"] == {"ca": {"secretName": "sky-scheduler-webhook-ca"}}
    assert set(certs) == {"sky-scheduler-webhook-ca", "sky-scheduler-webhook"}
    ca = certs["sky-scheduler-webhook-ca"]["spec"]
    assert ca["isCA"] is True and ca["issuerRef"]["name"] == "sky-scheduler-selfsigned"
    serving = certs["sky-scheduler-webhook"]["spec"]
    assert serving["secretName"] == "sky-scheduler-webhook-tls"
    assert serving["issuerRef"] == {"name": "sky-scheduler-webhook-ca", "kind": "Issuer", "group": "cert-manager.io"}
    for c in certs.values():
        for key in ("duration", "renewBefore"):
            assert jsonschema.Draft7Validator({"pattern": kubescheduler.GO_DURATION}).is_valid(c["spec"][key])
        assert kubescheduler.duration_seconds(c["spec"]["renewBefore"]) < kubescheduler.duration_seconds(
            c["spec"]["duration"]
        )


def test_service_monitor_scrapes_the_ops_port_of_the_metrics_service() -> None:
    objs = render_variant("everything")
    sm = one(objs, "ServiceMonitor")
    metrics = one(objs, "Service", "sky-scheduler-metrics")
    webhook_svc = one(objs, "Service", "sky-scheduler-webhook")
    selector = sm["spec"]["selector"]["matchLabels"]
    assert selector.items() <= metrics["metadata"]["labels"].items()
    assert not selector.items() <= webhook_svc["metadata"]["labels"].items()
    assert [e["port"] for e in sm["spec"]["endpoints"]] == [p["name"] for p in metrics["spec"]["ports"]] == ["ops"]
    assert sm["spec"]["endpoints"][0]["path"] == "/metrics"
    assert not find(render_variant("default"), "ServiceMonitor"), "the ServiceMonitor is off by default"
