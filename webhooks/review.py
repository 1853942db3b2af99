"""``AdmissionReview`` (``admission.k8s.io/v1``): parsing a request and building the reply (pure).

The reply rules the apiserver enforces (``VerifyAdmissionResponse``): the same apiVersion and
kind as the request, ``response.uid`` equal to ``request.uid``, and ``patch`` (base64 of a JSON
Patch) together with ``patchType: JSONPatch`` — or neither. :func:`build_response` follows them.

Bad input never raises past this module as anything but :class:`ReviewError`, which carries the
request uid when one could be read: the app then answers an ``allowed: true`` review with a
``status`` message (the pod is not held up by a webhook that cannot read it), or HTTP 400 when
there is no uid to echo.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from extender import shape

__all__ = [
    "API_VERSION",
    "KIND",
    "AdmissionRequest",
    "GroupVersionKind",
    "ReviewError",
    "build_response",
    "error_status",
    "parse_review",
]

API_VERSION: Final = "admission.k8s.io/v1"
KIND: Final = "AdmissionReview"
_ACCEPTED_VERSIONS: Final = frozenset({API_VERSION, "admission.k8s.io/v1beta1"})
MAX_WARNING: Final = 256  # "warnings over 256 characters … may be truncated" (AdmissionResponse docs)


class ReviewError(ValueError):
    """The request cannot be reviewed; ``uid`` is set when the reply can still echo it."""

    def __init__(self, message: str, uid: str | None = None, api_version: str = API_VERSION) -> None:
        super().__init__(message)
        self.message = message
        self.uid = uid
        self.api_version = api_version


@dataclass(frozen=True, slots=True)
class GroupVersionKind:
    group: str
    version: str
    kind: str


@dataclass(frozen=True, slots=True)
class AdmissionRequest:
    uid: str
    api_version: str  # of the review (the reply must carry the same)
    kind: GroupVersionKind
    resource: str  # e.g. "pods"
    sub_resource: str
    operation: str  # CREATE / UPDATE / DELETE / CONNECT
    namespace: str
    name: str  # "" for objects created with generateName
    dry_run: bool
    object: Mapping[str, Any] | None

    @property
    def is_pod_create(self) -> bool:
        """A pod being created (not a subresource such as ``pods/binding`` or ``pods/ephemeralcontainers``)."""
        return (
            self.operation == "CREATE"
            and self.kind.group == ""
            and self.kind.kind == "Pod"
            and self.resource == "pods"
            and not self.sub_resource
        )


_GVK: Final = shape.Obj({"group": shape.STR, "version": shape.STR, "kind": shape.STR})
_GVR: Final = shape.Obj({"group": shape.STR, "version": shape.STR, "resource": shape.STR})
_REQUEST: Final = shape.Obj(
    {
        "uid": shape.STR,
        "kind": _GVK,
        "resource": _GVR,
        "subResource": shape.STR,
        "operation": shape.STR,
        "namespace": shape.STR,
        "name": shape.STR,
        "dryRun": shape.BOOL,
    }
)


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _envelope(doc: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The checked ``request`` object and its uid; raises :class:`ReviewError` (HTTP 400 when no uid
    can be echoed, or when ``apiVersion`` / ``kind`` are not strings: no review can answer those)."""
    request = doc.get("request")
    uid: str | None = None
    if isinstance(request, dict):
        raw_uid = request.get("uid")
        uid = raw_uid if isinstance(raw_uid, str) and raw_uid else None
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    for field, value in (("apiVersion", api_version), ("kind", kind)):
        if not isinstance(value, str):
            got = "missing" if value is None else f"a {type(value).__name__}, not a string"
            raise ReviewError(f"{field} is {got}: expected {field} {API_VERSION if field == 'apiVersion' else KIND}")
    reply_version = api_version if api_version in _ACCEPTED_VERSIONS else API_VERSION
    if api_version != API_VERSION:
        raise ReviewError(f"apiVersion must be {API_VERSION}, got {api_version!r}", uid, reply_version)
    if kind != KIND:
        raise ReviewError(f"kind must be {KIND}, got {kind!r}", uid)
    if not isinstance(request, dict):
        raise ReviewError(f"the {KIND} has no request object")
    if uid is None:
        raise ReviewError("request.uid is missing or not a non-empty string")
    problem = shape.check(request, _REQUEST, "request")
    if problem:
        raise ReviewError(problem, uid)
    return request, uid


def parse_review(body: bytes) -> AdmissionRequest:
    """Parse a raw request body; raise :class:`ReviewError` naming what is wrong.

    The envelope's fields must have their types (``request.namespace`` a string, ``dryRun`` a
    boolean, …); for a pod CREATE the object must be a Pod (``kind``, when present, ``Pod``; a
    ``metadata`` object) whose every field a reader looks at has its type (:data:`extender.shape.POD`).
    """
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ReviewError(f"the request body is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ReviewError(f"the request body must be a JSON object (an {KIND}), not {type(doc).__name__}")
    request, uid = _envelope(doc)
    kind = request.get("kind")
    resource = request.get("resource")
    if not isinstance(kind, dict) or not isinstance(resource, dict):
        raise ReviewError("request.kind and request.resource must be objects", uid)
    operation = _str(request.get("operation"))
    if not operation:
        raise ReviewError("request.operation is missing", uid)
    obj = request.get("object")
    req = AdmissionRequest(
        uid=uid,
        api_version=API_VERSION,
        kind=GroupVersionKind(_str(kind.get("group")), _str(kind.get("version")), _str(kind.get("kind"))),
        resource=_str(resource.get("resource")),
        sub_resource=_str(request.get("subResource")),
        operation=operation,
        namespace=_str(request.get("namespace")),
        name=_str(request.get("name")),
        dry_run=request.get("dryRun") is True,
        object=obj if isinstance(obj, dict) else None,
    )
    if req.is_pod_create:
        _check_pod(obj, uid)
    return req


def _check_pod(obj: object, uid: str) -> None:
    if obj is None:
        raise ReviewError("request.object is missing: a pod CREATE must carry the pod", uid)
    if not isinstance(obj, dict):
        raise ReviewError(f"request.object must be a Pod object, not {type(obj).__name__}", uid)
    obj_kind = obj.get("kind")
    if obj_kind is not None and obj_kind != "Pod":
        raise ReviewError(f"request.object is a {obj_kind!r}, not a Pod", uid)
    if not isinstance(obj.get("metadata"), dict):
        raise ReviewError("request.object has no metadata object", uid)
    problem = shape.check(obj, shape.POD, "request.object")
    if problem:
        raise ReviewError(problem, uid)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def build_response(
    uid: str,
    *,
    ops: Sequence[Mapping[str, Any]] = (),
    warnings: Sequence[str] = (),
    audit_annotations: Mapping[str, str] | None = None,
    status: Mapping[str, Any] | None = None,
    api_version: str = API_VERSION,
) -> dict[str, Any]:
    """An allowing review. ``patch``/``patchType`` appear only when ``ops`` is not empty."""
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    if ops:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(orjson.dumps(list(ops))).decode("ascii")
    if status:
        response["status"] = dict(status)
    if audit_annotations:
        response["auditAnnotations"] = dict(audit_annotations)
    if warnings:
        response["warnings"] = [_clip(w, MAX_WARNING) for w in warnings]
    return {"apiVersion": api_version, "kind": KIND, "response": response}


def error_status(message: str, code: int = 400, reason: str = "BadRequest") -> dict[str, Any]:
    """A ``metav1.Status`` describing a failure (the body of an HTTP error, or ``response.status``)."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
