"""Helpers of the wire tests: the extender app served by uvicorn on 127.0.0.1 over a cache fed
through the real API→model conversion, and a recording stand-in for the API writer."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import httpx
import orjson

from extender.api.extender import create_app
from extender.cache.cache import ClusterCache
from extender.conf import default_policy
from extender.servers import AppServer
from extender.state import ServiceState
from tests import builders as b

Obj = dict[str, Any]
NOW = 1_000_000.0

FILTER_KEYS = ["Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"]


def cache_of(objs: list[Obj]) -> ClusterCache:
    c = ClusterCache(clock=lambda: NOW)
    b.feed(c, objs)
    return c


class RecordingWriter:
    """The two writes the extender's bind performs, recorded (and applied to a copy of the object,
    as the API server would); ``fail`` makes the Binding raise."""

    def __init__(self, cache: ClusterCache) -> None:
        self.cache = cache
        self.bindings: list[tuple[str, str, str, str, dict[str, str]]] = []
        self.quota_writes: list[tuple[str, Obj]] = []
        self.fail: Exception | None = None

    async def bind_pod(self, namespace: str, name: str, uid: str, node: str, annotations: Mapping[str, str]) -> Obj:
        if self.fail is not None:
            raise self.fail
        self.bindings.append((namespace, name, uid, node, dict(annotations)))
        return {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}

    async def update_quota_status(
        self, name: str, mutate: Callable[[Obj], Obj | None], *, current: Obj | None = None
    ) -> Obj | None:
        current = copy.deepcopy(dict(self.cache.quota_object(name) or {}))
        status = mutate(copy.deepcopy(current))
        if status is None:
            return current
        meta = dict(current.get("metadata") or {})
        meta["resourceVersion"] = str(int(meta.get("resourceVersion") or "1") + 1)
        new = {**current, "metadata": meta, "status": status}
        self.quota_writes.append((name, status))
        return new

    # the rest of the binder loop's Writer protocol: the extender never calls these
    async def patch_pod_annotations(
        self, namespace: str, name: str, annotations: Mapping[str, str | None], *, uid: str | None = None
    ) -> Obj:
        raise AssertionError("the extender does not patch pods")

    async def post_event(self, involved: Mapping[str, Any], type_: str, reason: str, message: str) -> Any:
        raise AssertionError("the extender does not post events")

    async def patch_podgroup_status(self, namespace: str, name: str, mutate: Callable[[Obj], Obj | None]) -> Obj | None:
        raise AssertionError("the extender does not write PodGroups")

    async def update_queue_status(self, name: str, mutate: Callable[[Obj], Obj | None]) -> Obj | None:
        raise AssertionError("the extender does not write Queues")

    async def update_jobqueue_status(self, name: str, mutate: Callable[[Obj], Obj | None]) -> Obj | None:
        raise AssertionError("the extender does not write JobQueues")

    async def apply_quota(self, body: Mapping[str, Any]) -> tuple[Obj, bool]:
        raise AssertionError("the extender does not create Quotas")

    async def delete_quota(self, name: str, *, uid: str, resource_version: str) -> bool:
        raise AssertionError("the extender does not delete Quotas")

    async def patch_node_labels(self, node: str, labels: Mapping[str, str | None]) -> Obj:
        raise AssertionError("the extender does not label nodes")


@asynccontextmanager
async def served(state: ServiceState) -> AsyncIterator[httpx.AsyncClient]:
    async with AppServer(create_app(state)) as srv, httpx.AsyncClient(base_url=srv.url) as client:
        yield client


def state_of(cache: ClusterCache, **kw: Any) -> ServiceState:
    return ServiceState(cache=cache, policy=default_policy(), clock=lambda: NOW, **kw)


def args(pod: Obj, names: list[str]) -> bytes:
    """ExtenderArgs exactly as kube-scheduler marshals it with ``nodeCacheCapable: true``."""
    return orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})


def node_list(objs: Sequence[Mapping[str, Any]]) -> Obj:
    return {"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": "77"}, "items": objs}


def args_full(pod: Obj, nodes: Sequence[Mapping[str, Any]]) -> bytes:
    """ExtenderArgs with ``nodeCacheCapable: false``: the full NodeList, ``NodeNames`` null."""
    return orjson.dumps({"Pod": pod, "Nodes": node_list(nodes), "NodeNames": None})


def binding(pod: Obj, node: str) -> bytes:
    meta = pod["metadata"]
    return orjson.dumps(
        {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node}
    )


JSON = {"Content-Type": "application/json"}
