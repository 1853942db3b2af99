"""Pure parsers of the RoCE agent's inputs (no I/O here: text in, values out).

- Multus / CNI configuration: ``.conflist`` (``plugins``), single-plugin ``.conf``, Multus's own
  configuration (``delegates``), and NetworkAttachmentDefinition manifests (YAML or JSON, possibly
  several documents or a ``List``) whose ``spec.config`` is the CNI configuration as a JSON string.
  The candidates are the ``master`` interfaces of ``macvlan`` / ``ipvlan`` plugins.
- ``lldpcli -f json0 show neighbors``: the stable JSON form, where every value is a list. The plain
  ``-f json`` form collapses one-element lists into objects keyed by name; it is refused with a
  clear error rather than half understood.
- ``rdma -j link``: ``[{"ifname": "mlx5_0", "port": 1, ..., "netdev": "ens1f0", ...}]``.
- :func:`build_nics` joins them with the bond membership into the node's NIC list.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import yaml

from discovery.common.model import RoceNic

__all__ = [
    "MASTER_PLUGIN_TYPES",
    "CniMaster",
    "LldpNeighbor",
    "ParseError",
    "RdmaLink",
    "build_nics",
    "parse_cni_file",
    "parse_lldp_json0",
    "parse_rdma_link",
    "rdma_map",
]

MASTER_PLUGIN_TYPES: frozenset[str] = frozenset({"macvlan", "ipvlan"})
"""CNI plugins whose ``master`` is a RoCE candidate NIC."""


class ParseError(ValueError):
    """The input is not in the expected format; the message says what was expected."""


# --------------------------------------------------------------------------- CNI configuration


@dataclass(frozen=True, slots=True)
class CniMaster:
    """A ``master`` interface named by a macvlan/ipvlan plugin in a CNI configuration."""

    master: str
    plugin: str
    network: str
    source: str


def _plugins(conf: Mapping[str, Any]) -> Iterator[tuple[Mapping[str, Any], str]]:
    """Every plugin configuration in a CNI conf / conflist / Multus conf, with its network name."""
    name = conf.get("name") if isinstance(conf.get("name"), str) else ""
    if isinstance(conf.get("type"), str):
        yield conf, str(name)
    for key in ("plugins", "delegates"):
        items = conf.get(key)
        if isinstance(items, list):
            for item in items:
                if isinstance(item, Mapping):
                    for plugin, net in _plugins(item):
                        yield plugin, net or str(name)


def _masters_of_cni(conf: Mapping[str, Any], source: str) -> list[CniMaster]:
    out: list[CniMaster] = []
    for plugin, network in _plugins(conf):
        ptype = plugin.get("type")
        master = plugin.get("master")
        if ptype in MASTER_PLUGIN_TYPES and isinstance(master, str) and master:
            out.append(CniMaster(master, str(ptype), network, source))
    return out


def _is_nad(doc: Mapping[str, Any]) -> bool:
    return doc.get("kind") == "NetworkAttachmentDefinition" or (
        isinstance(doc.get("spec"), Mapping) and "config" in doc["spec"]
    )


def _documents(text: str, filename: str) -> list[Any]:
    stripped = text.lstrip()
    if not stripped:
        return []
    if stripped.startswith(("{", "[")):
        try:
            return [orjson.loads(text)]
        except orjson.JSONDecodeError as e:
            raise ParseError(f"{filename}: invalid JSON: {e}") from None
    try:
        return [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        raise ParseError(f"{filename}: invalid YAML: {e}") from None


def parse_cni_file(text: str, filename: str) -> list[CniMaster]:
    """The macvlan/ipvlan masters named in one file of the CNI configuration directory.

    Accepts a CNI ``.conf`` / ``.conflist`` (also Multus's own configuration with ``delegates``)
    and NetworkAttachmentDefinition manifests in YAML or JSON (one or several documents, or a
    ``List``). Raises :class:`ParseError` on a file that is not valid JSON/YAML, or a NAD whose
    ``spec.config`` is not a JSON object.
    """
    out: list[CniMaster] = []
    stack: list[Any] = list(_documents(text, filename))
    while stack:
        doc = stack.pop(0)
        if isinstance(doc, list):
            stack[0:0] = doc
            continue
        if not isinstance(doc, Mapping):
            continue
        if doc.get("kind") == "List" or ("items" in doc and isinstance(doc.get("items"), list) and "type" not in doc):
            stack[0:0] = doc["items"]
            continue
        if _is_nad(doc):
            config = doc["spec"].get("config") if isinstance(doc.get("spec"), Mapping) else None
            meta = doc.get("metadata")
            nad_name = str(meta.get("name", "")) if isinstance(meta, Mapping) else ""
            if config is None or config == "":
                continue  # a NAD without config refers to a file elsewhere: nothing to read here
            if isinstance(config, str):
                try:
                    config = orjson.loads(config)
                except orjson.JSONDecodeError as e:
                    raise ParseError(
                        f"{filename}: NetworkAttachmentDefinition {nad_name!r}: spec.config is not valid JSON: {e}"
                    ) from None
            if not isinstance(config, Mapping):
                raise ParseError(
                    f"{filename}: NetworkAttachmentDefinition {nad_name!r}: spec.config is not a JSON object"
                )
            masters = _masters_of_cni(config, filename)
            out.extend(CniMaster(m.master, m.plugin, m.network or nad_name, m.source) for m in masters)
            continue
        out.extend(_masters_of_cni(doc, filename))
    return out


# --------------------------------------------------------------------------- LLDP (json0)


@dataclass(frozen=True, slots=True)
class LldpNeighbor:
    """One LLDP neighbour seen on a local interface."""

    interface: str
    switch_name: str
    """Chassis (system) name, else the chassis id value."""
    chassis_id: str
    port: str
    """Remote port: its id when that is a name (ifname/local/ifalias), else its description, else id."""
    is_bridge_or_router: bool


def _values(obj: Mapping[str, Any], key: str) -> list[Any]:
    v = obj.get(key)
    if v is None:
        return []
    if not isinstance(v, list):
        raise ParseError(
            f"lldpcli output: {key!r} is not a list: this is not the json0 format "
            "(run `lldpcli -f json0 show neighbors`; plain `-f json` collapses one-element lists)"
        )
    return v


def _first_value(obj: Mapping[str, Any], key: str) -> tuple[str, str]:
    """(value, type) of the first entry of a json0 list like ``"name": [{"value": "leaf-a"}]``."""
    for item in _values(obj, key):
        if isinstance(item, Mapping):
            value = item.get("value")
            if isinstance(value, str) and value:
                t = item.get("type")
                return value, t if isinstance(t, str) else ""
    return "", ""


_NAME_PORT_ID_TYPES = frozenset({"ifname", "local", "ifalias"})


def parse_lldp_json0(text: str) -> list[LldpNeighbor]:
    """Neighbours from ``lldpcli -f json0 show neighbors``, in output order.

    An empty table (``{"lldp": [{}]}``) gives ``[]``. Raises :class:`ParseError` when the text is
    not JSON or not the json0 shape (in particular the plain ``-f json`` shape).
    """
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise ParseError(f"lldpcli output is not JSON: {e}") from None
    if not isinstance(doc, Mapping) or "lldp" not in doc:
        raise ParseError('lldpcli output has no "lldp" key: not `lldpcli -f json0 show neighbors` output')
    out: list[LldpNeighbor] = []
    for lldp in _values(doc, "lldp"):
        if not isinstance(lldp, Mapping):
            continue
        for iface in _values(lldp, "interface"):
            if not isinstance(iface, Mapping):
                continue
            name = iface.get("name")
            if not isinstance(name, str):
                raise ParseError("lldpcli output: an interface entry has no name: not the json0 format")
            for chassis in _values(iface, "chassis") or [{}]:
                if not isinstance(chassis, Mapping):
                    continue
                sysname, _ = _first_value(chassis, "name")
                chassis_id, _ = _first_value(chassis, "id")
                caps = [
                    c for c in _values(chassis, "capability") if isinstance(c, Mapping) and c.get("enabled") is True
                ]
                bridge = any(c.get("type") in ("Bridge", "Router") for c in caps)
                port_value = ""
                for port in _values(iface, "port"):
                    if not isinstance(port, Mapping):
                        continue
                    pid, ptype = _first_value(port, "id")
                    descr, _ = _first_value(port, "descr")
                    port_value = pid if ptype in _NAME_PORT_ID_TYPES else (descr or pid)
                    break
                switch = sysname or chassis_id
                if not switch:
                    continue
                out.append(LldpNeighbor(name, switch, chassis_id, port_value, bridge))
    return out


# --------------------------------------------------------------------------- rdma link


@dataclass(frozen=True, slots=True)
class RdmaLink:
    device: str
    port: int
    netdev: str
    state: str


def parse_rdma_link(text: str) -> list[RdmaLink]:
    """Links from ``rdma -j link`` (a JSON array, one object per device port)."""
    try:
        doc = orjson.loads(text) if text.strip() else []
    except orjson.JSONDecodeError as e:
        raise ParseError(f"`rdma -j link` output is not JSON: {e}") from None
    if not isinstance(doc, list):
        raise ParseError("`rdma -j link` output is not a JSON array")
    out: list[RdmaLink] = []
    for item in doc:
        if not isinstance(item, Mapping):
            continue
        dev = item.get("ifname")
        if not isinstance(dev, str):
            continue
        port = item.get("port")
        netdev = item.get("netdev")
        state = item.get("state")
        out.append(
            RdmaLink(
                dev,
                port if isinstance(port, int) else 0,
                netdev if isinstance(netdev, str) else "",
                state if isinstance(state, str) else "",
            )
        )
    return out


def rdma_map(links: Iterable[RdmaLink]) -> dict[str, str]:
    """netdev → RDMA device (first one wins; links without a netdev are skipped)."""
    out: dict[str, str] = {}
    for link in links:
        if link.netdev and link.netdev not in out:
            out[link.netdev] = link.device
    return out


# --------------------------------------------------------------------------- joining


def _pick(neighbors: Sequence[LldpNeighbor]) -> LldpNeighbor | None:
    if not neighbors:
        return None
    for n in neighbors:
        if n.is_bridge_or_router:
            return n
    return neighbors[0]


def build_nics(
    masters: Iterable[str],
    bonds: Mapping[str, Sequence[str]],
    neighbors: Iterable[LldpNeighbor],
    rdma: Mapping[str, str],
) -> list[RoceNic]:
    """The node's RoCE NICs, sorted by name.

    ``masters``: candidate interfaces from the CNI configuration; ``bonds``: bond → slaves for the
    masters that are bonds; ``neighbors``: the LLDP table; ``rdma``: netdev → RDMA device. A bond
    is replaced by its slaves (``master`` = the bond); a slave without its own RDMA device takes
    the bond's (RoCE LAG: ``mlx5_bond_0`` on ``bond0``). A NIC without a neighbour has an empty
    ``switch_name``. When a NIC sees several neighbours, a bridge/router wins, else the first.
    """
    by_iface: dict[str, list[LldpNeighbor]] = {}
    for n in neighbors:
        by_iface.setdefault(n.interface, []).append(n)
    nics: dict[str, RoceNic] = {}
    for master in masters:
        slaves = bonds.get(master)
        members = [(s, master) for s in slaves] if slaves else [(master, "")]
        for name, bond in members:
            if name in nics:
                continue
            nb = _pick(by_iface.get(name, []))
            nics[name] = RoceNic(
                name=name,
                switch_name=nb.switch_name if nb else "",
                switch_port=nb.port if nb else "",
                rdma_device=rdma.get(name) or (rdma.get(bond, "") if bond else ""),
                master=bond,
            )
    return [nics[k] for k in sorted(nics)]
