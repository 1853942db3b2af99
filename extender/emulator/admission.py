"""The mutating admission chain, run on CREATE as kube-apiserver runs it.

For an object being created (already defaulted, not yet named from ``generateName``, before
validation and storage) every webhook of the stored MutatingWebhookConfigurations is considered in
order — configurations sorted by name, then their webhooks in listed order — and called when

* a rule matches: operation ``CREATE`` (or ``*``), the group, version and resource (``*`` wildcards,
  ``*/*`` subresources), the scope;
* its ``namespaceSelector`` matches the labels of the object's namespace (of the object itself
  for a Namespace; always for other cluster-scoped objects), and its ``objectSelector`` the
  object's labels;
* none of its ``matchConditions`` is false. When none is false but one fails to evaluate,
  ``failurePolicy: Fail`` rejects the request and ``Ignore`` skips the webhook.

A call is ``POST <url or service>/<path>?timeout=<N>s`` with an ``AdmissionReview`` (the first of the
webhook's ``admissionReviewVersions`` the emulator speaks), over TLS verified against
``caBundle`` (the system roots without one), within ``timeoutSeconds``. A service reference has no
cluster DNS here: it is resolved through :class:`ServiceMap` (``namespace/name:port`` → a local
``host:port``) and the certificate is still checked for ``<name>.<namespace>.svc``, the name
kube-apiserver dials. An unreachable, slow, non-200 or malformed answer is a *calling* error:
``failurePolicy: Ignore`` goes on without the webhook, ``Fail`` answers 500
``failed calling webhook``. ``allowed: false`` rejects with the webhook's status (a code below 400
becomes 400; the message is prefixed ``admission webhook "<name>" denied the request``). A returned
``JSONPatch`` is applied; an unappliable patch answers 500. Warnings are passed to the client.

Reinvocation: when a webhook changes the object, the ``reinvocationPolicy: IfNeeded`` webhooks
called before it are called once more after the first pass (never a webhook for the first time).
``dryRun`` requests are sent with ``dryRun: true``; a webhook whose ``sideEffects`` is not
``None``/``NoneOnDryRun`` refuses them (400). Webhook configurations themselves are never admitted.
"""

from __future__ import annotations

import base64
import binascii
import ssl
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import orjson

from extender.emulator import errors
from extender.emulator.cel import CelError
from extender.emulator.errors import ApiError
from extender.emulator.meta import deep_copy
from extender.emulator.patch import PatchError, apply_json_patch
from extender.emulator.resources import ResourceType
from extender.emulator.webhookconfig import Webhook

__all__ = ["AdmissionChain", "AdmissionResult", "CallRecord", "ServiceMap", "create_review", "pod_create_review"]

Obj = dict[str, Any]
ADMIN_USER: Obj = {"username": "system:admin", "groups": ["system:masters", "system:authenticated"]}
"""The user the emulator's token authenticates (every request is this user)."""


class ServiceMap:
    """Where a webhook's ``clientConfig.service`` is served: ``namespace/name:port`` → ``host:port``.

    Thread-safe; fed by :meth:`Emulator.map_service` or ``sky-scheduler emulator --service``.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._map: dict[tuple[str, str, int], str] = {}

    def set(self, namespace: str, name: str, port: int, address: str) -> None:
        with self._lock:
            self._map[(namespace, name, int(port))] = address

    def remove(self, namespace: str, name: str, port: int) -> None:
        with self._lock:
            self._map.pop((namespace, name, int(port)), None)

    def get(self, namespace: str, name: str, port: int) -> str | None:
        with self._lock:
            return self._map.get((namespace, name, int(port)))


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One webhook call: for tests and for the sandbox to tell what admission did."""

    webhook: str
    url: str
    outcome: str  # "patched", "unchanged", "denied", "failed-open", "failed-closed"
    detail: str = ""


@dataclass(slots=True)
class AdmissionResult:
    obj: Obj
    warnings: list[str] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)


@dataclass(slots=True)
class _Reinvocation:
    """kube-apiserver's reinvocation context: IfNeeded webhooks called since the last change, and
    those to call again because a later webhook changed the object."""

    reinvocable: set[str] = field(default_factory=set)
    to_reinvoke: set[str] = field(default_factory=set)
    changed: bool = False


