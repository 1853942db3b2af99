"""values.schema.json and the chart's own checks: bad values fail `helm lint --strict` (and so
`helm install`) with a message naming the problem."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
import yaml

from tests.deploy.chart import CHART, chart_values, helm_lint, helm_template

# (id, values, a fragment the error must contain)
INVALID: list[tuple[str, dict[str, Any], str]] = [
    ("unknown-top-level-key", {"schedulerNmae": "x"}, "schedulerNmae"),
    ("unknown-nested-key", {"scheduler": {"serve": {"extenderPrt": 1}}}, "extenderPrt"),
    ("replicas-not-integer", {"scheduler": {"replicas": "two"}}, "scheduler.replicas"),
    ("replicas-negative", {"scheduler": {"replicas": -1}}, "scheduler.replicas"),
    ("failure-policy", {"webhook": {"failurePolicy": "Maybe"}}, "webhook.failurePolicy"),
    ("webhook-timeout-too-long", {"webhook": {"timeoutSeconds": 31}}, "webhook.timeoutSeconds"),
    ("webhook-timeout-zero", {"webhook": {"timeoutSeconds": 0}}, "webhook.timeoutSeconds"),
    ("cert-mode", {"webhook": {"certificates": {"mode": "vault"}}}, "webhook.certificates.mode"),
    ("namespace-selection", {"webhook": {"namespaceSelection": "all"}}, "webhook.namespaceSelection"),
    ("excluded-namespace-name", {"webhook": {"excludedNamespaces": ["Kube_System"]}}, "webhook.excludedNamespaces"),
    (
        "issuer-kind",
        {"webhook": {"certificates": {"certManager": {"issuerRef": {"name": "x", "kind": "Vault"}}}}},
        "kind",
    ),
    ("ca-bundle-not-base64", {"webhook": {"certificates": {"secret": {"caBundle": "-----BEGIN"}}}}, "caBundle"),
    ("http-timeout-not-duration", {"scheduler": {"kubeScheduler": {"extender": {"httpTimeout": "10"}}}}, "httpTimeout"),
    ("extender-weight-zero", {"scheduler": {"kubeScheduler": {"extender": {"weight": 0}}}}, "weight"),
    (
        "managed-resource-name",
        {"scheduler": {"kubeScheduler": {"extender": {"managedResources": [{"name": "a b"}]}}}},
        "managedResources",
    ),
    (
        "default-schedulers-lease",
        {"scheduler": {"kubeScheduler": {"leaderElection": {"leaseName": "kube-scheduler"}}}},
        "leaseName",
    ),
    (
        "percentage-over-100",
        {"scheduler": {"kubeScheduler": {"percentageOfNodesToScore": 150}}},
        "percentageOfNodesToScore",
    ),
    ("kube-scheduler-tag", {"scheduler": {"kubeScheduler": {"image": {"tag": "latest"}}}}, "tag"),
    ("port-out-of-range", {"scheduler": {"serve": {"extenderPort": 70000}}}, "extenderPort"),
    ("serve-log-level", {"scheduler": {"serve": {"logLevel": "verbose"}}}, "logLevel"),
    ("binder-period-zero", {"scheduler": {"serve": {"binderPeriod": 0}}}, "binderPeriod"),
    ("gc-refreeze-negative", {"scheduler": {"serve": {"gcRefreezeSeconds": -1}}}, "gcRefreezeSeconds"),
    ("policy-reload-negative", {"scheduler": {"serve": {"policyReloadSeconds": -1}}}, "policyReloadSeconds"),
    ("policy-reload-not-number", {"scheduler": {"serve": {"policyReloadSeconds": "10s"}}}, "policyReloadSeconds"),
    ("max-body-too-small", {"scheduler": {"serve": {"maxBodyBytes": 10}}}, "maxBodyBytes"),
    ("spot-resource", {"scheduler": {"serve": {"spotResource": "spot gpu"}}}, "spotResource"),
    ("anti-affinity-mode", {"scheduler": {"podAntiAffinity": "strict"}}, "podAntiAffinity"),
    ("pull-policy", {"image": {"pullPolicy": "Sometimes"}}, "pullPolicy"),
    ("digest", {"image": {"digest": "latest"}}, "digest"),
    ("empty-repository", {"image": {"repository": ""}}, "repository"),
    ("scheduler-name", {"schedulerName": "Sky Scheduler"}, "schedulerName"),
    ("discovery-log-level-unknown", {"discovery": {"roce": {"logLevel": "verbose"}}}, "logLevel"),
    ("log-format-unknown", {"scheduler": {"serve": {"logFormat": "xml"}}}, "logFormat"),
    ("cni-dir-relative", {"discovery": {"roce": {"cniDir": "etc/cni"}}}, "cniDir"),
    ("rdma-resource", {"discovery": {"ib": {"rdmaResource": "rdma hca"}}}, "rdmaResource"),
    ("toleration-operator", {"discovery": {"roce": {"tolerations": [{"operator": "Maybe"}]}}}, "operator"),
    ("resources-quantity", {"scheduler": {"serve": {"resources": {"limits": {"memory": "2 GB"}}}}}, "memory"),
    ("fullname-too-long", {"fullnameOverride": "x" * 41}, "fullnameOverride"),
    # dependent values (if/then in the schema)
    (
        "no-leader-election-with-replicas",
        {"scheduler": {"serve": {"leaderElection": {"enabled": False}}}},
        "scheduler.replicas",
    ),
    (
        "secret-mode-without-secret",
        {"webhook": {"certificates": {"mode": "secret"}}},
        "webhook.certificates.secret.name",
    ),
    ("host-lldpd-without-socket", {"discovery": {"roce": {"lldpd": {"enabled": False}}}}, "hostSocket"),
    (
        "service-monitor-without-service",
        {"metrics": {"service": {"enabled": False}, "serviceMonitor": {"enabled": True}}},
        "metrics.service.enabled",
    ),
    (
        "lldpd-image-without-tag",
        {"discovery": {"roce": {"lldpd": {"image": {"repository": "lldpd"}}}}},
        "lldpd.image.tag",
    ),
]

# Comparisons between values, which a JSON schema cannot express: the chart's `fail`s stop
# `helm install/upgrade/template`. `helm lint` cannot catch them: it renders in lint mode, where
# `fail` only logs.
RENDER_INVALID: list[tuple[str, dict[str, Any], str]] = [
    ("ports-collide", {"scheduler": {"serve": {"extenderPort": 8080}}}, "must differ"),
    (
        "lease-timings",
        {"scheduler": {"serve": {"leaderElection": {"renewDeadline": 20}}}},
        "retryPeriod < renewDeadline < leaseDuration",
    ),
    (
        "same-lease-names",
        {"scheduler": {"serve": {"leaderElection": {"leaseName": "sky-scheduler"}}}},
        "different names",
    ),
    ("pdb-blocks-drains", {"scheduler": {"replicas": 1}}, "minAvailable must be below"),
]


@pytest.mark.parametrize(("values", "fragment"), [(v, f) for _, v, f in INVALID], ids=[i for i, _, _ in INVALID])
def test_bad_values_fail_lint(values: dict[str, Any], fragment: str) -> None:
    proc = helm_lint(values)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, f"helm lint --strict accepted {values}"
    assert fragment in out, out
    # and what `helm install` renders fails the same way
    assert helm_template(values).returncode != 0


@pytest.mark.parametrize(
    ("values", "fragment"), [(v, f) for _, v, f in RENDER_INVALID], ids=[i for i, _, _ in RENDER_INVALID]
)
def test_bad_value_combinations_fail_install(values: dict[str, Any], fragment: str) -> None:
    proc = helm_template(values)
    assert proc.returncode != 0, f"helm template accepted {values}"
    assert fragment in proc.stderr, proc.stderr


GOOD: list[tuple[str, dict[str, Any]]] = [
    (
        "single-replica",
        {
            "scheduler": {
                "replicas": 1,
                "podDisruptionBudget": {"enabled": False},
                "serve": {"leaderElection": {"enabled": False}},
            }
        },
    ),
    ("pinned-kube-scheduler", {"scheduler": {"kubeScheduler": {"image": {"tag": "v1.31.4"}}}}),
    ("digest", {"image": {"digest": "sha256:" + "a" * 64}}),
    ("no-priority-class", {"scheduler": {"priorityClassName": ""}, "discovery": {"roce": {"priorityClassName": ""}}}),
    (
        "own-lldpd-image",
        {
            "discovery": {
                "roce": {"lldpd": {"image": {"repository": "example/lldpd", "tag": "1.0.18"}, "socketGroup": 101}}
            }
        },
    ),
    ("fail-closed", {"webhook": {"failurePolicy": "Fail", "timeoutSeconds": 5}}),
    ("root-agent", {"discovery": {"roce": {"runAsUser": 0}}}),
    (
        "object-selector",
        {
            "webhook": {
                "objectSelector": {"matchExpressions": [{"key": "example.com/skip", "operator": "DoesNotExist"}]}
            }
        },
    ),
]


@pytest.mark.parametrize("values", [v for _, v in GOOD], ids=[i for i, _ in GOOD])
def test_good_values_pass_lint(values: dict[str, Any]) -> None:
    proc = helm_lint(values)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_schema_is_draft7_and_strict() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    jsonschema.Draft7Validator.check_schema(schema)
    defaults = chart_values()
    jsonschema.Draft7Validator(schema).validate(defaults)

    # every object of the defaults is closed, except the free-form maps (labels, selectors …)
    free_form = {
        "commonLabels",
        "podAnnotations",
        "podLabels",
        "nodeSelector",
        "labels",
        "requests",
        "limits",
        "global",
    }

    def walk(node: dict[str, Any], path: str) -> list[str]:
        open_objects = []
        if node.get("type") == "object" and "properties" in node and node.get("additionalProperties") is not False:
            open_objects.append(path)
        for key, sub in node.get("properties", {}).items():
            if isinstance(sub, dict) and key not in free_form:
                open_objects += walk(sub, f"{path}/{key}")
        return open_objects

    assert walk(schema, "") == []

    # and every key of values.yaml is described by the schema
    def keys(node: Any, schema_node: dict[str, Any], path: str) -> list[str]:
        if "$ref" in schema_node:
            schema_node = schema["definitions"][schema_node["$ref"].rsplit("/", 1)[1]]
        missing = []
        if isinstance(node, dict) and "properties" in schema_node:
            for k, v in node.items():
                if k not in schema_node["properties"]:
                    missing.append(f"{path}/{k}")
                else:
                    missing += keys(v, schema_node["properties"][k], f"{path}/{k}")
        return missing

    assert keys(defaults, schema, "") == []


def test_values_yaml_documents_every_top_level_section() -> None:
    text = (CHART / "values.yaml").read_text(encoding="utf-8")
    for key in yaml.safe_load(text):
        assert f"\n{key}:" in "\n" + text
