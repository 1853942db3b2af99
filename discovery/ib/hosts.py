"""Pure mapping of HCA node descriptions to Kubernetes nodes (no I/O).

An HCA's node description is set by the host (rdma-core's ``rdma-ndd``: ``"<hostname> <device>"``,
e.g. ``gpu-n01 mlx5_0``; older MLNX_OFED: ``gpu-n01 HCA-1``). A regular expression extracts the
hostname: its named group ``host`` if it has one, else its first group. The adapter's name (the
NodeTopology entry's ``name``; also its ``rdmaDevice`` when it looks like a verbs device name such as
``mlx5_0``) is the named group ``hca`` if the pattern has one, else the rest of the description.

Hostnames are matched against node names and the nodes' ``kubernetes.io/hostname`` labels:
exactly, then case-insensitively, then by the first DNS label when that is unambiguous.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from discovery.common.model import IbPort
from discovery.common.sink import NodeRef
from discovery.ib.parse import HcaAttachment, is_unknown_description
from extender import wellknown

__all__ = [
    "DEFAULT_HOSTNAME_PATTERN",
    "HostIndex",
    "HostMapping",
    "compile_pattern",
    "map_attachments",
    "split_description",
]

DEFAULT_HOSTNAME_PATTERN = r"^\s*(?P<host>[^\s]+)"
"""The first word of the description is the hostname."""

_VERBS_DEVICE = re.compile(r"^[a-z][a-z0-9_]*\d$")


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """Compile a hostname pattern; it must have a group ``host`` or at least one group."""
    rx = re.compile(pattern)
    if "host" not in rx.groupindex and rx.groups < 1:
        raise ValueError(f"hostname pattern {pattern!r} has no group: use (?P<host>...) or (...)")
    return rx


def split_description(desc: str, rx: re.Pattern[str]) -> tuple[str, str] | None:
    """(hostname, adapter text) of a node description, or None if the pattern does not match."""
    if is_unknown_description(desc):
        return None
    m = rx.search(desc)
    if m is None:
        return None
    group = "host" if "host" in rx.groupindex else 1
    host = m.group(group)
    if not host:
        return None
    if "hca" in rx.groupindex:
        return host, (m.group("hca") or "").strip()
    start, end = m.span(group)
    return host, " ".join((desc[:start] + " " + desc[end:]).split())


class HostIndex:
    """Hostname → node name, built from node names and ``kubernetes.io/hostname`` labels."""

    def __init__(self, nodes: Iterable[NodeRef]) -> None:
        self._exact: dict[str, str] = {}
        self._lower: dict[str, str] = {}
        short: dict[str, set[str]] = {}
        for node in nodes:
            keys = {node.name}
            label = node.labels.get(wellknown.LABEL_HOSTNAME)
            if label:
                keys.add(label)
            for k in keys:
                self._exact.setdefault(k, node.name)
                self._lower.setdefault(k.lower(), node.name)
                short.setdefault(k.lower().split(".", 1)[0], set()).add(node.name)
        self._short = {k: next(iter(v)) for k, v in short.items() if len(v) == 1}

    def lookup(self, host: str) -> str | None:
        return self._exact.get(host) or self._lower.get(host.lower()) or self._short.get(host.lower().split(".", 1)[0])


@dataclass(slots=True)
class HostMapping:
    """Result of :func:`map_attachments`."""

    nodes: dict[str, list[IbPort]] = field(default_factory=dict)
    """node name → its IB ports (sorted)."""
    unknown_hosts: dict[str, list[str]] = field(default_factory=dict)
    """hostname found in descriptions but not a Kubernetes node → those descriptions."""
    unparsable: list[str] = field(default_factory=list)
    """descriptions with no hostname (``???``, or the pattern did not match), as ``desc (guid)``."""


def map_attachments(
    atts: Sequence[HcaAttachment],
    nodes: Iterable[NodeRef] | None,
    rx: re.Pattern[str],
) -> HostMapping:
    """Group HCA attachments by Kubernetes node.

    ``nodes`` None means the cluster is not known (offline dry run): every hostname is taken as a
    node name.
    """
    index = HostIndex(nodes) if nodes is not None else None
    out = HostMapping()
    unknown: dict[str, set[str]] = {}
    unparsable: set[str] = set()
    for a in atts:
        split = split_description(a.ca_desc, rx)
        if split is None:
            unparsable.add(f"{a.ca_desc} ({a.ca_guid})")
            continue
        host, adapter = split
        node = index.lookup(host) if index is not None else host
        if node is None:
            unknown.setdefault(host, set()).add(a.ca_desc)
            continue
        name = adapter or a.ca_guid
        out.nodes.setdefault(node, []).append(
            IbPort(
                name=name,
                port=a.port,
                guid=a.port_guid or a.ca_guid,
                switch_name=a.switch_name,
                switch_guid=a.switch_guid,
                rdma_device=adapter if _VERBS_DEVICE.match(adapter) else "",
            )
        )
    for node, ports in out.nodes.items():
        # (name, port) is the list key of NodeTopology spec.net.ib: two adapters with the same
        # description (misconfigured hosts) must not collide, so those are named by their GUID.
        count: dict[tuple[str, int], int] = {}
        for p in ports:
            count[(p.name, p.port)] = count.get((p.name, p.port), 0) + 1
        fixed = [
            replace(p, name=p.guid, rdma_device=p.rdma_device) if count[(p.name, p.port)] > 1 else p for p in ports
        ]
        fixed.sort(key=lambda p: (p.name, p.port, p.guid))
        out.nodes[node] = fixed
    out.unknown_hosts = {h: sorted(d) for h, d in sorted(unknown.items())}
    out.unparsable = sorted(unparsable)
    return out