class _CallingError(Exception):
    """kube-apiserver's ErrCallingWebhook: subject to the failure policy."""


@dataclass(frozen=True, slots=True)
class Request:
    """What one admission is about."""

    rt: ResourceType
    namespace: str | None
    dry_run: bool
    user: Mapping[str, Any]
    options: Mapping[str, Any]


def _rule_matches(rule: Mapping[str, Any], rt: ResourceType, operation: str) -> bool:
    def has(key: str, value: str) -> bool:
        values = rule.get(key) or []
        return "*" in values or value in values

    resources = rule.get("resources") or []
    scope = rule.get("scope", "*")
    return (
        has("operations", operation)
        and has("apiGroups", rt.group)
        and has("apiVersions", rt.version)
        and any(r in ("*", "*/*", rt.plural) for r in resources)
        and (scope == "*" or (scope == "Namespaced") == rt.namespaced)
    )


class AdmissionChain:
    """Runs the mutating webhooks of a store on CREATE (see the module docstring)."""

    def __init__(self, configurations: Any, namespace_labels: Any, services: ServiceMap) -> None:
        """``configurations()``: the parsed webhooks in call order; ``namespace_labels(ns)``: the
        labels of a namespace (None when it does not exist)."""
        self._webhooks = configurations
        self._namespace_labels = namespace_labels
        self.services = services
        self.calls: list[CallRecord] = []
        """Every call made, oldest first (bounded)."""

    def _selected(self, hook: Webhook, req: Request, obj: Obj) -> bool:
        if req.rt.group == "admissionregistration.k8s.io":
            return False
        if not any(_rule_matches(r, req.rt, "CREATE") for r in hook.rules):
            return False
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if req.rt.key == "namespaces":
            ns_labels = labels
        elif req.rt.namespaced:
            ns_labels = self._namespace_labels(req.namespace) or {}
        else:
            ns_labels = None
        if ns_labels is not None and not hook.namespace_selector.matches(ns_labels):
            return False
        return hook.object_selector.matches(labels)

    def _conditions_pass(self, hook: Webhook, variables: Mapping[str, Any]) -> bool:
        """False when a condition is false; raise when none is false but one could not be evaluated."""
        failure: str | None = None
        for name, program in hook.conditions:
            try:
                if not program.evaluate(variables):
                    return False
            except CelError as exc:
                failure = failure or f"matchCondition {name!r}: {exc}"
        if failure is not None:
            raise _CallingError(f"failed to evaluate match conditions: {failure}")
        return True

    async def admit_create(self, req: Request, obj: Obj) -> AdmissionResult:
        """The object after every matching webhook (raises :class:`ApiError` on a rejection)."""
        result = AdmissionResult(deep_copy(obj))
        hooks: list[Webhook] = list(self._webhooks())
        if not hooks:
            return result
        state = _Reinvocation()
        await self._pass(hooks, req, result, state, only=None)
        if state.changed and state.to_reinvoke:
            await self._pass(hooks, req, result, state, only=frozenset(state.to_reinvoke))
        return result

    async def _pass(
        self,
        hooks: list[Webhook],
        req: Request,
        result: AdmissionResult,
        state: _Reinvocation,
        only: frozenset[str] | None,
    ) -> None:
        """One pass over the webhooks (the reinvocation pass calls only ``only``)."""
        for hook in hooks:
            if only is not None and hook.uid not in only:
                continue
            changed = await self._consider(hook, req, result)
            if changed is None:
                continue
            if changed:
                state.changed = True
                state.to_reinvoke |= state.reinvocable  # those called before this change
                state.reinvocable = set()
            if hook.reinvocation == "IfNeeded":
                state.reinvocable.add(hook.uid)

    async def _consider(self, hook: Webhook, req: Request, result: AdmissionResult) -> bool | None:
        """Call ``hook`` if it applies: None when skipped, else whether it changed the object."""
        obj = result.obj
        if not self._selected(hook, req, obj):
            return None
        review = _review(hook, req, obj)
        url = ""
        try:
            if not self._conditions_pass(hook, {"object": obj, "oldObject": None, "request": review["request"]}):
                return None
            if req.dry_run and hook.side_effects not in ("None", "NoneOnDryRun"):
                raise errors.bad_request(f'admission webhook "{hook.name}" does not support dry run')
            url, server_name = self._url(hook)
            answer = await _post(hook, url, server_name, review)
            response = _verify(hook, review, answer)
        except _CallingError as exc:
            message = f'failed calling webhook "{hook.name}": {exc}'
            if hook.ignore_failures:
                self._record(result, CallRecord(hook.name, url, "failed-open", message))
                return False
            self._record(result, CallRecord(hook.name, url, "failed-closed", message))
            raise errors.internal_error(message) from None
        result.warnings.extend(str(w) for w in response.get("warnings") or [])
        if not response.get("allowed", False):
            self._record(result, CallRecord(hook.name, url, "denied"))
            raise _denied(hook.name, response.get("status"))
        patched = _apply(hook, obj, response)
        changed = patched != obj
        result.obj = patched
        self._record(result, CallRecord(hook.name, url, "patched" if changed else "unchanged"))
        return changed

    def _record(self, result: AdmissionResult, call: CallRecord) -> None:
        result.calls.append(call)
        self.calls.append(call)
        del self.calls[:-1000]

    def _url(self, hook: Webhook) -> tuple[str, str]:
        """The URL to POST (with ``?timeout=``) and the TLS server name to verify."""
        cc = hook.client_config
        query = f"timeout={hook.timeout_seconds}s"
        if cc.get("url"):
            parts = urlsplit(str(cc["url"]))
            return urlunsplit((parts.scheme, parts.netloc, parts.path, query, "")), parts.hostname or ""
        svc = cc.get("service") or {}
        ns, name, port = str(svc.get("namespace")), str(svc.get("name")), int(svc.get("port", 443))
        dns = f"{name}.{ns}.svc"
        address = self.services.get(ns, name, port)
        if address is None:
            raise _CallingError(
                f'failed to call webhook: Post "https://{dns}:{port}{svc.get("path") or ""}?{query}": '
                f'service "{ns}/{name}:{port}" is not mapped to an address (Emulator.map_service / --service)'
            )
        return f"https://{address}{svc.get('path') or ''}?{query}", dns


