"""The webhook registration of a local cluster: the chart's MutatingWebhookConfiguration, stored
in the emulator, its Service mapped to the webhook server on 127.0.0.1.

The configuration is the one ``charts/sky-scheduler`` renders with its defaults for release
``sky`` in namespace ``sky-system`` (``failurePolicy: Ignore``, ``timeoutSeconds: 3``, the
release and system namespaces excluded, ``inject=disabled`` namespaces opted out, CEL
``matchConditions`` on the pod's scheduler name);
``tests/deploy`` checks the two stay equal. The emulator resolves the Service reference
``sky-system/sky-scheduler-webhook:443`` to the webhook's local address, and verifies its
certificate for ``sky-scheduler-webhook.sky-system.svc`` as kube-apiserver would, so the
serving certificate carries that name (:data:`SERVICE_DNS`).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from extender.emulator import Emulator

__all__ = ["CONFIGURATION_NAME", "SERVICE", "SERVICE_DNS", "register_webhook", "webhook_configuration"]

Obj = dict[str, Any]
RELEASE_NAMESPACE = "sky-system"
CONFIGURATION_NAME = "sky-scheduler"
SERVICE = (RELEASE_NAMESPACE, "sky-scheduler-webhook", 443)
"""(namespace, name, port) of the webhook Service, as the chart names it."""
SERVICE_DNS = f"{SERVICE[1]}.{SERVICE[0]}.svc"
EXCLUDED_NAMESPACES = (RELEASE_NAMESPACE, "kube-system", "kube-public", "kube-node-lease")


def webhook_configuration(ca_bundle: bytes) -> Obj:
    """The chart's default MutatingWebhookConfiguration with ``ca_bundle`` (PEM) as caBundle: the
    main entry (pods naming ``sky-scheduler``) and the injection entry (opted-in namespaces)."""
    namespace, name, port = SERVICE
    bundle = base64.b64encode(ca_bundle).decode()

    def entry(hook: str, condition: tuple[str, str], inject: tuple[str, list[str]]) -> Obj:
        return {
            "name": hook,
            "admissionReviewVersions": ["v1"],
            "sideEffects": "NoneOnDryRun",
            "failurePolicy": "Ignore",
            "matchPolicy": "Equivalent",
            "reinvocationPolicy": "Never",
            "timeoutSeconds": 3,
            "clientConfig": {
                "service": {"name": name, "namespace": namespace, "path": "/mutate/pods", "port": port},
                "caBundle": bundle,
            },
            "rules": [
                {
                    "operations": ["CREATE"],
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "resources": ["pods"],
                    "scope": "Namespaced",
                }
            ],
            "matchConditions": [{"name": condition[0], "expression": condition[1]}],
            "namespaceSelector": {
                "matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": list(EXCLUDED_NAMESPACES)},
                    {"key": "scheduling.infini-ai.com/inject", "operator": inject[0], "values": inject[1]},
                ]
            },
            "objectSelector": {},
        }

    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": CONFIGURATION_NAME},
        "webhooks": [
            entry(
                "pods.sky-scheduler.scheduling.infini-ai.com",
                ("scheduler-name", "has(object.spec.schedulerName) && object.spec.schedulerName == 'sky-scheduler'"),
                ("NotIn", ["disabled"]),
            ),
            entry(
                "inject.sky-scheduler.scheduling.infini-ai.com",
                (
                    "scheduler-unset-or-default",
                    "!has(object.spec.schedulerName) || object.spec.schedulerName in ['', 'default-scheduler']",
                ),
                ("In", ["enabled"]),
            ),
        ],
    }


def register_webhook(emulator: Emulator, webhook_url: str, ca_file: Path) -> Obj:
    """Store the configuration in ``emulator`` and map its Service to ``webhook_url``'s address."""
    address = urlsplit(webhook_url).netloc
    namespace, name, port = SERVICE
    emulator.map_service(namespace, name, port, address)
    if emulator.try_get("v1", "namespaces", RELEASE_NAMESPACE) is None:
        emulator.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": RELEASE_NAMESPACE}})
    return emulator.apply(webhook_configuration(ca_file.read_bytes()), with_status=False)
