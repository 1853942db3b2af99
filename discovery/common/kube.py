"""Kubernetes side of the agents: reads through ``extender.kube.client``, writes through
``extender.kube.writer.KubeWriter`` (the only module of the project allowed to write to the API).

- :class:`KubeReader` — GET a node's NodeTopology and ``zone`` label, list nodes (read-only).
- :class:`DryRunKubeSink` — ``--dry-run --kubeconfig``: real reads, printed writes.
- :class:`KubeSink` — the real sink (spec and labels; the heartbeat through the status subresource).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from discovery.common.model import NodeTopologySpec, spec_from_json
from discovery.common.sink import DryRunSink, NodeRef, Published
from extender import wellknown
from extender.kube import client
from extender.kube.leader import LeaderElector
from extender.kube.writer import KubeWriter

__all__ = [
    "DryRunKubeSink",
    "KubeReader",
    "KubeSink",
    "KubeUnavailable",
    "leader_election",
    "open_api",
    "open_reader",
    "open_sink",
]

log = logging.getLogger(__name__)


class KubeUnavailable(Exception):
    """No usable Kubernetes API configuration (message says why and what to do)."""


@contextlib.asynccontextmanager
async def open_api(kubeconfig: str | None) -> AsyncIterator[Any]:
    """An ``ApiClient``: the kubeconfig file if given, else in-cluster, else the default kubeconfig."""
    try:
        api = await client.new_client(kubeconfig)
    except Exception as e:
        where = f"kubeconfig {kubeconfig}" if kubeconfig else "the in-cluster service account or ~/.kube/config"
        raise KubeUnavailable(
            f"cannot load a Kubernetes configuration from {where}: {type(e).__name__}: {e} "
            "(give --kubeconfig, or use --dry-run to print instead of writing)"
        ) from None
    try:
        yield api
    finally:
        await client.close(api)


def _ntopo_path(node: str) -> str:
    return client.resource_path(wellknown.GROUP, wellknown.VERSION, wellknown.NODETOPOLOGIES, name=node)


class KubeReader:
    """What a discovery agent reads: NodeTopology objects and, for the IB collector, the list of
    Nodes (hostname → node). The ``zone`` label is read from the NodeTopology itself: no agent
    reads or writes a Node's labels — the binder leader copies the label onto the Node
    (``extender.binder.loop``)."""

    def __init__(self, api: Any) -> None:
        self.api = api

    async def _get(self, path: str, what: str) -> dict[str, Any] | None:
        resp = await client.request(self.api, "GET", path)
        if resp.status == 404:
            return None
        resp.raise_for_status(what)
        body = resp.json()
        return body if isinstance(body, dict) else None

    async def get_node_topology(self, node: str) -> dict[str, Any] | None:
        return await self._get(_ntopo_path(node), f"get NodeTopology {node}")

    async def read(self, node: str) -> Published:
        obj = await self.get_node_topology(node)
        spec = spec_from_json(obj.get("spec")) if obj is not None else None
        own = ((obj or {}).get("metadata") or {}).get("labels") or {}
        return Published(spec, own.get(wellknown.LABEL_ZONE))

    async def list_nodes(self) -> Sequence[NodeRef]:
        out: list[NodeRef] = []
        cont = ""
        while True:
            query: dict[str, str | int | bool] = {"limit": 500}
            if cont:
                query["continue"] = cont
            resp = await client.request(self.api, "GET", "/api/v1/nodes", query=query)
            resp.raise_for_status("list nodes")
            body = resp.json() or {}
            for item in body.get("items") or []:
                meta = item.get("metadata") or {}
                labels = meta.get("labels") or {}
                out.append(NodeRef(str(meta.get("name", "")), {str(k): str(v) for k, v in labels.items()}))
            cont = (body.get("metadata") or {}).get("continue") or ""
            if not cont:
                return out


@contextlib.asynccontextmanager
async def open_reader(kubeconfig: str | None) -> AsyncIterator[KubeReader]:
    async with open_api(kubeconfig) as api:
        yield KubeReader(api)


class DryRunKubeSink(DryRunSink):
    """Dry run against a real cluster: current state and nodes are read, writes are printed."""

    def __init__(self, reader: KubeReader, *, collect: bool = False) -> None:
        super().__init__(collect=collect)
        self.reader = reader

    async def read(self, node: str) -> Published:
        return await self.reader.read(node)

    async def list_nodes(self) -> Sequence[NodeRef] | None:
        return await self.reader.list_nodes()


class KubeSink(KubeReader):
    """The real sink: the NodeTopology (spec and its own ``zone`` label) written with
    :class:`~extender.kube.writer.KubeWriter`; never a Node."""

    dry_run = False

    def __init__(self, api: Any, writer: KubeWriter) -> None:
        super().__init__(api)
        self.writer = writer

    async def publish(self, node: str, spec: NodeTopologySpec, zone_label: str | None) -> bool:
        # None removes the label: a node that lost every switch must not keep its old zone
        _, changed = await self.writer.apply_node_topology(node, spec, {wellknown.LABEL_ZONE: zone_label})
        return changed

    async def heartbeat(self, node: str, observed_at: str, agent: str) -> bool:
        # the status subresource: a write of its own, that never touches spec or labels
        written = await self.writer.update_node_topology_status(node, {"observedAt": observed_at, "agent": agent})
        return written is not None


@contextlib.asynccontextmanager
async def open_sink(kubeconfig: str | None) -> AsyncIterator[KubeSink]:
    async with open_api(kubeconfig) as api:
        yield KubeSink(api, KubeWriter(api))


@contextlib.asynccontextmanager
async def leader_election(
    sink: KubeSink, lease_name: str, lease_namespace: str, identity: str
) -> AsyncIterator[Callable[[], bool]]:
    """Campaign for the Lease while the block runs; yields "am I the leader now?"."""
    elector = LeaderElector(
        sink.writer,
        lease_name=lease_name,
        namespace=lease_namespace,
        identity=identity,
        on_started_leading=lambda: log.info(
            "leading: this instance now collects (Lease %s/%s)", lease_namespace, lease_name
        ),
        on_stopped_leading=lambda: log.info("no longer leading (Lease %s/%s)", lease_namespace, lease_name),
    )
    elector.start()
    try:
        yield lambda: elector.is_leader
    finally:
        await elector.stop()