def create_review(
    obj: Obj,
    *,
    kind: Mapping[str, str],
    resource: Mapping[str, str],
    namespace: str | None,
    user: Mapping[str, Any],
    dry_run: bool = False,
    options: Mapping[str, Any] | None = None,
    version: str = "v1",
) -> Obj:
    """The AdmissionReview kube-apiserver sends a mutating webhook for the CREATE of ``obj``
    (``kind``: group/version/kind, ``resource``: group/version/resource; ``version``: the review's)."""
    request: Obj = {
        "uid": str(uuid.uuid4()),
        "kind": dict(kind),
        "resource": dict(resource),
        "requestKind": dict(kind),
        "requestResource": dict(resource),
        "name": (obj.get("metadata") or {}).get("name") or "",
        "operation": "CREATE",
        "userInfo": dict(user),
        "object": obj,
        "oldObject": None,
        "dryRun": dry_run,
        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1", **(options or {})},
    }
    if namespace:
        request["namespace"] = namespace
    return {"apiVersion": f"admission.k8s.io/{version}", "kind": "AdmissionReview", "request": request}


def pod_create_review(pod: Obj, *, namespace: str, user: Mapping[str, Any], dry_run: bool = False) -> Obj:
    """:func:`create_review` of a core/v1 Pod."""
    return create_review(
        pod,
        kind={"group": "", "version": "v1", "kind": "Pod"},
        resource={"group": "", "version": "v1", "resource": "pods"},
        namespace=namespace,
        user=user,
        dry_run=dry_run,
    )


def _review(hook: Webhook, req: Request, obj: Obj) -> Obj:
    rt = req.rt
    return create_review(
        obj,
        kind={"group": rt.group, "version": rt.version, "kind": rt.kind},
        resource={"group": rt.group, "version": rt.version, "resource": rt.plural},
        namespace=req.namespace,
        user=req.user,
        dry_run=req.dry_run,
        options=req.options,
        version=hook.review_version,
    )


