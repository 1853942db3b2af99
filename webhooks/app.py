"""The webhook's HTTP surface: ``POST /mutate/pods`` (AdmissionReview ``admission.k8s.io/v1``).

Routed on the path only — the apiserver appends ``?timeout=10s``. The raw body is read with a
size cap and parsed with orjson (no FastAPI body model on the hot path). Every answer is HTTP
200 with an allowing review, except a body without a request uid to echo (HTTP 400, a
``metav1.Status`` JSON body) and an oversized body (HTTP 413): this webhook never denies a pod
and never answers 500 — when it cannot decide, the binder loop repairs later.

The decision (:func:`webhooks.mutate.decide`) and the in-flight bookkeeping run synchronously
between two awaits, so concurrent admissions on one event loop are serialised: two requests
cannot be offered the same room by the same instance.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response

from extender.servers import BodyTooLarge, ClientGone, receive_body
from webhooks.mutate import Decision, Outcome, decide
from webhooks.review import AdmissionRequest, ReviewError, build_response, error_status, parse_review
from webhooks.state import WebhookState

__all__ = ["MUTATE_PATH", "create_app", "handle"]

log = logging.getLogger(__name__)

MUTATE_PATH = "/mutate/pods"
_JSON = "application/json"


def handle(state: WebhookState, body: bytes) -> tuple[int, dict[str, Any]]:
    """One review, synchronously: (HTTP status, JSON document). Never raises."""
    try:
        req = parse_review(body)
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
    now = state.clock()
    try:
        decision = decide(
            req,
            cache=state.cache,
            policy=state.policy,
            namespaces=state.namespaces,
            inflight=state.inflight,
            config=state.config,
            now=now,
            synced=state.synced(),
        )
        if not req.dry_run and decision.outcome is not Outcome.IGNORED:
            snap = decision.snapshot or state.cache.snapshot(now)
            state.inflight.reconcile(snap.quotas, now)
            if decision.claim is not None:
                state.inflight.add(decision.claim)
    except Exception as exc:  # a bug: admit unchanged (the loop repairs), log it, say it
        log.exception("webhook: error deciding on request %s", req.uid)
        message = f"internal error, the pod is admitted unchanged: {type(exc).__name__}: {exc}"
        return 200, build_response(
            req.uid,
            status=error_status(message, 500, "InternalError"),
            warnings=[f"{state.config.scheduler_name} webhook: {message}"],
        )
    _log(req, decision)
    status = error_status(decision.message) if decision.message else None
    return 200, build_response(
        req.uid,
        ops=decision.ops,
        warnings=decision.warnings,
        audit_annotations=decision.audit,
        status=status,
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


def create_app(state: WebhookState) -> FastAPI:
    """The webhook app over ``state`` (the service owns the lifecycle: no lifespan here)."""
    app = FastAPI(title="sky-scheduler admission webhook", openapi_url=None, docs_url=None, redoc_url=None)
    app.state.webhook = state
    metrics = state.metrics
    observe = metrics.webhook_seconds.observe if metrics is not None else None

    @app.post(MUTATE_PATH, include_in_schema=False)
    async def mutate_pods(request: Request) -> Response:
        t0 = time.perf_counter()
        try:
            body = await receive_body(request.scope, request.receive, state.config.max_body_bytes)
        except ClientGone:
            return Response(status_code=499)  # nginx's "client closed request": no one reads it
        except BodyTooLarge:
            code, doc = (
                413,
                error_status(
                    f"the request body exceeds {state.config.max_body_bytes} bytes", 413, "RequestEntityTooLarge"
                ),
            )
        else:
            code, doc = handle(state, body)
        response = Response(content=orjson.dumps(doc), status_code=code, media_type=_JSON)
        if metrics is not None and observe is not None:
            observe(time.perf_counter() - t0)
            metrics.webhook_requests.labels(code=str(code)).inc()
        return response

    return app
