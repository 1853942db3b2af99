"""The extender protocol's wire format: request bodies parsed and checked, reply bodies built.

Exactly as ``k8s.io/kube-scheduler/extender/v1`` marshals it: PascalCase keys, nulls present,
request keys matched case-insensitively as Go's decoder does, requests with ``NodeNames``
(``nodeCacheCapable: true``) and with full ``Nodes`` both accepted and answered in the form
received. Pure functions of bytes and plain data: the verbs (:mod:`extender.api.extender`) decide,
this module only reads and writes their bodies. A malformed request raises :class:`BadRequest`,
whose text the verb answers in its reply's ``Error``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from extender import shape
from extender.actions import bind as bind_action
from extender.actions.outcome import FilterOutcome

__all__ = [
    "BINDING_FIELDS",
    "BadRequest",
    "binding_args",
    "candidates",
    "error_reply",
    "extender_args",
    "field",
    "filter_reply",
    "meta_victims",
    "parse",
    "pod_of",
    "proposed_victims",
    "victims_of",
]


def field(d: Mapping[str, Any], name: str) -> Any:
    """Go's encoding/json matches keys case-insensitively; so do we."""
    if name in d:
        return d[name]
    low = name.lower()
    for k, v in d.items():
        if isinstance(k, str) and k.lower() == low:
            return v
    return None


class BadRequest(ValueError):
    """A malformed request body; the text says what is wrong with it."""


BINDING_FIELDS = ("PodName", "PodNamespace", "PodUID", "Node")
"""The fields of an ``ExtenderBindingArgs``, every one a required non-empty string."""


def parse(body: bytes) -> dict[str, Any]:
    """The request's JSON object."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"malformed request body: not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise BadRequest("malformed request body: expected a JSON object")
    return doc


def binding_args(body: bytes) -> tuple[str, str, str, str]:
    """An ``ExtenderBindingArgs`` body: ``(PodName, PodNamespace, PodUID, Node)``."""
    args = parse(body)
    fields = [field(args, k) for k in BINDING_FIELDS]
    if not all(isinstance(f, str) and f for f in fields):
        raise BadRequest("malformed binding request: PodName, PodNamespace, PodUID and Node are required")
    name, ns, uid, node = fields
    return name, ns, uid, node


def candidates(args: Mapping[str, Any]) -> tuple[list[str], dict[str, Any] | None]:
    """(candidate names, the NodeList when the request carried full Nodes)."""
    names = field(args, "NodeNames")
    nodes = field(args, "Nodes")
    if names is not None:
        if not isinstance(names, list):
            raise BadRequest("NodeNames must be a list of strings")
        try:
            # the element check in C: str.join refuses anything but strings (a Python-level
            # all(…) over 5,000 names was once the filter path's largest cost)
            "".join(names)
        except TypeError:
            raise BadRequest("NodeNames must be a list of strings") from None
        return names, None
    if nodes is not None:
        if not isinstance(nodes, dict) or not isinstance(nodes.get("items") or [], list):
            raise BadRequest("Nodes must be a NodeList")
        out = []
        for item in nodes.get("items") or []:
            name = ((item or {}).get("metadata") or {}).get("name") if isinstance(item, dict) else None
            if not isinstance(name, str):
                raise BadRequest("Nodes.items[] without metadata.name")
            out.append(name)
        return out, nodes
    return [], None


def pod_of(args: Mapping[str, Any]) -> dict[str, Any]:
    """The request's Pod, every field the verbs and the cache's conversion read of the right type."""
    pod = field(args, "Pod")
    if not isinstance(pod, dict) or not isinstance(pod.get("metadata"), dict):
        raise BadRequest("the request has no Pod")
    problem = shape.check(pod, shape.POD, "Pod")
    if problem:
        raise BadRequest(f"malformed Pod: {problem}")
    return pod


def victims_of(args: Mapping[str, Any]) -> tuple[Mapping[str, Any], bool]:
    """``(node → victims, whether they are MetaVictims)`` of an ``ExtenderPreemptionArgs``: each
    entry an object whose ``Pods`` is a list of objects and ``NumPDBViolations`` an integer."""
    meta = field(args, "NodeNameToMetaVictims")
    full = field(args, "NodeNameToVictims")
    for name, value in (("NodeNameToMetaVictims", meta), ("NodeNameToVictims", full)):
        if value is not None and not isinstance(value, dict):
            raise BadRequest(f"{name} must be an object of node name to victims")
    source, is_meta = (meta, True) if isinstance(meta, dict) else (full or {}, False)
    for node, victims in source.items():
        where = f"{'NodeNameToMetaVictims' if is_meta else 'NodeNameToVictims'}[{node!r}]"
        if victims is None:
            continue
        if not isinstance(victims, dict):
            raise BadRequest(f"{where} must be an object with Pods and NumPDBViolations")
        pods, pdb = field(victims, "Pods"), field(victims, "NumPDBViolations")
        if pods is not None and not (isinstance(pods, list) and all(isinstance(p, dict) for p in pods)):
            raise BadRequest(f"{where}.Pods must be a list of objects")
        if pdb is not None and (not isinstance(pdb, int) or isinstance(pdb, bool)):
            raise BadRequest(f"{where}.NumPDBViolations must be an integer")
        for p in pods or ():
            problem = None if is_meta else shape.check(p, shape.POD, f"{where}.Pods[]")
            if problem:
                raise BadRequest(problem)
    return source, is_meta


def extender_args(body: bytes) -> tuple[dict[str, Any], list[str], dict[str, Any] | None]:
    """An ``ExtenderArgs`` body (filter, prioritize): (Pod, candidate names, NodeList or None)."""
    args = parse(body)
    pod = pod_of(args)
    names, node_list = candidates(args)
    return pod, names, node_list


def proposed_victims(source: Mapping[str, Any], is_meta: bool) -> tuple[dict[str, list[str]], dict[str, int]]:
    """``(node → victim UIDs, node → NumPDBViolations)`` of :func:`victims_of`'s checked victims
    (a pod without a UID is left out)."""
    proposed: dict[str, list[str]] = {}
    pdb: dict[str, int] = {}
    for node, victims in source.items():
        pods = field(victims or {}, "Pods") or []
        uids = []
        for p in pods:
            if not isinstance(p, dict):
                continue
            uid = field(p, "UID") if is_meta else ((p.get("metadata") or {}).get("uid"))
            if isinstance(uid, str) and uid:
                uids.append(uid)
        proposed[node] = uids
        pdb[node] = int(field(victims or {}, "NumPDBViolations") or 0)
    return proposed, pdb


def _unresolvable(outcome: FilterOutcome, rest: bind_action.Rest | None, names: list[str]) -> dict[str, str]:
    """``FailedAndUnresolvableNodes``: every candidate but ``rest.skip`` with ``rest.message``,
    then the outcome's own entries (which win, as the later key of a Go map literal would)."""
    if rest is None:
        return outcome.unresolvable
    out = dict.fromkeys(names, rest.message)
    if rest.skip:
        out.pop(rest.skip, None)
    out.update(outcome.unresolvable)
    return out


