"""``MutatingWebhookConfiguration`` (``admissionregistration.k8s.io/v1``): defaults, validation and
the parsed form the admission chain runs.

Defaults are kube-apiserver's (``SetDefaults_MutatingWebhook``): ``failurePolicy: Fail``,
``matchPolicy: Equivalent``, empty ``namespaceSelector``/``objectSelector`` (everything),
``timeoutSeconds: 10``, ``reinvocationPolicy: Never``, rule ``scope: "*"``, service ``port: 443``.
Validation refuses what kube-apiserver refuses (v1: ``sideEffects`` None/NoneOnDryRun, timeout
1–30 s, exactly one of ``url``/``service``, an ``https`` URL without query or fragment, …) and, in
addition, any ``matchConditions`` expression outside the CEL subset of :mod:`.cel`.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from extender.emulator.cel import CelError, Program, compile_expression
from extender.emulator.errors import Cause
from extender.emulator.meta import validate_dns_subdomain, validate_label_key
from extender.model.selectors import LabelSelector, SelectorError

__all__ = ["KEY", "Webhook", "default_configuration", "ordered_webhooks", "validate_configuration"]

Obj = dict[str, Any]
KEY = "mutatingwebhookconfigurations.admissionregistration.k8s.io"
"""The store key of the kind."""

_OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT", "*"})
REVIEW_VERSIONS = ("v1", "v1beta1")
"""AdmissionReview versions the emulator speaks, in its order of preference."""


@dataclass(frozen=True, slots=True)
class Webhook:
    """One webhook of a stored configuration, parsed (the configuration is valid)."""

    uid: str  # "<configuration>/<webhook>/<n>": unique even when names repeat
    configuration: str
    name: str
    client_config: Mapping[str, Any]
    rules: tuple[Mapping[str, Any], ...]
    failure_policy: str
    namespace_selector: LabelSelector
    object_selector: LabelSelector
    side_effects: str
    timeout_seconds: int
    review_version: str
    reinvocation: str
    conditions: tuple[tuple[str, Program], ...]

    @property
    def ignore_failures(self) -> bool:
        return self.failure_policy == "Ignore"


def default_configuration(obj: Obj) -> None:
    """Fill in kube-apiserver's defaults (in place)."""
    for hook in obj.get("webhooks") or []:
        if not isinstance(hook, dict):
            continue
        hook.setdefault("failurePolicy", "Fail")
        hook.setdefault("matchPolicy", "Equivalent")
        hook.setdefault("namespaceSelector", {})
        hook.setdefault("objectSelector", {})
        hook.setdefault("timeoutSeconds", 10)
        hook.setdefault("reinvocationPolicy", "Never")
        for rule in hook.get("rules") or []:
            if isinstance(rule, dict):
                rule.setdefault("scope", "*")
        service = (hook.get("clientConfig") or {}).get("service")
        if isinstance(service, dict):
            service.setdefault("port", 443)


def _one_of(value: Any, allowed: tuple[str, ...], field: str) -> list[Cause]:
    if value in allowed:
        return []
    listed = ", ".join(f'"{a}"' for a in allowed)
    return [Cause(field, "FieldValueNotSupported", f'Unsupported value: "{value}": supported values: {listed}')]


