"""Where the agents' results go: the :class:`TopologySink` protocol and its offline implementations.

An agent never talks to the Kubernetes API itself. It hands a node's part of the topology
(its RoCE NICs or its InfiniBand ports) to :func:`publish_part`, which reads what the sink holds
for the node, merges, and writes only when something changed. After a round that checked a node it
may also write the node's heartbeat (``status.observedAt``/``status.agent``, throttled by
:class:`discovery.common.heartbeat.Heartbeats`) with :meth:`TopologySink.heartbeat`.
Implementations:

- :class:`MemorySink` — a dict; what the tests use to see what would be written.
- :class:`DryRunSink` — prints the NodeTopology objects it would write as JSON (``--dry-run``);
  heartbeats are recorded like :class:`MemorySink` does, and not printed.
- ``discovery.common.kube.KubeSink`` — the real thing, on top of ``extender.kube.writer.KubeWriter``.
"""

from __future__ import annotations

import copy
import logging
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO

import orjson

from discovery.common.model import IbPort, NodeTopologySpec, RoceNic, Tier, merge_spec
from extender import wellknown

__all__ = [
    "DryRunSink",
    "Heartbeat",
    "MemorySink",
    "NodeRef",
    "PublishOutcome",
    "Published",
    "TopologySink",
    "node_topology_object",
    "publish_part",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class NodeRef:
    """A Kubernetes node as the IB collector needs it: name and labels."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Published:
    """What is currently on the API for a node: its NodeTopology spec (None: no object) and the
    value of its ``zone`` label (None: no label)."""

    spec: NodeTopologySpec | None
    zone_label: str | None


class TopologySink(Protocol):
    async def read(self, node: str) -> Published:
        """The node's current NodeTopology spec and ``zone`` label."""
        ...

    async def publish(self, node: str, spec: NodeTopologySpec, zone_label: str | None) -> bool:
        """Write the spec (and the ``zone`` label on the NodeTopology and on the Node; None removes
        it); return whether anything changed."""
        ...

    async def heartbeat(self, node: str, observed_at: str, agent: str) -> bool:
        """Write the node's NodeTopology ``status`` (``observedAt``, ``agent``) — separately from
        its spec. Return False, writing nothing, when the node has no NodeTopology (yet)."""
        ...

    async def list_nodes(self) -> Sequence[NodeRef] | None:
        """The cluster's nodes, or None when the sink cannot know them (offline dry run)."""
        ...

    @property
    def dry_run(self) -> bool:
        """True when writes are only shown, not made (changes the agents' log wording)."""
        ...


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """A heartbeat written to a :class:`MemorySink`."""

    node: str
    observed_at: str
    agent: str


@dataclass(frozen=True, slots=True)
class PublishOutcome:
    node: str
    spec: NodeTopologySpec
    zone_label: str | None
    changed: bool


async def publish_part(
    sink: TopologySink,
    node: str,
    *,
    roce: Iterable[RoceNic] | None = None,
    ib: Iterable[IbPort] | None = None,
    upper_tiers: Iterable[Tier] | None = None,
) -> PublishOutcome:
    """Merge one agent's part (and its tiers above the leaf, see
    :func:`discovery.common.model.merge_spec`) into the node's topology and write it if it differs."""
    current = await sink.read(node)
    spec, label = merge_spec(current.spec, roce=roce, ib=ib, upper_tiers=upper_tiers)
    if current.spec == spec and current.zone_label == label:
        return PublishOutcome(node, spec, label, changed=False)
    changed = await sink.publish(node, spec, label)
    return PublishOutcome(node, spec, label, changed=changed)


def node_topology_object(node: str, spec: NodeTopologySpec, zone_label: str | None) -> dict[str, Any]:
    """The whole NodeTopology object as it would be written."""
    metadata: dict[str, Any] = {"name": node}
    if zone_label is not None:
        metadata["labels"] = {wellknown.LABEL_ZONE: zone_label}
    return {
        "apiVersion": wellknown.API_VERSION,
        "kind": wellknown.KIND_NODETOPOLOGY,
        "metadata": metadata,
        "spec": copy.deepcopy(spec),
    }


class MemorySink:
    """In-memory sink: ``specs``/``labels`` hold what was written, ``writes`` lists the writes
    (spec/labels only); ``heartbeats`` lists the heartbeats written, ``status`` holds each node's
    last one. Like the API, a heartbeat of a node without an object (no spec) is not recorded."""

    dry_run = False

    def __init__(self, nodes: Iterable[NodeRef] | None = None) -> None:
        self.specs: dict[str, NodeTopologySpec] = {}
        self.labels: dict[str, str] = {}
        self.writes: list[str] = []
        self.heartbeats: list[Heartbeat] = []
        self.status: dict[str, dict[str, str]] = {}
        self._nodes = list(nodes) if nodes is not None else None

    async def read(self, node: str) -> Published:
        spec = self.specs.get(node)
        return Published(copy.deepcopy(spec) if spec is not None else None, self.labels.get(node))

    async def publish(self, node: str, spec: NodeTopologySpec, zone_label: str | None) -> bool:
        changed = self.specs.get(node) != spec or self.labels.get(node) != zone_label
        if changed:
            self.writes.append(node)
            self.specs[node] = copy.deepcopy(spec)
            if zone_label is None:
                self.labels.pop(node, None)
            else:
                self.labels[node] = zone_label
        return changed

    async def heartbeat(self, node: str, observed_at: str, agent: str) -> bool:
        if node not in self.specs:
            return False
        self.heartbeats.append(Heartbeat(node, observed_at, agent))
        self.status[node] = {"observedAt": observed_at, "agent": agent}
        return True

    async def list_nodes(self) -> Sequence[NodeRef] | None:
        return self._nodes


class DryRunSink(MemorySink):
    dry_run = True

    """Prints each NodeTopology it would write (JSON, one document per write) instead of writing.
    Heartbeats are recorded (:class:`MemorySink`) but not printed: the output stays the objects.

    With ``collect=True`` nothing is printed; the objects accumulate in :attr:`printed` for the
    caller to print as one document (the IB collector prints all nodes as one ``List``).
    """

    def __init__(
        self,
        out: TextIO | None = None,
        nodes: Iterable[NodeRef] | None = None,
        *,
        collect: bool = False,
    ) -> None:
        super().__init__(nodes)
        self._out = out
        self._collect = collect
        self.printed: list[dict[str, Any]] = []

    async def publish(self, node: str, spec: NodeTopologySpec, zone_label: str | None) -> bool:
        changed = await super().publish(node, spec, zone_label)
        if changed:
            obj = node_topology_object(node, spec, zone_label)
            self.printed.append(obj)
            if not self._collect:
                write_json(obj, self._out)
        return changed

    async def heartbeat(self, node: str, observed_at: str, agent: str) -> bool:
        # recorded, not printed; and the object is taken to exist (a dry run against a cluster
        # only holds the objects it would change)
        self.heartbeats.append(Heartbeat(node, observed_at, agent))
        self.status[node] = {"observedAt": observed_at, "agent": agent}
        return True


def write_json(obj: object, out: TextIO | None = None) -> None:
    stream = out if out is not None else sys.stdout
    stream.write(orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode() + "\n")
    stream.flush()