def filter_reply(
    outcome: FilterOutcome,
    rest: bind_action.Rest | None,
    names: list[str],
    node_list: dict[str, Any] | None,
) -> bytes:
    """``ExtenderFilterResult`` in the form of the request (``NodeNames``, or the ``Nodes`` list
    with only the passing items), serialised by orjson from plain data.

    The failure maps are filled only when no candidate passes. kube-scheduler copies them into
    the cycle's diagnosis, which it reads only to explain a pod that fits no node (the
    ``FailedScheduling`` event) and to choose where preemption may help; when a node passes they
    are dropped unread (``docs/extender.md`` § "The lean reply" cites the source). A reply that
    lists 4,999 reasons nobody reads was a third of a filter's cost at 5,000 candidates."""
    if outcome.passed:
        failed: dict[str, str] = {}
        unresolvable: dict[str, str] = {}
    else:
        failed, unresolvable = outcome.failed, _unresolvable(outcome, rest, names)
    nodes: dict[str, Any] | None = None
    passed: list[str] | None = outcome.passed
    if node_list is not None:
        keep = set(outcome.passed)
        items = [i for i in node_list.get("items") or [] if (i.get("metadata") or {}).get("name") in keep]
        nodes, passed = {**node_list, "items": items}, None
    return orjson.dumps(
        {
            "Nodes": nodes,
            "NodeNames": passed,
            "FailedNodes": failed,
            "FailedAndUnresolvableNodes": unresolvable,
            "Error": "",
        }
    )


def error_reply(verb: str, message: str) -> Any:
    """The verb's own reply type carrying ``message`` (prioritize has no error field: its errors
    are ignored by kube-scheduler, so it answers an empty list)."""
    if verb == "filter":
        return {"Nodes": None, "NodeNames": None, "FailedNodes": {}, "FailedAndUnresolvableNodes": {}, "Error": message}
    if verb == "prioritize":
        return []
    if verb == "preempt":
        return {"NodeNameToMetaVictims": None, "Error": message}
    return {"Error": message}


def meta_victims(victims: Mapping[str, Sequence[str]], pdb: Mapping[str, int]) -> bytes:
    """``ExtenderPreemptionResult``: victims by UID per node — never a node without victims."""
    reply = {
        node: {"Pods": [{"UID": u} for u in uids], "NumPDBViolations": pdb.get(node, 0)}
        for node, uids in victims.items()
        if uids
    }
    return orjson.dumps({"NodeNameToMetaVictims": reply})
