"""The kube-scheduler extender protocol: ``POST /filter``, ``/prioritize``, ``/bind``, ``/preempt``.

Wire format exactly as ``k8s.io/kube-scheduler/extender/v1`` marshals it (:mod:`extender.api.wire`
parses the requests and builds the replies): PascalCase keys, nulls present, prioritize answers a
bare array, requests with ``NodeNames`` (``nodeCacheCapable: true``) and with full ``Nodes`` are
both accepted and answered in the form received. Keys of a request are matched case-insensitively,
as Go's decoder does.

"Does not fit" is HTTP 200 with reasons in ``FailedNodes`` / ``FailedAndUnresolvableNodes``,
never an error: an error aborts the attempt and skips preemption. Trouble the caller cannot fix
by waiting (a malformed body) is HTTP 200 with ``Error`` set, whose text kube-scheduler shows
in the pod's events. Nothing here waits on the API except ``/bind``, which performs the Binding
(:mod:`extender.api.binding`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response
from prometheus_client import Counter, Histogram
from starlette.types import Receive, Scope, Send

from extender.actions import backfill
from extender.actions import bind as bind_action
from extender.actions import reclaim as reclaim_action
from extender.actions.outcome import INLINE, SPOT, FilterOutcome
from extender.api import binding, wire
from extender.api.wire import BadRequest
from extender.framework.session import Session
from extender.framework.status import Reason, Status
from extender.model.task import ON_NODE, TaskInfo
from extender.servers import BodyTooLarge, ClientGone, receive_body
from extender.state import ServiceState

__all__ = ["ExtenderApp", "Verbs", "create_app"]

log = logging.getLogger(__name__)

_JSON = b"application/json"


def _json(obj: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(obj), status_code=status, media_type="application/json")


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
            status, reply = 413, orjson.dumps(wire.error_reply(verb, str(exc)))
        except ClientGone:
            log.debug("%s: the client went away before its request body arrived", verb)
            return None
        except Exception as exc:  # never a 500 with a stack trace
            log.exception("%s failed", verb)
            message = f"internal error in {verb}: {type(exc).__name__}: {exc}"
            status, reply = 200, orjson.dumps(wire.error_reply(verb, message))
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
            ns, name = meta.get("namespace") or "default", meta.get("name")
            problem = state.cache.pod_problem(ns, str(name))
            if problem:  # seen, and refused: it will not come into the cache until it is fixed
                reason = Status.unresolvable(Reason.INVALID_POD, problem)
            else:
                reason = Status.unresolvable(Reason.UNKNOWN_POD, f"pod {ns}/{name} is not in the scheduler's cache yet")
            return FilterOutcome(), bind_action.Rest(reason.message())
        if task.node and task.status in ON_NODE:
            # already placed (or a bind is in flight): only its node
            at = bind_action.position(names, task.node)
            passed = [task.node] if at >= 0 else []
            reason = Status.unresolvable(Reason.WAITING_FOR_BIND, f"pod is being bound to {task.node}")
            return FilterOutcome(passed=passed), bind_action.Rest(reason.message(), skip=task.node)
        outcome, rest = bind_action.decide_pod(ssn, task, names, state.verdicts())
        if outcome.path == SPOT:
            node = backfill.zone_to_remember(ssn, task, outcome)
            if node:
                state.remember_spot_zone(task.job, node)
        return outcome, rest

    async def filter(self, body: bytes) -> bytes:
        try:
            pod, names, node_list = wire.extender_args(body)
        except BadRequest as exc:
            return orjson.dumps(wire.error_reply("filter", str(exc)))
        outcome, rest = self._decide(pod, names)
        return wire.filter_reply(outcome, rest, names, node_list)

    async def prioritize(self, body: bytes) -> bytes:
        try:
            pod, names, _ = wire.extender_args(body)
        except BadRequest:
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
            name, ns, uid, node = wire.binding_args(body)
        except BadRequest as exc:
            return orjson.dumps({"Error": str(exc)})
        # a retry while the first attempt is still in flight joins it instead of binding twice
        running = state.binds_in_flight.get(uid)
        if running is not None:
            target, fut = running
            error = await asyncio.shield(fut)
            if not error and target != node:
                error = f"pod {ns}/{name} was bound to {target}, not {node}"
            return orjson.dumps({"Error": error})
        fut = asyncio.ensure_future(binding.bind(state, ns, name, uid, node))
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
            args = wire.parse(body)
            pod = wire.pod_of(args)
            source, is_meta = wire.victims_of(args)
        except BadRequest as exc:
            return orjson.dumps(wire.error_reply("preempt", str(exc)))
        proposed, pdb = wire.proposed_victims(source, is_meta)
        if self._not_ours(pod):
            # extenders are shared by every profile: another scheduler's preemption goes through
            # unchanged (as UIDs, the only form of the reply)
            return wire.meta_victims(proposed, pdb)
        if not state.synced():
            return orjson.dumps({"NodeNameToMetaVictims": {}})
        ssn = state.session()
        task = self._resolve(ssn, pod)
        if task is None:
            return orjson.dumps({"NodeNameToMetaVictims": {}})
        outcome = reclaim_action.reclaim(ssn, task, proposed, pdb)
        for node, why in outcome.dropped.items():
            log.debug("preempt %s on %s: dropped: %s", task.key, node, why)
        return wire.meta_victims(outcome.victims, outcome.pdb)


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
