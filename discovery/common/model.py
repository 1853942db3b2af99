"""NodeTopology spec shapes and the pure helpers both agents share.

The spec written to ``NodeTopology`` (group ``scheduling.infini-ai.com``, cluster-scoped, one per
node, name = node name)::

    spec:
      zone: "roce#leaf-a,leaf-b"        # generated zone key ("" when the node has no switch)
      net:
        roce: [{name, switchName, switchPort, rdmaDevice, master}]
        ib:   [{name, port, guid, switchName, switchGuid, rdmaDevice}]
      tiers:                            # the node's place in the fabric, from the leaf outwards
        - {level: 1, name: "leaf-a,leaf-b"}   # the leaves of the zone key, joined by ","
        - {level: 2, name: "spine-1+1"}       # spine (group), from the IB links or the RoCE fabric map
        - {level: 3, name: "core-1"}

The RoCE agent owns ``net.roce``, the InfiniBand collector owns ``net.ib``; each rewrites only its
own list and keeps the other one as it finds it. ``zone`` and the node label ``zone`` are derived
from the merged lists with :mod:`extender.model.topology` (the scheduler's own derivation): the
InfiniBand switches when the node has any, else the RoCE switches. ``tiers`` follows the same
rule: level 1 is derived from the lists like the zone; the levels above it are the ones the agent
of the kind that gives the zone passed (the IB collector's for a node with InfiniBand switches,
else the RoCE agent's), so a RoCE agent on a node that also has InfiniBand leaves them alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from extender.model import topology

__all__ = [
    "IbPort",
    "IbPortSpec",
    "Kind",
    "NetSpec",
    "NodeTopologySpec",
    "RoceNic",
    "RoceNicSpec",
    "Tier",
    "TierSpec",
    "empty_spec",
    "merge_spec",
    "spec_from_json",
    "zone_of",
]

Kind = Literal["roce", "ib"]


class RoceNicSpec(TypedDict):
    name: str
    switchName: str
    switchPort: str
    rdmaDevice: str
    master: str


class IbPortSpec(TypedDict):
    name: str
    port: int
    guid: str
    switchName: str
    switchGuid: str
    rdmaDevice: str


class NetSpec(TypedDict):
    roce: list[RoceNicSpec]
    ib: list[IbPortSpec]


class TierSpec(TypedDict):
    level: int
    name: str


class NodeTopologySpec(TypedDict):
    zone: str
    net: NetSpec
    tiers: list[TierSpec]


Tier = tuple[int, str]
"""(level, name) of one of a node's tiers above its leaf, as an agent hands it over (level ≥ 2)."""


@dataclass(frozen=True, slots=True)
class RoceNic:
    """One physical RoCE NIC of a node and the switch port it is cabled to.

    ``switch_name`` is empty while no LLDP neighbour has been seen on the NIC. ``master`` is the
    bond the NIC is a slave of (empty for a NIC used directly).
    """

    name: str
    switch_name: str = ""
    switch_port: str = ""
    rdma_device: str = ""
    master: str = ""

    def to_spec(self) -> RoceNicSpec:
        return {
            "name": self.name,
            "switchName": self.switch_name,
            "switchPort": self.switch_port,
            "rdmaDevice": self.rdma_device,
            "master": self.master,
        }


@dataclass(frozen=True, slots=True)
class IbPort:
    """One InfiniBand HCA port of a node and the (leaf) switch it is cabled to."""

    name: str
    port: int
    guid: str
    switch_name: str
    switch_guid: str
    rdma_device: str = ""

    def to_spec(self) -> IbPortSpec:
        return {
            "name": self.name,
            "port": self.port,
            "guid": self.guid,
            "switchName": self.switch_name,
            "switchGuid": self.switch_guid,
            "rdmaDevice": self.rdma_device,
        }


def empty_spec() -> NodeTopologySpec:
    return {"zone": "", "net": {"roce": [], "ib": []}, "tiers": []}


def _str(v: object) -> str:
    return v if isinstance(v, str) else ""


def _int(v: object) -> int:
    if isinstance(v, bool):
        return 0
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.isdigit():
        return int(v)
    return 0


def _roce_from_json(item: Mapping[str, Any]) -> RoceNicSpec:
    return {
        "name": _str(item.get("name")),
        "switchName": _str(item.get("switchName")),
        "switchPort": _str(item.get("switchPort")),
        "rdmaDevice": _str(item.get("rdmaDevice")),
        "master": _str(item.get("master")),
    }


def _ib_from_json(item: Mapping[str, Any]) -> IbPortSpec:
    return {
        "name": _str(item.get("name")),
        "port": _int(item.get("port")),
        "guid": _str(item.get("guid")),
        "switchName": _str(item.get("switchName")),
        "switchGuid": _str(item.get("switchGuid")),
        "rdmaDevice": _str(item.get("rdmaDevice")),
    }