def _validate_client_config(cc: Any, where: str) -> list[Cause]:
    if not isinstance(cc, dict):
        return [Cause(where, "FieldValueRequired", "Required value")]
    url, service = cc.get("url"), cc.get("service")
    causes: list[Cause] = []
    if (url is None) == (service is None):
        causes.append(Cause(where, "FieldValueRequired", "Required value: exactly one of url or service is required"))
    if url is not None:
        parts = urlsplit(str(url))
        if parts.scheme != "https":
            causes.append(
                Cause(f"{where}.url", "FieldValueInvalid", "Invalid value: 'https' is the only allowed URL scheme")
            )
        if not parts.hostname:
            causes.append(Cause(f"{where}.url", "FieldValueInvalid", "Invalid value: host must be specified"))
        if parts.query or parts.fragment or parts.username:
            causes.append(
                Cause(
                    f"{where}.url", "FieldValueInvalid", "Invalid value: query, fragment and user info are not allowed"
                )
            )
    if isinstance(service, dict):
        for key in ("name", "namespace"):
            if not service.get(key):
                causes.append(Cause(f"{where}.service.{key}", "FieldValueRequired", "Required value"))
        port = service.get("port", 443)
        if not isinstance(port, int) or not 1 <= port <= 65535:
            causes.append(Cause(f"{where}.service.port", "FieldValueInvalid", "Invalid value: must be 1-65535"))
        path = service.get("path")
        if path is not None and not str(path).startswith("/"):
            causes.append(Cause(f"{where}.service.path", "FieldValueInvalid", "Invalid value: must start with a '/'"))
    elif service is not None:
        causes.append(Cause(f"{where}.service", "FieldValueInvalid", "Invalid value: must be an object"))
    if cc.get("caBundle") is not None:
        try:
            base64.b64decode(str(cc["caBundle"]), validate=True)
        except (binascii.Error, ValueError):
            causes.append(Cause(f"{where}.caBundle", "FieldValueInvalid", "Invalid value: must be base64"))
    return causes


def _validate_rules(rules: Any, where: str) -> list[Cause]:
    if not isinstance(rules, list):
        return [Cause(where, "FieldValueInvalid", "Invalid value: must be a list")] if rules is not None else []
    causes: list[Cause] = []
    for i, rule in enumerate(rules):
        rw = f"{where}[{i}]"
        if not isinstance(rule, dict):
            causes.append(Cause(rw, "FieldValueInvalid", "Invalid value: must be an object"))
            continue
        for key in ("operations", "apiGroups", "apiVersions", "resources"):
            values = rule.get(key)
            if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
                causes.append(Cause(f"{rw}.{key}", "FieldValueRequired", "Required value"))
        for op in rule.get("operations") or []:
            causes += _one_of(op, tuple(sorted(_OPERATIONS)), f"{rw}.operations")
        causes += _one_of(rule.get("scope", "*"), ("*", "Cluster", "Namespaced"), f"{rw}.scope")
    return causes


def _validate_conditions(conditions: Any, where: str) -> list[Cause]:
    if conditions is None:
        return []
    if not isinstance(conditions, list) or len(conditions) > 64:
        return [Cause(where, "FieldValueInvalid", "Invalid value: must be a list of at most 64 conditions")]
    causes: list[Cause] = []
    seen: set[str] = set()
    for i, cond in enumerate(conditions):
        cw = f"{where}[{i}]"
        name = cond.get("name") if isinstance(cond, dict) else None
        if not isinstance(name, str) or not name:
            causes.append(Cause(f"{cw}.name", "FieldValueRequired", "Required value"))
        else:
            causes += validate_label_key(name, f"{cw}.name")
            if name in seen:
                causes.append(Cause(f"{cw}.name", "FieldValueDuplicate", f'Duplicate value: "{name}"'))
            seen.add(name)
        expression = cond.get("expression") if isinstance(cond, dict) else None
        try:
            compile_expression(str(expression or ""))
        except CelError as exc:
            causes.append(Cause(f"{cw}.expression", "FieldValueInvalid", f"Invalid value: compilation failed: {exc}"))
    return causes