def _ssl_context(hook: Webhook) -> ssl.SSLContext:
    bundle = hook.client_config.get("caBundle")
    if not bundle:
        return ssl.create_default_context()
    try:
        pem = base64.b64decode(str(bundle)).decode()
        return ssl.create_default_context(cadata=pem)
    except (binascii.Error, UnicodeDecodeError, ssl.SSLError, ValueError) as exc:
        raise _CallingError(f"failed to call webhook: the caBundle is not usable: {exc}") from None


async def _post(hook: Webhook, url: str, server_name: str, review: Obj) -> Any:
    context = _ssl_context(hook)
    timeout = aiohttp.ClientTimeout(total=hook.timeout_seconds)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.post(
                url,
                data=orjson.dumps(review),
                headers={"Content-Type": "application/json", "Accept": "application/json"},
                ssl=context,
                server_hostname=server_name or None,
            ) as response,
        ):
            raw = await response.read()
            status = response.status
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        raise _CallingError(f'failed to call webhook: Post "{url}": {type(exc).__name__}: {exc}') from None
    if status != 200:
        raise _CallingError(f"failed to call webhook: the server responded with status {status}: {raw[:200]!r}")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise _CallingError(f"received an answer that is not JSON: {exc}") from None


def _verify(hook: Webhook, review: Obj, answer: Any) -> Obj:
    """kube-apiserver's VerifyAdmissionResponse (a failure is a calling error)."""
    want = f"admission.k8s.io/{hook.review_version}"
    if not isinstance(answer, dict):
        raise _CallingError("the webhook answer is not a JSON object")
    response = answer.get("response")
    if not isinstance(response, dict):
        raise _CallingError("webhook response was absent")
    if hook.review_version == "v1":
        if answer.get("apiVersion") != want or answer.get("kind") != "AdmissionReview":
            raise _CallingError(
                f"expected webhook response of {want}, Kind=AdmissionReview, "
                f"got {answer.get('apiVersion')}, Kind={answer.get('kind')}"
            )
        if response.get("uid") != review["request"]["uid"]:
            raise _CallingError(f"expected response.uid={review['request']['uid']!r}, got {response.get('uid')!r}")
        if bool(response.get("patch")) != bool(response.get("patchType")):
            raise _CallingError("webhook returned a patch without a patchType or a patchType without a patch")
    if response.get("patch") and response.get("patchType", "JSONPatch") != "JSONPatch":
        raise _CallingError(f"webhook returned an unsupported patchType {response.get('patchType')!r}")
    return response


def _denied(name: str, status: Any) -> ApiError:
    status = dict(status) if isinstance(status, dict) else {}
    raw = status.get("code")
    code = max(raw if isinstance(raw, int) and not isinstance(raw, bool) else 0, 400)
    denied = f'admission webhook "{name}" denied the request'
    if status.get("message"):
        message = f"{denied}: {status['message']}"
    elif status.get("reason"):
        message = f"{denied}: {status['reason']}"
    else:
        message = f"{denied} without explanation"
    return ApiError(code, str(status.get("reason") or ""), message, status.get("details"))


def _apply(hook: Webhook, obj: Obj, response: Obj) -> Obj:
    if not response.get("patch"):
        return obj
    try:
        ops = orjson.loads(base64.b64decode(str(response["patch"])))
        patched = apply_json_patch(obj, ops)
    except (binascii.Error, ValueError, orjson.JSONDecodeError, PatchError) as exc:
        raise errors.internal_error(
            f'admission webhook "{hook.name}" returned a patch that cannot be applied: {exc}'
        ) from None
    if (
        not isinstance(patched, dict)
        or patched.get("apiVersion") != obj.get("apiVersion")
        or patched.get("kind") != obj.get("kind")
        or not isinstance(patched.get("metadata"), dict)
    ):
        raise errors.internal_error(f'admission webhook "{hook.name}" changed the kind of the object or its metadata')
    return patched
