"""The kube-scheduler extender protocol: ``POST /filter``, ``/prioritize``, ``/bind``, ``/preempt``.

Wire format exactly as ``k8s.io/kube-scheduler/extender/v1`` marshals it: PascalCase keys, nulls
present, prioritize answers a bare array, requests with ``NodeNames`` (``nodeCacheCapable:
true``) and with full ``Nodes`` are both accepted and answered in the form received. Keys of a
request are matched case-insensitively, as Go's decoder does.

"Does not fit" is HTTP 200 with reasons in ``FailedNodes`` / ``FailedAndUnresolvableNodes``,
never an error: an error aborts the attempt and skips preemption. Trouble the caller cannot fix
by waiting (a malformed body) is HTTP 200 with ``Error`` set, whose text kube-scheduler shows
in the pod's events. Nothing here waits on the API except ``/bind``, which performs the Binding.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response
from prometheus_client import Counter, Histogram
from starlette.types import Receive, Scope, Send

from extender import shape, wellknown
from extender.actions import bind as bind_action
from extender.actions import reclaim as reclaim_action
from extender.actions.outcome import INLINE, QUOTA, SPOT, FilterOutcome
from extender.cache.claims import ADMISSION_PREFIX, DEFAULT_CLAIM_TTL, ClaimEntry, NoRoom, record_claim
from extender.framework.session import Session
from extender.framework.status import Reason, Status
from extender.kube.errors import BindConflict, GiveUp, NotFound
from extender.model.task import ON_NODE, TaskInfo
from extender.servers import BodyTooLarge, ClientGone, receive_body
from extender.state import ServiceState

__all__ = ["ExtenderApp", "Verbs", "create_app"]

log = logging.getLogger(__name__)

_JSON = b"application/json"


def _json(obj: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(obj), status_code=status, media_type="application/json")


def _field(d: Mapping[str, Any], name: str) -> Any:
    """Go's encoding/json matches keys case-insensitively; so do we."""
    if name in d:
        return d[name]
    low = name.lower()
    for k, v in d.items():
        if isinstance(k, str) and k.lower() == low:
            return v
    return None


class _BadRequest(ValueError):
    pass


_BINDING_FIELDS = ("PodName", "PodNamespace", "PodUID", "Node")