def spec_from_json(spec: object) -> NodeTopologySpec:
    """Normalise a spec read from the API (missing keys become empty values, unknown keys go)."""
    out = empty_spec()
    if not isinstance(spec, Mapping):
        return out
    out["zone"] = _str(spec.get("zone"))
    net = spec.get("net")
    if isinstance(net, Mapping):
        roce = net.get("roce")
        if isinstance(roce, list):
            out["net"]["roce"] = [_roce_from_json(i) for i in roce if isinstance(i, Mapping)]
        ib = net.get("ib")
        if isinstance(ib, list):
            out["net"]["ib"] = [_ib_from_json(i) for i in ib if isinstance(i, Mapping)]
    tiers = spec.get("tiers")
    if isinstance(tiers, list):
        out["tiers"] = [
            {"level": _int(t.get("level")), "name": _str(t.get("name"))}
            for t in tiers
            if isinstance(t, Mapping) and _int(t.get("level")) >= 1 and _str(t.get("name"))
        ]
    return out


def _zone_kind(net: NetSpec) -> Kind | None:
    """Which list gives the node its zone: ``ib`` when it has a known InfiniBand switch, else
    ``roce`` when it has a known RoCE switch, else None."""
    if topology.sorted_switches(p["switchName"] for p in net["ib"]):
        return "ib"
    if topology.sorted_switches(n["switchName"] for n in net["roce"]):
        return "roce"
    return None


def _tiers(net: NetSpec, upper: Iterable[Tier]) -> list[TierSpec]:
    """Level 1 (the zone's leaves joined by ``,``) and the given upper levels, in level order (the
    first name given for a level wins)."""
    kind = _zone_kind(net)
    if kind is None:
        return []
    names = [p["switchName"] for p in net["ib"]] if kind == "ib" else [n["switchName"] for n in net["roce"]]
    out: list[TierSpec] = [{"level": 1, "name": ",".join(topology.sorted_switches(names))}]
    by_level: dict[int, str] = {}
    for lv, nm in upper:
        if lv >= 2 and nm:
            by_level.setdefault(lv, nm)  # one entry per level: ``level`` is the list's map key
    out += [{"level": lv, "name": by_level[lv]} for lv in sorted(by_level)]
    return out


def zone_of(net: NetSpec) -> tuple[str | None, str | None]:
    """(zone key, ``zone`` label value) of a node from its NIC lists; (None, None) without switches.

    InfiniBand switches win over RoCE ones, as in :func:`extender.model.topology.node_zone_key`.
    """
    ib = [p["switchName"] for p in net["ib"]]
    key = topology.generated_zone_key("ib", ib)
    if key is not None:
        return key, topology.zone_label_value(ib)
    roce = [n["switchName"] for n in net["roce"]]
    key = topology.generated_zone_key("roce", roce)
    if key is not None:
        return key, topology.zone_label_value(roce)
    return None, None


def _sorted_roce(nics: Iterable[RoceNicSpec]) -> list[RoceNicSpec]:
    return sorted(nics, key=lambda n: (n["name"], n["master"]))


def _sorted_ib(ports: Iterable[IbPortSpec]) -> list[IbPortSpec]:
    return sorted(ports, key=lambda p: (p["name"], p["port"], p["guid"]))


def merge_spec(
    current: NodeTopologySpec | None,
    *,
    roce: Iterable[RoceNic] | None = None,
    ib: Iterable[IbPort] | None = None,
    upper_tiers: Iterable[Tier] | None = None,
) -> tuple[NodeTopologySpec, str | None]:
    """The spec to write: ``current`` with the given list(s) replaced, zone and tiers recomputed.

    ``upper_tiers``: the caller's tiers above the leaf (level ≥ 2) for its kind (``ib`` when
    ``ib`` is given, else ``roce``); they are used when that kind gives the zone, else the upper
    tiers already in ``current`` stay. None: keep the current upper tiers.

    Returns the new spec and the ``zone`` label value (None: the label should be absent).
    Lists are sorted so that equal topologies compare equal.
    """
    base = current if current is not None else empty_spec()
    roce_list = _sorted_roce(n.to_spec() for n in roce) if roce is not None else _sorted_roce(base["net"]["roce"])
    ib_list = _sorted_ib(p.to_spec() for p in ib) if ib is not None else _sorted_ib(base["net"]["ib"])
    net: NetSpec = {"roce": roce_list, "ib": ib_list}
    key, label = zone_of(net)
    caller: Kind = "ib" if ib is not None else "roce"
    current_upper = [(t["level"], t["name"]) for t in base["tiers"] if t["level"] >= 2]
    upper = list(upper_tiers) if upper_tiers is not None and _zone_kind(net) == caller else current_upper
    return {"zone": key or "", "net": net, "tiers": _tiers(net, upper)}, label
