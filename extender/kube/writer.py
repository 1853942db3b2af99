"""``KubeWriter``: THE ONLY module of the project that writes to the Kubernetes API.

Every method is idempotent (calling it again after a timeout that in fact succeeded does no harm
and does not write twice) and returns the object as the API returned it, so a caller can apply
it to its cache at once. Transient failures (429, 500, 502, 503, 504, timeouts, broken
connections) are retried with jittered exponential back-off; a create is retried only when it
cannot duplicate anything (client-chosen names: AlreadyExists then means "done"). Conflicts and
other answers surface as the typed errors of :mod:`extender.kube.errors`.

What is not a write lives beside it, in modules that make no API call: the bodies it sends and the
answers it synthesises (:mod:`extender.kube.bodies`), which answers it retries and how long it
waits (:mod:`extender.kube.retry`), and its memory of the Events it posted
(:mod:`extender.kube.events`).

Every API call the writer makes is declared in :data:`extender.kube.calls.API_CALLS`; a call
outside the list raises at once, and a test drives every method against the emulator and compares
the emulator's request journal with the list — which is what the Helm chart's RBAC must grant.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import random
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

from extender import wellknown
from extender.kube import bodies, retry
from extender.kube import client as kube_client
from extender.kube.bodies import COORDINATION, Obj
from extender.kube.calls import API_CALLS, METHOD_OF_VERB, ApiCall
from extender.kube.client import RawResponse
from extender.kube.errors import (
    AlreadyExists,
    ApiFailure,
    BindConflict,
    Conflict,
    GiveUp,
    KubeTimeout,
    NotFound,
    NotLeading,
    WriteConflict,
)
from extender.kube.events import EventMemory, EventRecord, event_key

__all__ = ["MIN_FENCED_WRITE", "Fence", "KubeWriter", "StatusMutator"]

Fence = Callable[[], float]
"""Seconds during which this replica may still write as the leader (0 or less: it may not)."""

MIN_FENCED_WRITE: Final = 0.5
"""A fenced write is sent only with at least this many seconds of the fence left."""

log = logging.getLogger(__name__)

StatusMutator = Callable[[Obj], Obj | None]
"""Given a copy of the current object, return its desired ``status`` — or None: nothing to change."""

MERGE_PATCH: Final = "application/merge-patch+json"


class KubeWriter:
    """Idempotent, retrying writes of the scheduler's outputs.

    ``retries``: attempts per request for transient failures (and read-modify-write rounds on
    conflicts). ``backoff``/``backoff_max``: first and largest delay between attempts (seconds,
    jittered 50–100 %). ``event_window``: repeats of the same event within this many seconds
    bump ``count`` on the existing Event instead of creating another.
    """

    API_CALLS: Final = API_CALLS

    def __init__(
        self,
        api: Any,
        *,
        component: str = wellknown.COMPONENT,
        retries: int = 5,
        backoff: float = 0.1,
        backoff_max: float = 5.0,
        request_timeout: float = 10.0,
        event_window: float = 600.0,
        instance: str | None = None,
        rng: random.Random | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if retries < 1:
            raise ValueError("retries must be at least 1")
        self.api = api
        self.component = component
        self.retries = retries
        self.backoff = backoff
        self.backoff_max = backoff_max
        self.request_timeout = request_timeout
        self.event_window = event_window
        self.instance = instance or socket.gethostname()
        self._rng = rng or random.Random()
        self._sleep = sleep
        self._clock = clock
        self._events = EventMemory()
        self._fence: Fence | None = None

    def fenced(self, fence: Fence) -> KubeWriter:
        """This writer for a leader's work (the binder loop): each write — not a read, not a Lease
        — is sent only while ``fence()`` leaves :data:`MIN_FENCED_WRITE` seconds or more, else
        :class:`NotLeading` is raised; and it carries that many seconds as the API server's own
        deadline (``?timeout=``: kube-apiserver's request deadline; a write not done by then is
        not done, 504), so no write of a leader lands after another replica may have taken the
        lease. The copy shares the API client and the event memory."""
        out = copy.copy(self)
        out._fence = fence
        return out

    def _deadline(self, verb: str, resource: str, what: str) -> float | None:
        """The server-side deadline of a fenced write (seconds), None for an unfenced call."""
        if self._fence is None or verb == "get" or resource == "leases":
            return None
        left = self._fence()
        if left < MIN_FENCED_WRITE:
            raise NotLeading(f"{what}: not sent, this replica may no longer hold the leader lease")
        return left

    # ------------------------------------------------------------------------------------------
    # plumbing

    async def _call(
        self,
        verb: str,
        group: str,
        version: str,
        resource: str,
        *,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str = "",
        body: Any = None,
        content_type: str = "application/json",
        idempotent: bool = True,
    ) -> RawResponse:
        """One declared API call, retried on transient failures; HTTP errors are returned."""
        call = ApiCall(verb, group, resource, subresource)
        if call not in API_CALLS:
            raise RuntimeError(f"KubeWriter: {call} is not declared in API_CALLS (and so not granted by RBAC)")
        path = kube_client.resource_path(
            group, version, resource, namespace=namespace, name=name, subresource=subresource or None
        )
        method = METHOD_OF_VERB[verb]
        what = f"{verb} {resource}{'/' + subresource if subresource else ''} {name or ''}".strip()
        delay = self.backoff
        last: BaseException | None = None
        for attempt in range(1, self.retries + 1):
            retry_after: float | None = None
            deadline = self._deadline(verb, resource, what)
            query = None if deadline is None else {"timeout": f"{int(deadline * 1000)}ms"}
            timeout = self.request_timeout if deadline is None else min(self.request_timeout, deadline)
            try:
                resp = await kube_client.request(
                    self.api, method, path, query=query, body=body, content_type=content_type, request_timeout=timeout
                )
            except KubeTimeout as exc:
                if not idempotent:
                    raise
                last = exc
            else:
                if resp.status not in retry.TRANSIENT:
                    return resp
                failure = ApiFailure.from_response(resp.status, resp.json(), what, resp.headers)
                last = failure
                retry_after = failure.retry_after
            if attempt == self.retries:
                break
            pause = retry.pause(delay, self.backoff_max, retry_after, self._rng)
            log.debug(
                "writer: %s failed (%s), attempt %d/%d, retrying in %.2fs", what, last, attempt, self.retries, pause
            )
            await self._sleep(pause)
            delay *= 2
        raise GiveUp(f"{what}: gave up after {self.retries} attempts: {last}", attempts=self.retries, last=last)

    @staticmethod
    def _ok(resp: RawResponse, what: str) -> Obj:
        resp.raise_for_status(what)
        body = resp.json()
        if not isinstance(body, dict):
            raise ApiFailure(resp.status, "BadResponse", "the answer is not a JSON object", what=what)
        return body

    # ------------------------------------------------------------------------------------------
    # status subresources (optimistic concurrency)

    async def update_quota_status(self, name: str, mutate: StatusMutator, *, current: Obj | None = None) -> Obj:
        """Read-modify-write ``Quota.status`` (PUT with resourceVersion; on 409 re-read and
        re-apply ``mutate``). ``mutate`` gets a copy of the current Quota and returns its new
        ``status`` (None or an equal status: no write). It may run again on a re-read object —
        after a conflict, or after a timeout whose write in fact landed — so it must derive the
        status from what it is given (set a value, add to a set), never blindly increment.
        After ``retries`` conflicting rounds, a Warning Event is posted on the Quota and
        :class:`WriteConflict` raised.

        ``current``: the Quota as the caller last saw it (its cache's copy), to write from
        without reading it first — one request instead of two when the copy is up to date. The
        PUT carries the copy's resourceVersion, so it lands only if the copy *is* the stored
        object (otherwise 409: re-read, re-apply, as always); a decision not to write (``mutate``
        returns None or the same status) is taken only on an object read from the API."""
        return await self._update_status(wellknown.QUOTAS, wellknown.KIND_QUOTA, None, name, mutate, seen=current)

    async def patch_podgroup_status(self, namespace: str, name: str, mutate: StatusMutator) -> Obj:
        """Like :meth:`update_quota_status`, for ``PodGroup.status``."""
        return await self._update_status(wellknown.PODGROUPS, wellknown.KIND_PODGROUP, namespace, name, mutate)

    async def update_queue_status(self, name: str, mutate: StatusMutator) -> Obj:
        """Like :meth:`update_quota_status`, for ``Queue.status``."""
        return await self._update_status(wellknown.QUEUES, wellknown.KIND_QUEUE, None, name, mutate)

    async def update_jobqueue_status(self, name: str, mutate: StatusMutator) -> Obj:
        """Like :meth:`update_quota_status`, for ``JobQueue.status``."""
        return await self._update_status(wellknown.JOBQUEUES, wellknown.KIND_JOBQUEUE, None, name, mutate)

    # ------------------------------------------------------------------------------------------
    # quota objects (quota pools, `sky-scheduler quotas create`)

    async def apply_quota(self, body: Mapping[str, Any]) -> tuple[Obj, bool]:
        """Create the Quota ``body`` describes, or bring an existing one's ``spec`` and labels to
        it (other labels, annotations and the status are kept). Returns the object and whether
        anything was written. Conflicts are re-read and re-compared."""
        g, v, plural = wellknown.GROUP, wellknown.VERSION, wellknown.QUOTAS
        want = bodies.copy_json(dict(body))
        meta_want = want.get("metadata") or {}
        name = str(meta_want.get("name") or "")
        labels = dict(meta_want.get("labels") or {})
        for _ in range(self.retries):
            resp = await self._call("get", g, v, plural, name=name)
            if resp.status == 404:
                created = await self._call("create", g, v, plural, body=want)
                if created.status == 409:
                    continue  # created meanwhile (or by our own timed-out attempt): compare again
                return self._ok(created, f"create quota {name}"), True
            current = self._ok(resp, f"get quota {name}")
            new = bodies.quota_update(current, want, labels)
            if new is None:
                return current, False
            updated = await self._call("update", g, v, plural, name=name, body=new)
            if updated.status == 409:
                continue
            return self._ok(updated, f"update quota {name}"), True
        raise WriteConflict(f"Quota {name}: still conflicting after {self.retries} attempts", attempts=self.retries)

    async def delete_quota(self, name: str, *, uid: str, resource_version: str) -> bool:
        """Delete a Quota only if it is still the object that was judged (``uid`` and
        ``resourceVersion`` preconditions: a claim or a binding written since makes it a
        conflict). Returns False when it changed meanwhile or is already gone."""
        body = bodies.delete_if_unchanged(uid, resource_version)
        resp = await self._call("delete", wellknown.GROUP, wellknown.VERSION, wellknown.QUOTAS, name=name, body=body)
        if resp.status in (404, 409):
            return False
        self._ok(resp, f"delete quota {name}")
        return True

    async def update_node_topology_status(self, name: str, status: Mapping[str, Any]) -> Obj | None:
        """Set these fields of ``NodeTopology.status`` (the discovery agents' heartbeat:
        ``observedAt``, ``agent``), keeping its other fields: read-modify-write of the status
        subresource like :meth:`update_quota_status` — the spec is not written. Returns None,
        writing nothing, when the NodeTopology does not exist (the agent publishes it first).
        Persistent conflicts raise :class:`WriteConflict` without a Warning Event (the agents
        may not post Events)."""
        fields = bodies.copy_json(dict(status))

        def mutate(current: Obj) -> Obj:
            return {**(current.get("status") or {}), **fields}

        try:
            return await self._update_status(
                wellknown.NODETOPOLOGIES, wellknown.KIND_NODETOPOLOGY, None, name, mutate, conflict_event=False
            )
        except NotFound:  # not created yet, or deleted between the read and the write
            return None

    async def _update_status(
        self,
        plural: str,
        kind: str,
        namespace: str | None,
        name: str,
        mutate: StatusMutator,
        *,
        conflict_event: bool = True,
        seen: Obj | None = None,
    ) -> Obj:
        """``seen``: a copy to write from in the first round (see :meth:`update_quota_status`)."""
        g, v = wellknown.GROUP, wellknown.VERSION
        cached = seen if seen is not None and (seen.get("metadata") or {}).get("resourceVersion") else None
        rounds = 0  # rounds on a fresh read; the cached copy's round (at most one, the first) is extra
        while rounds < self.retries:
            if cached is not None:
                current, cached = cached, None
                read = False
            else:
                resp = await self._call("get", g, v, plural, namespace=namespace, name=name)
                current, read = self._ok(resp, f"get {plural} {name}"), True
                rounds += 1
            status = mutate(bodies.copy_json(current))
            if status is None or status == current.get("status"):
                if read:
                    return current
                continue  # judged on a copy: only a fresh read may decide that nothing is to be written
            body = {**current, "status": status}
            resp = await self._call(
                "update", g, v, plural, namespace=namespace, name=name, subresource="status", body=body
            )
            if resp.status == 409:
                continue  # someone else wrote first: re-read, re-apply
            return self._ok(resp, f"update {plural}/status {name}")
        message = f"{kind} {name}: status update still conflicting after {self.retries} attempts"
        if not conflict_event:
            raise WriteConflict(message, attempts=self.retries)
        involved = bodies.involved_object(kind, name, namespace, current)
        try:
            await self.post_event(involved, "Warning", "StatusUpdateConflict", message)
        except Exception as exc:  # the event is a courtesy; the conflict is the error
            log.warning("writer: could not post the conflict event for %s %s: %s", kind, name, exc)
        raise WriteConflict(message, attempts=self.retries)

    # ------------------------------------------------------------------------------------------
    # pods

    async def bind_pod(
        self, namespace: str, name: str, uid: str, node: str, annotations: Mapping[str, str] | None = None
    ) -> Obj:
        """``POST pods/{name}/binding`` with a ``metadata.uid`` precondition and ``annotations``
        (stored with ``spec.nodeName`` atomically). Returns the ``Status`` the API answered (a
        synthesised Success when the pod was already bound to ``node``: idempotent). Raises
        :class:`BindConflict` if it is bound elsewhere, being deleted, or has another UID, and
        :class:`NotFound` if it is gone."""
        body = bodies.binding(namespace, name, uid, node, annotations)
        # Safe to retry: a binding that landed before a timeout answers 409 "already assigned"
        # to the same node on the retry, which is success.
        resp = await self._call(
            "create", "", "v1", "pods", namespace=namespace, name=name, subresource="binding", body=body
        )
        if resp.status == 409:
            status = resp.json() or {}
            message = str(status.get("message", "")) if isinstance(status, dict) else ""
            assigned = retry.already_assigned_to(message)
            if assigned == node:
                return bodies.success(200, details={"name": name, "kind": "pods"})
            raise BindConflict(f"bind {namespace}/{name} to {node}: {message}", node=assigned)
        return self._ok(resp, f"bind {namespace}/{name}")

    async def patch_pod_annotations(
        self, namespace: str, name: str, annotations: Mapping[str, str | None], *, uid: str | None = None
    ) -> Obj:
        """Merge-patch pod annotations (``None`` deletes a key). With ``uid``, the patch carries
        it as a precondition: a pod re-created under the same name raises :class:`NotFound`."""
        meta: Obj = {"annotations": dict(annotations)}
        if uid:
            meta["uid"] = uid
        resp = await self._call(
            "patch", "", "v1", "pods", namespace=namespace, name=name, body={"metadata": meta}, content_type=MERGE_PATCH
        )
        if resp.status == 409 and uid:
            raise NotFound(404, "NotFound", f"pod {namespace}/{name} with uid {uid} no longer exists", body=resp.json())
        return self._ok(resp, f"patch pod {namespace}/{name}")

    # ------------------------------------------------------------------------------------------
    # events

    async def post_event(self, involved: Mapping[str, Any], type_: str, reason: str, message: str) -> Obj:
        """A core/v1 Event about ``involved`` (``apiVersion``, ``kind``, ``name``, ``namespace``,
        ``uid``). Repeats (same object, type, reason and message) within ``event_window`` bump
        ``count``/``lastTimestamp`` of the first Event instead of creating new ones. Events of
        cluster-scoped objects go to namespace ``default``, as client-go's recorder does."""
        if type_ not in ("Normal", "Warning"):
            raise ValueError(f"event type must be Normal or Warning, not {type_!r}")
        namespace = str(involved.get("namespace") or "default")
        ref = {k: involved[k] for k in ("apiVersion", "kind", "name", "namespace", "uid") if involved.get(k)}
        key = event_key(namespace, ref, type_, reason, message)
        now_dt = datetime.now(UTC)
        now = self._clock()
        record = self._events.recent(key, now, self.event_window)
        if record is not None:
            patch = {"count": record.count + 1, "lastTimestamp": bodies.kube_time(now_dt)}
            resp = await self._call(
                "patch", "", "v1", "events", namespace=namespace, name=record.name, body=patch, content_type=MERGE_PATCH
            )
            if resp.status != 404:
                event = self._ok(resp, f"patch event {record.name}")
                self._events.bumped(key, record, int(event.get("count") or record.count + 1), now)
                return event
            self._events.forget(key)  # expired or deleted meanwhile: start a new one
        name = f"{ref.get('name', 'object')}.{time.time_ns():x}"
        first = bodies.kube_time(now_dt)
        body = bodies.event(
            namespace=namespace,
            name=name,
            ref=ref,
            type_=type_,
            reason=reason,
            message=message,
            component=self.component,
            instance=self.instance,
            first=first,
        )
        # the name is ours: a retry after a timeout that landed answers AlreadyExists = done
        resp = await self._call("create", "", "v1", "events", namespace=namespace, body=body)
        if resp.status == 409:
            event = body
        else:
            event = self._ok(resp, f"create event {name}")
        self._events.remember(key, EventRecord(namespace, name, int(event.get("count") or 1), first, now))
        return event

    # ------------------------------------------------------------------------------------------
    # discovery outputs

    async def apply_node_topology(
        self, name: str, spec: Mapping[str, Any], labels: Mapping[str, str | None] | None = None
    ) -> tuple[Obj, bool]:
        """Create the node's NodeTopology, or replace its spec (and set ``labels``; a None value
        removes that label) only when they differ. Returns the object and whether anything was
        written."""
        g, v, plural = wellknown.GROUP, wellknown.VERSION, wellknown.NODETOPOLOGIES
        want_spec = bodies.copy_json(dict(spec))
        want_labels = {k: v_ for k, v_ in (labels or {}).items() if v_ is not None}
        gone = {k for k, v_ in (labels or {}).items() if v_ is None}
        for _ in range(self.retries):
            resp = await self._call("get", g, v, plural, name=name)
            if resp.status == 404:
                created = await self._call(
                    "create", g, v, plural, body=bodies.node_topology(name, want_spec, want_labels)
                )
                if created.status == 409:
                    continue  # created meanwhile (or by our own timed-out attempt): compare again
                return self._ok(created, f"create nodetopology {name}"), True
            current = self._ok(resp, f"get nodetopology {name}")
            body = bodies.node_topology_update(current, want_spec, want_labels, gone)
            if body is None:
                return current, False
            updated = await self._call("update", g, v, plural, name=name, body=body)
            if updated.status == 409:
                continue
            return self._ok(updated, f"update nodetopology {name}"), True
        raise WriteConflict(
            f"NodeTopology {name}: still conflicting after {self.retries} attempts", attempts=self.retries
        )

    async def patch_node_labels(self, node: str, labels: Mapping[str, str | None]) -> Obj:
        """Merge-patch node labels (``None`` deletes a key)."""
        resp = await self._call(
            "patch", "", "v1", "nodes", name=node, body={"metadata": {"labels": dict(labels)}}, content_type=MERGE_PATCH
        )
        return self._ok(resp, f"patch node {node}")

    async def get_pod(self, namespace: str, name: str) -> Obj | None:
        """The pod of that name as the API holds it now, or None if there is none (read once
        after the cache synced, for the pods that went while no replica watched:
        :mod:`extender.cache.departures`)."""
        resp = await self._call("get", "", "v1", "pods", namespace=namespace, name=name)
        if resp.status == 404:
            return None
        return self._ok(resp, f"get pod {namespace}/{name}")

    # ------------------------------------------------------------------------------------------
    # leases (leader election)

    async def get_lease(self, namespace: str, name: str) -> Obj | None:
        """The Lease, or None if it does not exist."""
        resp = await self._call("get", COORDINATION, "v1", "leases", namespace=namespace, name=name)
        if resp.status == 404:
            return None
        return self._ok(resp, f"get lease {namespace}/{name}")

    async def create_lease(self, namespace: str, name: str, spec: Mapping[str, Any]) -> Obj:
        """Create a Lease; raises :class:`AlreadyExists` if someone (maybe our own timed-out
        attempt) created it first — re-read it then."""
        body = bodies.lease(namespace, name, spec)
        resp = await self._call("create", COORDINATION, "v1", "leases", namespace=namespace, body=body)
        if resp.status == 409:
            raise AlreadyExists(409, "AlreadyExists", f"lease {namespace}/{name} already exists", body=resp.json())
        return self._ok(resp, f"create lease {namespace}/{name}")

    async def update_lease(self, lease: Mapping[str, Any]) -> Obj:
        """PUT a Lease carrying the resourceVersion it was read at; raises :class:`Conflict`
        when another writer got there first."""
        meta = lease.get("metadata") or {}
        namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        resp = await self._call(
            "update", COORDINATION, "v1", "leases", namespace=namespace, name=name, body=dict(lease)
        )
        if resp.status == 409:
            raise Conflict(409, "Conflict", f"lease {namespace}/{name} was modified meanwhile", body=resp.json())
        return self._ok(resp, f"update lease {namespace}/{name}")
