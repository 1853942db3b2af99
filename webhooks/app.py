"""The webhook's HTTP surface: ``POST /mutate/pods`` (AdmissionReview ``admission.k8s.io/v1``).

Routed on the path only — the apiserver appends ``?timeout=10s``. The raw body is read with a
size cap and parsed with orjson (no FastAPI body model on the hot path). Every answer is HTTP
200 with an allowing review, except a body without a request uid to echo (HTTP 400, a
``metav1.Status`` JSON body) and an oversized body (HTTP 413): this webhook never denies a pod
and never answers 500 — when it cannot decide, the binder loop repairs later.

The decision (:func:`webhooks.mutate.decide`) runs synchronously between two awaits. A quota it
chooses is then *claimed on the Quota* before the answer (:func:`admit`): the claim is written
into ``status.tasks`` with a ``resourceVersion`` precondition through the writer
(``extender.cache.claims.record_claim`` judges room on the object as just read). A claim another
replica (or the binder) recorded first makes the write find no room: the decision is taken again
without that quota, at most ``claim_attempts`` quotas in all. While a claim is being written it
sits in this process's in-flight registry, so concurrent admissions of this replica do not try
the same room. A dry run claims nothing. If the API cannot be written, the pod is admitted
without a quota (the binder loop assigns one).
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.types import Receive, Scope, Send

from extender.cache.claims import ClaimEntry, NoRoom, record_claim
from extender.model.quota import QuotaInfo
from extender.servers import BodyTooLarge, ClientGone, receive_body
from webhooks.mutate import Decision, Outcome, decide
from webhooks.review import AdmissionRequest, ReviewError, build_response, error_status, parse_review
from webhooks.state import WebhookState

__all__ = ["MUTATE_PATH", "admit", "create_app", "handle"]

log = logging.getLogger(__name__)

MUTATE_PATH = "/mutate/pods"
_JSON = "application/json"
_JSON_BYTES = b"application/json"


def handle(state: WebhookState, body: bytes) -> tuple[int, dict[str, Any]]:
    """One review, synchronously, claiming in this process's in-flight registry only (no API
    write): (HTTP status, JSON document). Never raises. What :func:`admit` does without a writer."""
    parsed = _parse(state, body)
    if isinstance(parsed, tuple):
        return parsed
    req = parsed
    try:
        decision = _decide(state, req, frozenset())
        _remember(state, req, decision)
    except Exception as exc:  # a bug: admit unchanged (the loop repairs), log it, say it
        return _internal_error(state, req, exc)
    return _answer(req, decision)


async def admit(state: WebhookState, body: bytes) -> tuple[int, dict[str, Any]]:
    """One review, its claim recorded on the Quota first (see the module docstring). Never raises."""
    if state.writer is None:
        return handle(state, body)
    parsed = _parse(state, body)
    if isinstance(parsed, tuple):
        return parsed
    req = parsed
    try:
        decision = _decide(state, req, frozenset())
        if not req.dry_run:
            decision = await _claim(state, req, decision)
        _remember(state, req, decision)
    except Exception as exc:  # a bug: admit unchanged (the loop repairs), log it, say it
        return _internal_error(state, req, exc)
    return _answer(req, decision)


async def _claim(state: WebhookState, req: AdmissionRequest, decision: Decision) -> Decision:
    """Record the decision's claim on its quota; on a refusal decide again without that quota."""
    assert state.writer is not None
    refused: set[str] = set()
    while decision.entry is not None and decision.quota:
        entry, quota, pending = decision.entry, decision.quota, decision.claim
        known = state.cache.snapshot().quotas.get(quota)
        mutate = functools.partial(_record, entry=entry, known=known, inherit_from=decision.inherit_from, state=state)
        if pending is not None:
            state.inflight.add(pending)  # concurrent admissions of this replica count it meanwhile
        try:
            obj = await state.writer.update_quota_status(quota, mutate)
        except NoRoom as exc:
            log.info("webhook: quota %s was claimed first (%s); choosing again", quota, exc)
            refused.add(quota)
        except Exception as exc:
            log.warning("webhook: could not record the claim on quota %s: %s", quota, exc)
            return _unrecorded(state, req, decision, f"the claim on quota {quota} could not be recorded: {exc}")
        else:
            if state.on_claimed is not None:
                state.on_claimed(obj)
            decision.claim = None  # recorded already
            return decision
        finally:
            if pending is not None:
                state.inflight.discard(pending)
        if len(refused) >= state.claim_attempts:
            return _unrecorded(state, req, decision, f"quotas {', '.join(sorted(refused))} were claimed first")
        decision = _decide(state, req, frozenset(refused))
    return decision


def _record(
    obj: dict[str, Any], *, entry: ClaimEntry, known: QuotaInfo | None, inherit_from: str, state: WebhookState
) -> dict[str, Any] | None:
    return record_claim(obj, entry, now=state.clock(), known=known, inherit_from=inherit_from)


def _unrecorded(state: WebhookState, req: AdmissionRequest, decision: Decision, why: str) -> Decision:
    """No claim could be recorded: the pod goes without a quota (a named one stays named)."""
    return _decide(state, req, frozenset(), no_quota=why)


def _decide(state: WebhookState, req: AdmissionRequest, exclude: frozenset[str], no_quota: str = "") -> Decision:
    return decide(
        req,
        cache=state.cache,
        policy=state.policy,
        namespaces=state.namespaces,
        inflight=state.inflight,
        config=state.config,
        now=state.clock(),
        synced=state.synced(),
        exclude=exclude,
        no_quota=no_quota,
        candidates=state.index,
    )


