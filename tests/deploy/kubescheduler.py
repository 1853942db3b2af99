"""A JSON schema of the part of ``KubeSchedulerConfiguration`` (``kubescheduler.config.k8s.io/v1``)
the chart renders.

kube-scheduler decodes its configuration strictly (``serializer.EnableStrict``): an unknown or
mis-cased field is a start-up error, so keys here are exact and every object is closed
(``additionalProperties: false``). Source: the research note ``extender-protocol.md`` §3
(``staging/src/k8s.io/kube-scheduler/config/v1/types.go``, defaults in
``pkg/scheduler/apis/config/v1/defaults.go``, validation in ``…/validation/validation.go``), and
``k8s.io/component-base/config/v1alpha1`` for ``LeaderElectionConfiguration``.

Fields the chart does not render (``parallelism``, ``clientConnection``,
``plugins``, ``pluginConfig`` …) are deliberately absent: rendering one must come with a schema
entry here.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["GO_DURATION", "SCHEMA", "duration_seconds", "semantic_problems"]

GO_DURATION = r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$"
"""``metav1.Duration`` in JSON/YAML: Go's ``time.ParseDuration`` syntax (unsigned here)."""

_EXTENDED_RESOURCE = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
"""``managedResources[].name`` must be an extended resource name: domain-prefixed, not kubernetes.io."""

_duration = {"type": "string", "pattern": GO_DURATION}
_verb = {"type": "string", "minLength": 1}

LEADER_ELECTION: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["leaderElect", "resourceLock", "resourceName", "resourceNamespace"],
    "properties": {
        "leaderElect": {"type": "boolean"},
        "leaseDuration": _duration,
        "renewDeadline": _duration,
        "retryPeriod": _duration,
        # kube-scheduler ≥1.26 only accepts the Lease lock
        "resourceLock": {"const": "leases"},
        "resourceName": {"type": "string", "minLength": 1},
        "resourceNamespace": {"type": "string", "minLength": 1},
    },
}

PROFILE: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["schedulerName"],
    "properties": {
        "schedulerName": {"type": "string", "minLength": 1},
        "percentageOfNodesToScore": {"type": "integer", "minimum": 0, "maximum": 100},
    },
}

EXTENDER: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["urlPrefix"],
    "properties": {
        "urlPrefix": {"type": "string", "pattern": r"^https?://"},
        "filterVerb": _verb,
        "preemptVerb": _verb,
        "prioritizeVerb": _verb,
        "bindVerb": _verb,
        # int64, not defaulted in v1; must be > 0 when prioritizeVerb is set (checked below too)
        "weight": {"type": "integer", "minimum": 1},
        "enableHTTPS": {"type": "boolean"},
        "httpTimeout": _duration,
        "nodeCacheCapable": {"type": "boolean"},
        "managedResources": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name"],
                "properties": {
                    "name": {"type": "string", "pattern": _EXTENDED_RESOURCE},
                    "ignoredByScheduler": {"type": "boolean"},
                },
            },
        },
        "ignorable": {"type": "boolean"},
        "tlsConfig": {
            # ExtenderTLSConfig (a restclient TLSClientConfig): files, or base64 PEM data
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "insecure": {"type": "boolean"},
                "serverName": {"type": "string"},
                "certFile": {"type": "string", "pattern": "^/"},
                "keyFile": {"type": "string", "pattern": "^/"},
                "caFile": {"type": "string", "pattern": "^/"},
                "certData": {"type": "string"},
                "keyData": {"type": "string"},
                "caData": {"type": "string"},
            },
        },
    },
}

SCHEMA: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "additionalProperties": False,
    "required": ["apiVersion", "kind", "leaderElection", "profiles", "extenders"],
    "properties": {
        "apiVersion": {"const": "kubescheduler.config.k8s.io/v1"},
        "kind": {"const": "KubeSchedulerConfiguration"},
        "leaderElection": LEADER_ELECTION,
        "profiles": {"type": "array", "minItems": 1, "items": PROFILE},
        "extenders": {"type": "array", "items": EXTENDER},
    },
}

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration_seconds(text: str) -> float:
    if not re.match(GO_DURATION, text):
        raise ValueError(f"not a Go duration: {text!r}")
    return sum(float(n) * _UNITS[u] for n, u in re.findall(r"([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)", text))


def semantic_problems(cfg: dict[str, Any]) -> list[str]:
    """What kube-scheduler's validation would also reject, beyond the shapes of :data:`SCHEMA`."""
    problems = []
    le = cfg["leaderElection"]
    if (le["resourceNamespace"], le["resourceName"]) == ("kube-system", "kube-scheduler"):
        problems.append("leader election would contend for the default scheduler's Lease kube-system/kube-scheduler")
    if le.get("leaderElect"):
        lease = duration_seconds(le.get("leaseDuration", "15s"))
        renew = duration_seconds(le.get("renewDeadline", "10s"))
        retry = duration_seconds(le.get("retryPeriod", "2s"))
        # client-go: leaseDuration > renewDeadline > JitterFactor(1.2) × retryPeriod
        if not lease > renew > 1.2 * retry:
            problems.append("need leaseDuration > renewDeadline > 1.2 × retryPeriod")
    names = [p["schedulerName"] for p in cfg["profiles"]]
    if len(names) != len(set(names)):
        problems.append("duplicate schedulerName in profiles")
    binders = [e for e in cfg["extenders"] if e.get("bindVerb")]
    if len(binders) > 1:
        problems.append("only one extender can implement bind")
    for e in cfg["extenders"]:
        if e.get("prioritizeVerb") and e.get("weight", 0) <= 0:
            problems.append(f"extender {e['urlPrefix']}: a prioritizeVerb needs a positive weight")
        if e.get("enableHTTPS") != e["urlPrefix"].startswith("https://"):
            problems.append(f"extender {e['urlPrefix']}: enableHTTPS does not match the URL scheme")
        tls = e.get("tlsConfig", {})
        if tls and not e.get("enableHTTPS"):
            problems.append(f"extender {e['urlPrefix']}: tlsConfig without enableHTTPS is never used")
        if bool(tls.get("certFile") or tls.get("certData")) != bool(tls.get("keyFile") or tls.get("keyData")):
            problems.append(f"extender {e['urlPrefix']}: a client certificate needs its key")
        if tls.get("insecure"):
            problems.append(f"extender {e['urlPrefix']}: tlsConfig.insecure skips verifying the extender")
    managed = [m["name"] for e in cfg["extenders"] for m in e.get("managedResources", [])]
    if len(managed) != len(set(managed)):
        problems.append("a managed resource is listed twice")
    if any(m.split("/", 1)[0].endswith("kubernetes.io") for m in managed):
        problems.append("managedResources must be extended resources (not *kubernetes.io/…)")
    return problems