def _validate_webhook(hook: Any, where: str) -> list[Cause]:
    if not isinstance(hook, dict):
        return [Cause(where, "FieldValueInvalid", "Invalid value: must be an object")]
    causes: list[Cause] = []
    name = hook.get("name")
    if not isinstance(name, str) or not name:
        causes.append(Cause(f"{where}.name", "FieldValueRequired", "Required value"))
    elif name.count(".") < 2:
        causes.append(
            Cause(
                f"{where}.name",
                "FieldValueInvalid",
                f'Invalid value: "{name}": should be a domain with at least three segments separated by dots',
            )
        )
    else:
        causes += validate_dns_subdomain(name, f"{where}.name")
    versions = hook.get("admissionReviewVersions")
    if not isinstance(versions, list) or not versions:
        causes.append(
            Cause(
                f"{where}.admissionReviewVersions",
                "FieldValueRequired",
                "Required value: must specify one of v1, v1beta1",
            )
        )
    elif not any(v in REVIEW_VERSIONS for v in versions):
        causes.append(
            Cause(
                f"{where}.admissionReviewVersions",
                "FieldValueInvalid",
                "Invalid value: must include at least one of v1, v1beta1",
            )
        )
    causes += _one_of(hook.get("sideEffects"), ("None", "NoneOnDryRun"), f"{where}.sideEffects")
    causes += _one_of(hook.get("failurePolicy", "Fail"), ("Fail", "Ignore"), f"{where}.failurePolicy")
    causes += _one_of(hook.get("matchPolicy", "Equivalent"), ("Equivalent", "Exact"), f"{where}.matchPolicy")
    causes += _one_of(hook.get("reinvocationPolicy", "Never"), ("IfNeeded", "Never"), f"{where}.reinvocationPolicy")
    timeout = hook.get("timeoutSeconds", 10)
    if not isinstance(timeout, int) or isinstance(timeout, bool) or not 1 <= timeout <= 30:
        causes.append(
            Cause(
                f"{where}.timeoutSeconds",
                "FieldValueInvalid",
                f"Invalid value: {timeout}: the timeout value must be between 1 and 30 seconds",
            )
        )
    causes += _validate_client_config(hook.get("clientConfig"), f"{where}.clientConfig")
    causes += _validate_rules(hook.get("rules"), f"{where}.rules")
    for key in ("namespaceSelector", "objectSelector"):
        try:
            LabelSelector.from_api(hook.get(key))
        except (SelectorError, TypeError, ValueError, AttributeError) as exc:
            causes.append(Cause(f"{where}.{key}", "FieldValueInvalid", f"Invalid value: {exc}"))
    causes += _validate_conditions(hook.get("matchConditions"), f"{where}.matchConditions")
    return causes


def validate_configuration(obj: Obj) -> list[Cause]:
    """What kube-apiserver would refuse in a MutatingWebhookConfiguration (v1)."""
    hooks = obj.get("webhooks")
    if hooks is None:
        return []
    if not isinstance(hooks, list):
        return [Cause("webhooks", "FieldValueInvalid", "Invalid value: must be a list")]
    causes: list[Cause] = []
    names: set[str] = set()
    for i, hook in enumerate(hooks):
        causes += _validate_webhook(hook, f"webhooks[{i}]")
        name = hook.get("name") if isinstance(hook, dict) else None
        if isinstance(name, str) and name in names:
            causes.append(Cause(f"webhooks[{i}].name", "FieldValueDuplicate", f'Duplicate value: "{name}"'))
        names.add(str(name))
    return causes


def ordered_webhooks(configurations: list[Obj]) -> list[Webhook]:
    """The webhooks in the order kube-apiserver calls them: configurations sorted by name, each
    configuration's webhooks in their listed order."""
    out: list[Webhook] = []
    for config in sorted(configurations, key=lambda c: str(c["metadata"]["name"])):
        seen: dict[str, int] = {}
        for hook in config.get("webhooks") or []:
            name = str(hook["name"])
            n = seen.get(name, 0)
            seen[name] = n + 1
            versions = hook.get("admissionReviewVersions") or []
            out.append(
                Webhook(
                    uid=f"{config['metadata']['name']}/{name}/{n}",
                    configuration=str(config["metadata"]["name"]),
                    name=name,
                    client_config=hook.get("clientConfig") or {},
                    rules=tuple(hook.get("rules") or ()),
                    failure_policy=str(hook.get("failurePolicy", "Fail")),
                    namespace_selector=LabelSelector.from_api(hook.get("namespaceSelector")),
                    object_selector=LabelSelector.from_api(hook.get("objectSelector")),
                    side_effects=str(hook.get("sideEffects", "")),
                    timeout_seconds=int(hook.get("timeoutSeconds", 10)),
                    review_version=next((v for v in versions if v in REVIEW_VERSIONS), "v1"),
                    reinvocation=str(hook.get("reinvocationPolicy", "Never")),
                    conditions=tuple(
                        (str(c["name"]), compile_expression(str(c["expression"])))
                        for c in hook.get("matchConditions") or ()
                    ),
                )
            )
    return out