def _remember(state: WebhookState, req: AdmissionRequest, decision: Decision) -> None:
    if not req.dry_run and decision.outcome is not Outcome.IGNORED:
        now = state.clock()
        snap = decision.snapshot or state.cache.snapshot(now)
        state.inflight.reconcile(snap.quotas, now)
        if decision.claim is not None:
            state.inflight.add(decision.claim)


def _internal_error(state: WebhookState, req: AdmissionRequest, exc: Exception) -> tuple[int, dict[str, Any]]:
    log.exception("webhook: error deciding on request %s", req.uid)
    message = f"internal error, the pod is admitted unchanged: {type(exc).__name__}: {exc}"
    return 200, build_response(
        req.uid,
        status=error_status(message, 500, "InternalError"),
        warnings=[f"{state.config.scheduler_name} webhook: {message}"],
    )


def _answer(req: AdmissionRequest, decision: Decision) -> tuple[int, dict[str, Any]]:
    _log(req, decision)
    status = error_status(decision.message) if decision.message else None
    return 200, build_response(
        req.uid,
        ops=decision.ops,
        warnings=decision.warnings,
        audit_annotations=decision.audit,
        status=status,
    )


def _parse(state: WebhookState, body: bytes) -> AdmissionRequest | tuple[int, dict[str, Any]]:
    try:
        return parse_review(body)
    except ReviewError as exc:
        if exc.uid is None:
            log.info("webhook: rejecting a request without a uid: %s", exc.message)
            return 400, error_status(exc.message)
        log.info("webhook: request %s cannot be reviewed: %s", exc.uid, exc.message)
        return 200, build_response(
            exc.uid,
            status=error_status(exc.message),
            warnings=[f"{state.config.scheduler_name} webhook: {exc.message}"],
            api_version=exc.api_version,
        )


def _log(req: AdmissionRequest, d: Decision) -> None:
    if d.outcome is Outcome.IGNORED:
        if log.isEnabledFor(logging.DEBUG):
            log.debug("webhook: %s %s/%s ignored: %s", req.uid, req.namespace, req.name, d.note)
        return
    who = f"{req.namespace}/{req.name or '(generated)'}"
    dry = " (dry run)" if req.dry_run else ""
    fields = {"pod": who, "uid": req.uid, "dry_run": req.dry_run}
    if d.quota:
        log.info("webhook: pod %s → quota %s [%s]%s", who, d.quota, d.tier, dry, extra={**fields, "quota": d.quota})
    elif d.reason:
        log.info("webhook: pod %s admitted without a quota: %s%s", who, d.reason, dry, extra=fields)
    elif d.message:
        log.warning("webhook: pod %s admitted unchanged: %s%s", who, d.message, dry, extra=fields)


async def _serve(state: WebhookState, scope: Scope, receive: Receive) -> tuple[int, bytes] | None:
    """One ``POST /mutate/pods``: (HTTP status, body), or None when the client went away."""
    t0 = time.perf_counter()
    try:
        body = await receive_body(scope, receive, state.config.max_body_bytes)
    except ClientGone:
        return None
    except BodyTooLarge:
        code, doc = (
            413,
            error_status(f"the request body exceeds {state.config.max_body_bytes} bytes", 413, "RequestEntityTooLarge"),
        )
    else:
        code, doc = await admit(state, body)
    reply = orjson.dumps(doc)
    metrics = state.metrics
    if metrics is not None:
        metrics.webhook_seconds.observe(time.perf_counter() - t0)
        metrics.webhook_requests.labels(code=str(code)).inc()
    return code, reply


class WebhookApp(FastAPI):
    """The webhook's FastAPI app behind a thin ASGI front (as ``extender.api.extender.ExtenderApp``).

    ``POST /mutate/pods`` (the exact path; any query string) is answered straight from
    :func:`admit`, without FastAPI's middleware stack, routing and dependency solving (~0.2 ms a
    request, a tenth of an admission). Everything else — other methods (405), unknown paths
    (404) — goes to FastAPI, whose route for the same path serves whoever calls the router."""

    def __init__(self, state: WebhookState, **fastapi: Any) -> None:
        super().__init__(**fastapi)
        self.webhook = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] == MUTATE_PATH:
            answered = await _serve(self.webhook, scope, receive)
            if answered is None:
                await send({"type": "http.response.start", "status": 499, "headers": [(b"content-length", b"0")]})
                await send({"type": "http.response.body", "body": b""})
                return
            code, reply = answered
            # the headers Starlette's Response writes, in its order
            headers = [(b"content-length", str(len(reply)).encode()), (b"content-type", _JSON_BYTES)]
            await send({"type": "http.response.start", "status": code, "headers": headers})
            await send({"type": "http.response.body", "body": reply})
            return
        await super().__call__(scope, receive, send)


def create_app(state: WebhookState) -> WebhookApp:
    """The webhook app over ``state`` (the service owns the lifecycle: no lifespan here)."""
    app = WebhookApp(state, title="sky-scheduler admission webhook", openapi_url=None, docs_url=None, redoc_url=None)
    app.state.webhook = state

    @app.post(MUTATE_PATH, include_in_schema=False)
    async def mutate_pods(request: Request) -> Response:
        answered = await _serve(state, request.scope, request.receive)
        if answered is None:
            return Response(status_code=499)  # nginx's "client closed request": no one reads it
        code, reply = answered
        return Response(content=reply, status_code=code, media_type=_JSON)

    return app
