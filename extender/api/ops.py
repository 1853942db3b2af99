"""Operations endpoints: ``/diagnose/job/{ns}/{name}``, ``/diagnose/pod/{ns}/{name}``,
``/policy``, ``/metrics``, ``/healthz``, ``/readyz``; the OpenAPI document at ``/openapi.json``."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import FastAPI
from fastapi.responses import Response

from extender.diagnose import diagnose_job, diagnose_pod
from extender.framework.session import Session
from extender.framework.status import Reason, Status
from extender.metrics import CONTENT_TYPE_LATEST
from extender.model.task import job_key
from extender.policy_reload import PolicyStatus
from extender.state import ServiceState

__all__ = ["create_app"]


def _json(obj: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(obj, option=orjson.OPT_INDENT_2), status_code=status, media_type="application/json")


def create_app(state: ServiceState) -> FastAPI:
    app = FastAPI(
        title="sky-scheduler operations",
        description="Why is my job pending? — diagnose, metrics and health of the sky-scheduler service.",
        version="v1",
    )

    def not_synced() -> Response | None:
        if not state.synced():
            return _json({"error": "the scheduler's cache is not synced yet; try again in a moment"}, 503)
        return None

    @app.get("/diagnose/job/{namespace}/{name}", summary="Why a job is where it is (FitAction ladder)")
    async def diagnose_job_route(namespace: str, name: str) -> Response:
        if (r := not_synced()) is not None:
            return r
        ssn = Session(state.diagnose_snapshot(), state.policy)
        key = job_key(namespace, name)
        job = ssn.job(key)
        if job is None:
            return _json({"error": f"job {key} not found: no PodGroup and no pod of that name"}, 404)
        return _json(diagnose_job(ssn, job, state.verdicts().get(key)))

    @app.get("/diagnose/pod/{namespace}/{name}", summary="Why a pod is where it is")
    async def diagnose_pod_route(namespace: str, name: str) -> Response:
        if (r := not_synced()) is not None:
            return r
        obj = state.cache.pod_by_name(namespace, name)
        uid = str(((obj or {}).get("metadata") or {}).get("uid") or "")
        ssn = Session(state.diagnose_snapshot(), state.policy)
        task = ssn.task(uid) if uid else None
        if task is None:
            problem = state.cache.pod_problem(namespace, name)
            if problem:  # ours, but unreadable: say what is wrong with it
                return _json({"error": Status.unresolvable(Reason.INVALID_POD, problem).message()}, 422)
            return _json({"error": f"pod {namespace}/{name} is not one of sky-scheduler's pods"}, 404)
        return _json(diagnose_pod(ssn, task, state.verdicts()))

    @app.get("/policy", summary="The scheduling policy in effect, its source and hash, the last reload error")
    async def policy_route() -> Response:
        # answered while starting too: the policy does not depend on the cache
        policy = state.policy
        status = state.policy_status or PolicyStatus(source=policy.source, sha256="", loaded_at=0.0)
        return _json(status.to_json(policy))

    @app.get("/metrics", summary="Prometheus metrics")
    async def metrics() -> Response:
        state.metrics.synced.set(1 if state.synced() else 0)
        state.metrics.leader.set(1 if state.is_leader() else 0)
        return Response(state.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/healthz", summary="Liveness: the process serves requests")
    async def healthz() -> Response:
        return _json({"status": "ok"})

    @app.get("/readyz", summary="Readiness: the cache is synced (also says whether this replica leads)")
    async def readyz() -> Response:
        synced = state.synced()
        body = {"ready": synced, "cacheSynced": synced, "binderLeader": state.is_leader()}
        return _json(body, 200 if synced else 503)

    return app