def _parse(body: bytes) -> dict[str, Any]:
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise _BadRequest(f"malformed request body: not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise _BadRequest("malformed request body: expected a JSON object")
    return doc


def _candidates(args: Mapping[str, Any]) -> tuple[list[str], dict[str, Any] | None]:
    """(candidate names, the NodeList when the request carried full Nodes)."""
    names = _field(args, "NodeNames")
    nodes = _field(args, "Nodes")
    if names is not None:
        if not isinstance(names, list):
            raise _BadRequest("NodeNames must be a list of strings")
        try:
            # the element check in C: str.join refuses anything but strings (a Python-level
            # all(…) over 5,000 names was once the filter path's largest cost)
            "".join(names)
        except TypeError:
            raise _BadRequest("NodeNames must be a list of strings") from None
        return names, None
    if nodes is not None:
        if not isinstance(nodes, dict) or not isinstance(nodes.get("items") or [], list):
            raise _BadRequest("Nodes must be a NodeList")
        out = []
        for item in nodes.get("items") or []:
            name = ((item or {}).get("metadata") or {}).get("name") if isinstance(item, dict) else None
            if not isinstance(name, str):
                raise _BadRequest("Nodes.items[] without metadata.name")
            out.append(name)
        return out, nodes
    return [], None


def _pod(args: Mapping[str, Any]) -> dict[str, Any]:
    """The request's Pod, every field the verbs and the cache's conversion read of the right type."""
    pod = _field(args, "Pod")
    if not isinstance(pod, dict) or not isinstance(pod.get("metadata"), dict):
        raise _BadRequest("the request has no Pod")
    problem = shape.check(pod, shape.POD, "Pod")
    if problem:
        raise _BadRequest(f"malformed Pod: {problem}")
    return pod


def _victims(args: Mapping[str, Any]) -> tuple[Mapping[str, Any], bool]:
    """``(node → victims, whether they are MetaVictims)`` of an ``ExtenderPreemptionArgs``: each
    entry an object whose ``Pods`` is a list of objects and ``NumPDBViolations`` an integer."""
    meta = _field(args, "NodeNameToMetaVictims")
    full = _field(args, "NodeNameToVictims")
    for name, value in (("NodeNameToMetaVictims", meta), ("NodeNameToVictims", full)):
        if value is not None and not isinstance(value, dict):
            raise _BadRequest(f"{name} must be an object of node name to victims")
    source, is_meta = (meta, True) if isinstance(meta, dict) else (full or {}, False)
    for node, victims in source.items():
        where = f"{'NodeNameToMetaVictims' if is_meta else 'NodeNameToVictims'}[{node!r}]"
        if victims is None:
            continue
        if not isinstance(victims, dict):
            raise _BadRequest(f"{where} must be an object with Pods and NumPDBViolations")
        pods, pdb = _field(victims, "Pods"), _field(victims, "NumPDBViolations")
        if pods is not None and not (isinstance(pods, list) and all(isinstance(p, dict) for p in pods)):
            raise _BadRequest(f"{where}.Pods must be a list of objects")
        if pdb is not None and (not isinstance(pdb, int) or isinstance(pdb, bool)):
            raise _BadRequest(f"{where}.NumPDBViolations must be an integer")
        for p in pods or ():
            problem = None if is_meta else shape.check(p, shape.POD, f"{where}.Pods[]")
            if problem:
                raise _BadRequest(problem)
    return source, is_meta


def _extender_args(body: bytes) -> tuple[dict[str, Any], list[str], dict[str, Any] | None]:
    """An ``ExtenderArgs`` body (filter, prioritize): (Pod, candidate names, NodeList or None)."""
    args = _parse(body)
    pod = _pod(args)
    names, node_list = _candidates(args)
    return pod, names, node_list


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


def _filter_reply(
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


def _error_reply(verb: str, message: str) -> Any:
    """The verb's own reply type carrying ``message`` (prioritize has no error field: its errors
    are ignored by kube-scheduler, so it answers an empty list)."""
    if verb == "filter":
        return {"Nodes": None, "NodeNames": None, "FailedNodes": {}, "FailedAndUnresolvableNodes": {}, "Error": message}
    if verb == "prioritize":
        return []
    if verb == "preempt":
        return {"NodeNameToMetaVictims": None, "Error": message}
    return {"Error": message}


# path → verb, and the route's name and summary in the OpenAPI document
_ROUTES: dict[str, tuple[str, str, str]] = {
    "/filter": ("filter", "filter_", "Filter candidate nodes (ExtenderArgs → ExtenderFilterResult)"),
    "/prioritize": ("prioritize", "prioritize", "Score candidate nodes 0..10 (ExtenderArgs → HostPriorityList)"),
    "/bind": ("bind", "bind", "Bind the pod to the node (ExtenderBindingArgs → ExtenderBindingResult)"),
    "/preempt": (
        "preempt",
        "preempt",
        "Restrict preemption victims (ExtenderPreemptionArgs → ExtenderPreemptionResult)",
    ),
}
_VERB_OF_PATH = {path: verb for path, (verb, _, _) in _ROUTES.items()}

OFF_LOOP_BODY_BYTES = 1 << 20
"""Request bodies of this size or more (a filter of ~70,000 candidates) are answered on a worker
thread. Smaller ones are answered on the loop: a 15,000-candidate filter (200 KB) takes about a
millisecond, less than handing it to a thread and back would add to its latency."""
_READ_ONLY_VERBS = frozenset({"filter", "prioritize", "preempt"})


class Verbs:
    """The four verbs over one :class:`ServiceState`: the one implementation behind both ways in,
    the ASGI front of :class:`ExtenderApp` and the FastAPI routes.

    :meth:`answer` reads the body and answers ``(HTTP status, JSON bytes)``: 413 for a body above
    ``max_body_bytes``, else 200 — a bug in a verb is logged with its traceback and answered with
    the verb's own reply type carrying ``Error``, never a 500 with a stack trace. Every answer is
    counted once in ``sky_extender_request_seconds{verb}`` and ``sky_extender_requests_total{verb,code}``.
    """

    def __init__(self, state: ServiceState) -> None:
        self.state = state
        self.handlers: dict[str, Callable[[bytes], Coroutine[Any, Any, bytes]]] = {
            "filter": self.filter,
            "prioritize": self.prioritize,
            "bind": self.bind,
            "preempt": self.preempt,
        }
        # the metrics' children per (verb, code), made on first use as labels() makes them
        self._children: dict[tuple[str, int], tuple[Histogram, Counter]] = {}

    async def answer(self, verb: str, scope: Scope, receive: Receive) -> tuple[int, bytes] | None:
        """``(status, reply)``; None when the client went away before its body arrived (there is
        no one to answer: nothing is counted)."""
        t0 = time.perf_counter()
        try:
            body = await receive_body(scope, receive, self.state.max_body_bytes)
            if len(body) >= OFF_LOOP_BODY_BYTES and verb in _READ_ONLY_VERBS:
                status, reply = 200, await self._off_loop(verb, body)
            else:
                status, reply = 200, await self.handlers[verb](body)
        except BodyTooLarge as exc:
            status, reply = 413, orjson.dumps(_error_reply(verb, str(exc)))
        except ClientGone:
            log.debug("%s: the client went away before its request body arrived", verb)
            return None
        except Exception as exc:  # never a 500 with a stack trace
            log.exception("%s failed", verb)
            message = f"internal error in {verb}: {type(exc).__name__}: {exc}"
            status, reply = 200, orjson.dumps(_error_reply(verb, message))
        children = self._children.get((verb, status))
        if children is None:
            metrics = self.state.metrics
            children = self._children[verb, status] = (
                metrics.request_seconds.labels(verb=verb),
                metrics.requests.labels(verb=verb, code=str(status)),
            )
        children[0].observe(time.perf_counter() - t0)
        children[1].inc()
        return status, reply

    async def _off_loop(self, verb: str, body: bytes) -> bytes:
        """A read-only verb of a very large body (parse, decision, reply: 0.85 s for 700,000
        candidates) on a worker thread, so that the other requests of every port go on; the cache
        does not change meanwhile (``extender/cache/gate.py``). These verbs never await: the
        coroutine runs to its end in one step."""
        handler = self.handlers[verb]

        def run() -> bytes:
            coro = handler(body)
            try:
                coro.send(None)
            except StopIteration as done:
                reply: bytes = done.value
                return reply
            coro.close()
            raise RuntimeError(f"{verb} awaited something; it cannot run off the loop")

        return await self.state.cache.gate.off_loop(run)

    # --- the verbs: request body → reply body ----------------------------------------------------
    def _resolve(self, ssn: Session, pod: Mapping[str, Any]) -> TaskInfo | None:
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        return ssn.task(uid) if uid else None

    def _not_ours(self, pod: Mapping[str, Any]) -> bool:
        return (pod.get("spec") or {}).get("schedulerName") not in (None, self.state.scheduler_name)

    def _decide(self, pod: Mapping[str, Any], names: list[str]) -> tuple[FilterOutcome, bind_action.Rest | None]:
        state = self.state
        if not state.synced():
            reason = Status.unresolvable(Reason.CACHE_NOT_SYNCED, "the scheduler is starting; retry in a moment")
            return FilterOutcome(), bind_action.Rest(reason.message())
        if self._not_ours(pod):
            return FilterOutcome(passed=list(names)), None
        ssn = state.session()
        task = self._resolve(ssn, pod)
        if task is None:
            meta = pod.get("metadata") or {}
            key = f"{meta.get('namespace')}/{meta.get('name')}"
            reason = Status.unresolvable(Reason.UNKNOWN_POD, f"pod {key} is not in the scheduler's cache yet")
            return FilterOutcome(), bind_action.Rest(reason.message())
        if task.node and task.status in ON_NODE:
            # already placed (or a bind is in flight): only its node
            at = bind_action.position(names, task.node)
            passed = [task.node] if at >= 0 else []
            reason = Status.unresolvable(Reason.WAITING_FOR_BIND, f"pod is being bound to {task.node}")
            return FilterOutcome(passed=passed), bind_action.Rest(reason.message(), skip=task.node)
        return bind_action.decide_pod(ssn, task, names, state.verdicts())

    async def filter(self, body: bytes) -> bytes:
        try:
            pod, names, node_list = _extender_args(body)
        except _BadRequest as exc:
            return orjson.dumps(_error_reply("filter", str(exc)))
        outcome, rest = self._decide(pod, names)
        return _filter_reply(outcome, rest, names, node_list)

    async def prioritize(self, body: bytes) -> bytes:
        try:
            pod, names, _ = _extender_args(body)
        except _BadRequest:
            return b"[]"  # prioritize errors are ignored by kube-scheduler: answer neutrally
        outcome, _ = self._decide(pod, names)  # the rest fail: they score 0
        if outcome.path in (INLINE, SPOT):
            scores = bind_action.scale_scores(outcome.scores, names)
        else:
            passed = set(outcome.passed)
            scores = {n: (10 if n in passed else 0) for n in names}
        return orjson.dumps([{"Host": n, "Score": scores.get(n, 0)} for n in names])

    async def bind(self, body: bytes) -> bytes:
        state = self.state
        try:
            args = _parse(body)
        except _BadRequest as exc:
            return orjson.dumps({"Error": str(exc)})
        fields = [_field(args, k) for k in _BINDING_FIELDS]
        if not all(isinstance(f, str) and f for f in fields):
            return orjson.dumps(
                {"Error": "malformed binding request: PodName, PodNamespace, PodUID and Node are required"}
            )
        name, ns, uid, node = fields
        # a retry while the first attempt is still in flight joins it instead of binding twice
        running = state.binds_in_flight.get(uid)
        if running is not None:
            target, fut = running
            error = await asyncio.shield(fut)
            if not error and target != node:
                error = f"pod {ns}/{name} was bound to {target}, not {node}"
            return orjson.dumps({"Error": error})
        fut = asyncio.ensure_future(_bind(state, ns, name, uid, node))
        state.binds_in_flight[uid] = (node, fut)

        def done(_: asyncio.Future[str]) -> None:
            # forgotten when the bind ends, not when this handler does: a handler cancelled
            # mid-bind must not let a retry start a second bind of the same pod
            if state.binds_in_flight.get(uid, (None, None))[1] is fut:
                del state.binds_in_flight[uid]

        fut.add_done_callback(done)
        error = await asyncio.shield(fut)
        return orjson.dumps({"Error": error})

    async def preempt(self, body: bytes) -> bytes:
        state = self.state
        try:
            args = _parse(body)
            pod = _pod(args)
            source, is_meta = _victims(args)
        except _BadRequest as exc:
            return orjson.dumps(_error_reply("preempt", str(exc)))
        proposed: dict[str, list[str]] = {}
        pdb: dict[str, int] = {}
        for node, victims in source.items():
            pods = _field(victims or {}, "Pods") or []
            uids = []
            for p in pods:
                if not isinstance(p, dict):
                    continue
                uid = _field(p, "UID") if is_meta else ((p.get("metadata") or {}).get("uid"))
                if isinstance(uid, str) and uid:
                    uids.append(uid)
            proposed[node] = uids
            pdb[node] = int(_field(victims or {}, "NumPDBViolations") or 0)
        if self._not_ours(pod):
            # extenders are shared by every profile: another scheduler's preemption goes through
            # unchanged (as UIDs, the only form of the reply)
            return _meta_victims(proposed, pdb)
        if not state.synced():
            return orjson.dumps({"NodeNameToMetaVictims": {}})
        ssn = state.session()
        task = self._resolve(ssn, pod)
        if task is None:
            return orjson.dumps({"NodeNameToMetaVictims": {}})
        outcome = reclaim_action.reclaim(ssn, task, proposed)
        for node, why in outcome.dropped.items():
            log.debug("preempt %s on %s: dropped: %s", task.key, node, why)
        return _meta_victims(outcome.victims, pdb)


def _meta_victims(victims: Mapping[str, Sequence[str]], pdb: Mapping[str, int]) -> bytes:
    """``ExtenderPreemptionResult``: victims by UID per node — never a node without victims."""
    reply = {
        node: {"Pods": [{"UID": u} for u in uids], "NumPDBViolations": pdb.get(node, 0)}
        for node, uids in victims.items()
        if uids
    }
    return orjson.dumps({"NodeNameToMetaVictims": reply})


class ExtenderApp(FastAPI):
    """The extender's FastAPI app behind a thin ASGI front.

    ``POST /filter``, ``/prioritize``, ``/bind`` and ``/preempt`` (the exact paths; any query
    string) are answered straight from :class:`Verbs`, without FastAPI's middleware stack, routing
    and dependency solving (well over 0.1 ms a request). Everything else — ``/healthz``, the
    OpenAPI document and docs, other methods on the verbs' paths (405), unknown paths (404),
    ``/filter/`` (307) — goes to FastAPI. The verbs' FastAPI routes stay declared, over the same
    :class:`Verbs`: they describe the verbs in the OpenAPI document and serve whoever calls the
    router itself."""

    def __init__(self, verbs: Verbs, **fastapi: Any) -> None:
        super().__init__(**fastapi)
        self.verbs = verbs

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            verb = _VERB_OF_PATH.get(scope["path"])
            if verb is not None:
                answered = await self.verbs.answer(verb, scope, receive)
                if answered is not None:
                    status, reply = answered
                    # the headers Starlette's Response writes, in its order
                    headers = [(b"content-length", str(len(reply)).encode()), (b"content-type", _JSON)]
                    await send({"type": "http.response.start", "status": status, "headers": headers})
                    await send({"type": "http.response.body", "body": reply})
                return
        await super().__call__(scope, receive, send)


def create_app(state: ServiceState) -> ExtenderApp:
    verbs = Verbs(state)
    app = ExtenderApp(
        verbs,
        title="sky-scheduler extender",
        description="kube-scheduler extender verbs (k8s.io/kube-scheduler/extender/v1 wire format).",
        version="v1",
    )

    def route(verb: str) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            answered = await verbs.answer(verb, request.scope, request.receive)
            if answered is None:
                return Response(status_code=499)  # nginx's "client closed request"; no one reads it
            status, reply = answered
            return Response(reply, status_code=status, media_type="application/json")

        return endpoint

    for path, (verb, name, summary) in _ROUTES.items():
        app.add_api_route(path, route(verb), methods=["POST"], name=name, summary=summary)

    @app.get("/healthz", summary="Liveness")
    async def healthz() -> Response:
        return _json({"status": "ok"})

    return app


async def _bind(state: ServiceState, ns: str, name: str, uid: str, node_name: str) -> str:
    """Returns the Error text ("" on success)."""
    # the assume below changes the cache: not while a binder cycle reads it off the loop
    await state.cache.gate.writable()
    done = state.recent_binds.get(uid)
    if done is not None:
        return "" if done == node_name else f"pod {ns}/{name} was already bound to {done}"
    if not state.synced():
        return "the scheduler's cache is not synced yet; the bind will be retried"
    if state.writer is None:
        return "this extender has no API access configured; cannot bind"
    cache = state.cache
    task = cache.task(uid)
    if task is None:
        return f"pod {ns}/{name} ({uid}) is not in the scheduler's cache; it may have been deleted"
    if task.node and task.status in ON_NODE and uid not in cache.assumed:
        if task.node == node_name:
            state.recent_binds[uid] = node_name
            return ""
        return f"pod {ns}/{name} is already bound to {task.node}, not {node_name}"
    ssn = state.session()
    node = ssn.node(node_name)
    if node is None:
        return f"node {node_name} is not in the scheduler's cache"
    annotations: dict[str, str] = {}
    quota_to_bind = ""
    if task.spot:
        s = ssn.tn.predicate(task, node)
        path = SPOT
    else:
        job = ssn.job(task.job)
        quota = ssn.quota(task.quota) if task.quota else None
        inline = bind_action.is_inline(job, task) and (quota is None or not quota.node_name)
        if inline:
            if quota is None and job is not None:
                admission = ssn.stages.enqueueable(job)  # JobQueue / Queue admission holds here too
                if not admission.ok:
                    return f"cannot bind {ns}/{name}: {admission.message()}"
                quota = bind_action.choose_inline_quota(ssn, task)
            if quota is None:
                return f"pod {ns}/{name}: no quota of its queue fits it; see /diagnose/pod/{ns}/{name}"
            outcome = bind_action.filter_inline(ssn, task, quota, [node_name])
            if node_name in outcome.passed:
                s = Status.merge([])
            else:
                why = outcome.failed.get(node_name) or outcome.unresolvable.get(node_name, "")
                s = Status.unschedulable(Reason.BIND_FAILED, why)
            quota_to_bind = quota.name
            annotations[wellknown.ANNO_QUOTA_NAME] = quota.name
            path = INLINE
        else:
            if quota is None:
                return f"pod {ns}/{name} holds no quota yet; the binder assigns one (see /diagnose/pod/{ns}/{name})"
            if quota.node_name != node_name:
                return (
                    f"quota {quota.name} of pod {ns}/{name} is bound to {quota.node_name or 'no node'}, not {node_name}"
                )
            s = bind_action.gang_gate(ssn, job, task)
            if s.ok:
                s = ssn.tn.predicate(task, node)
            path = QUOTA
        if not s.ok:
            return f"cannot bind {ns}/{name} to {node_name}: {s.message()}"
        annotations[wellknown.ANNO_QUOTA_NODE] = node_name
    if not s.ok:
        return f"cannot bind {ns}/{name} to {node_name}: {s.message()}"
    annotations[wellknown.ANNO_BIND_DECISION] = path
    # assume before the first await: concurrent binds of other pods see this one's room taken
    try:
        cache.assume(uid, node_name)
    except (KeyError, RuntimeError) as exc:
        return f"cannot bind {ns}/{name}: {exc}"
    try:
        if quota_to_bind:
            claim = None
            if task.quota != quota_to_bind:  # chosen here: record the claim with the binding
                claim = ClaimEntry(
                    uid=ADMISSION_PREFIX + uid,
                    namespace=ns,
                    name=name,
                    job=task.job,
                    index=task.index,
                    request=quota.governed(task.request) if quota is not None else task.request,
                    expires_at=state.cache.clock() + DEFAULT_CLAIM_TTL,
                )
            error = await _bind_quota_inline(state, quota_to_bind, node_name, claim)
            if error:
                await cache.gate.writable()
                cache.forget(uid)
                return error
        await state.writer.bind_pod(ns, name, uid, node_name, annotations)
    except Exception as exc:
        await cache.gate.writable()
        cache.forget(uid)
        return _bind_error(ns, name, node_name, exc)
    state.recent_binds[uid] = node_name
    return ""


def _bind_error(ns: str, name: str, node: str, exc: Exception) -> str:
    """The Binding failed: say what happened and what happens next, for ``kubectl describe pod``."""
    if isinstance(exc, BindConflict):
        where = f"already bound to {exc.node}" if exc.node else "being deleted, or re-created with another UID"
        return f"binding {ns}/{name} to {node} refused: the pod is {where} ({exc})"
    if isinstance(exc, NotFound):
        return f"binding {ns}/{name} to {node} failed: the pod no longer exists (deleted while being bound)"
    if isinstance(exc, GiveUp):
        return (
            f"binding {ns}/{name} to {node} failed: the API server kept failing ({exc.last}); "
            "kube-scheduler retries the pod after its back-off"
        )
    return f"binding {ns}/{name} to {node} failed: {type(exc).__name__}: {exc}; kube-scheduler retries the pod"


async def _bind_quota_inline(state: ServiceState, quota: str, node: str, claim: ClaimEntry | None) -> str:
    """Write the quota's binding for an inline (single-pod) placement, unless someone was faster
    — with the pod's claim recorded in the same write when the quota was chosen here (room judged
    on the object as read: a webhook replica's claim recorded first wins)."""
    assert state.writer is not None
    moved: list[str] = []
    known = state.cache.quotas.get(quota)

    def mutate(obj: dict[str, Any]) -> dict[str, Any] | None:
        status = dict(obj.get("status") or {})
        current = status.get("nodeName") or ""
        if current and current != node:
            moved.append(current)
            return None
        if claim is not None:
            status = record_claim(obj, claim, now=state.cache.clock(), known=known) or status
        if current == node and status == (obj.get("status") or {}):
            return None
        status["nodeName"] = node
        status["phase"] = "QuotaBound"
        status["boundBy"] = wellknown.COMPONENT
        return status

    try:
        obj = await state.writer.update_quota_status(quota, mutate)
    except NoRoom as exc:
        return f"quota {quota} was claimed meanwhile ({exc}); kube-scheduler will retry"
    except Exception as exc:
        return f"binding quota {quota} to {node} failed: {exc}"
    if moved:
        return f"quota {quota} was bound to {moved[0]} meanwhile; kube-scheduler will retry"
    if obj is not None:
        await state.cache.gate.writable()
        state.cache.on_quota_update(obj, obj)
    return ""
