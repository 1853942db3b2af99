"""Pure parser of ``ibnetdiscover``'s default topology output (no I/O here).

The format (rdma-core ``infiniband-diags/ibnetdiscover.c``, ``dump_topology``)::

    vendid=0x2c9
    devid=0xd2f0
    sysimgguid=0xb8599f0300fc6de4
    switchguid=0xb8599f0300fc6de4(b8599f0300fc6de4)
    Switch	41 "S-b8599f0300fc6de4"		# "MF0;leaf-01:MQM8700/U1" enhanced port 0 lid 13 lmc 0
    [1]	"H-0c42a10300a1b2c0"[1](c42a10300a1b2c0) 		# "gpu-n01 mlx5_0" lid 21 4xHDR
    [37]	"S-b8599f0300fc7a00"[1]		# "MF0;spine-01:MQM8700/U1" lid 3 4xHDR

    vendid=0x15b3
    devid=0x101b
    sysimgguid=0xc42a10300a1b2c0
    caguid=0xc42a10300a1b2c0
    Ca	1 "H-0c42a10300a1b2c0"		# "gpu-n01 mlx5_0"
    [1](c42a10300a1b2c0) 	"S-b8599f0300fc6de4"[1]		# lid 21 lmc 0 "MF0;leaf-01:MQM8700/U1" lid 13 4xHDR

Node names are ``"S-<guid>"`` / ``"H-<guid>"`` / ``"R-<guid>"`` (16 hex digits); GUIDs in
parentheses and after ``0x`` carry no leading zeros. Descriptions are quoted and may contain spaces
and ``;:/``; an unknown one may print as ``???`` (so do unknown widths ``??`` and speeds ``???``).
With ``-g`` a ``[ext N]`` may follow port numbers; with ``-f`` ``s= w= v=`` follow the speed.

All GUIDs are returned normalised as ``0x`` + 16 lower-case hex digits.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "CaPort",
    "Fabric",
    "HcaAttachment",
    "IbCa",
    "IbSwitch",
    "ParseError",
    "SwitchPort",
    "attachments",
    "fabric_switch_descriptions",
    "is_unknown_description",
    "normalize_guid",
    "parse_ibnetdiscover",
    "switch_names",
]


class ParseError(ValueError):
    pass


def normalize_guid(text: str) -> str:
    """``0x`` + 16 lower-case hex digits, whatever zero padding / prefix the input had."""
    t = text.strip().lower()
    if t.startswith("0x"):
        t = t[2:]
    if not t or len(t) > 16 or any(c not in "0123456789abcdef" for c in t):
        raise ParseError(f"not a GUID: {text!r}")
    return "0x" + t.rjust(16, "0")


def is_unknown_description(desc: str) -> bool:
    """An empty description, or one that is only question marks (``???``)."""
    d = desc.strip()
    return not d or set(d) == {"?"}


@dataclass(frozen=True, slots=True)
class SwitchPort:
    """A cabled port of a switch, as printed under its ``Switch`` header."""

    port: int
    remote_type: str
    """``S`` (switch), ``H`` (channel adapter), ``R`` (router) or ``?``."""
    remote_guid: str
    remote_port: int
    remote_port_guid: str
    """Port GUID of a non-switch remote ("" for a switch)."""
    remote_desc: str
    remote_lid: int
    link: str
    """Width and speed as printed, e.g. ``4xHDR`` (``?????`` when unknown)."""


@dataclass(frozen=True, slots=True)
class CaPort:
    """A cabled port of a channel adapter, as printed under its ``Ca`` header."""

    port: int
    port_guid: str
    lid: int
    lmc: int
    remote_type: str
    remote_guid: str
    remote_port: int
    remote_desc: str
    remote_lid: int
    link: str


@dataclass(slots=True)
class IbSwitch:
    guid: str
    desc: str
    nports: int
    lid: int
    enhanced: bool
    ports: dict[int, SwitchPort] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """Its description, or ``S-<guid>`` if unknown; not unique in a fabric (see :func:`switch_names`)."""
        return self.desc if not is_unknown_description(self.desc) else "S-" + self.guid[2:]


@dataclass(slots=True)
class IbCa:
    guid: str
    desc: str
    nports: int
    kind: str
    """``Ca`` or ``Rt`` (router)."""
    ports: dict[int, CaPort] = field(default_factory=dict)


@dataclass(slots=True)
class Fabric:
    switches: dict[str, IbSwitch] = field(default_factory=dict)
    cas: dict[str, IbCa] = field(default_factory=dict)

    def switch_links(self) -> list[tuple[str, int, str, int]]:
        """Switch-to-switch links (guid, port, remote guid, remote port), each once."""
        seen: set[tuple[str, int, str, int]] = set()
        for sw in self.switches.values():
            for p in sw.ports.values():
                if p.remote_type == "S":
                    a, b = (sw.guid, p.port), (p.remote_guid, p.remote_port)
                    link = (*min(a, b), *max(a, b))
                    seen.add(link)
        return sorted(seen)

    def leaf_guids(self) -> set[str]:
        """Switches with at least one channel adapter cabled to them."""
        return {a.switch_guid for a in attachments(self)}


_GUID = r"[0-9a-fA-F]{1,16}"
_EXT = r"(?:\[ext \d+\])?"
_TAIL = r"(?P<rest>\s.*)?$"
_SWITCH_HDR = re.compile(
    r"^Switch\s+(?P<nports>\d+)\s+\"S-(?P<guid>" + _GUID + r")\"\s*#\s*\"(?P<desc>.*)\"\s+"
    r"(?P<mode>enhanced|base)\s+port\s+0\s+lid\s+(?P<lid>\d+)\s+lmc\s+(?P<lmc>\d+)" + _TAIL
)
_CA_HDR = re.compile(
    r"^(?P<kind>Ca|Rt)\s+(?P<nports>\d+)\s+\"(?:H|R)-(?P<guid>" + _GUID + r")\"\s*#\s*\"(?P<desc>.*)\"" + _TAIL
)
_SWITCH_PORT = re.compile(
    r"^\[(?P<port>\d+)\]" + _EXT + r"\s+\"(?P<rtype>[SHR?])-(?P<rguid>" + _GUID + r")\""
    r"\[(?P<rport>\d+)\]" + _EXT + r"(?:\((?P<rpguid>" + _GUID + r")\))?"
    r"\s*#\s*\"(?P<rdesc>.*)\"\s+lid\s+(?P<rlid>\d+)\s+(?P<link>\S+)" + _TAIL
)
_CA_PORT = re.compile(
    r"^\[(?P<port>\d+)\](?:\((?P<pguid>" + _GUID + r")\))?\s+"
    r"\"(?P<rtype>[SHR?])-(?P<rguid>"
    + _GUID
    + r")\"\[(?P<rport>\d+)\]"
    + _EXT
    + r"(?:\s*\((?P<rpguid>"
    + _GUID
    + r")\))?"
    r"\s*#\s*lid\s+(?P<lid>\d+)\s+lmc\s+(?P<lmc>\d+)\s+\"(?P<rdesc>.*)\"\s+lid\s+(?P<rlid>\d+)\s+(?P<link>\S+)" + _TAIL
)


def parse_ibnetdiscover(text: str) -> Fabric:
    """Parse the whole fabric. Raises :class:`ParseError` on a line that is inside a node block
    but matches no known shape (with its line number), or when no node is found at all."""
    fabric = Fabric()
    current_switch: IbSwitch | None = None
    current_ca: IbCa | None = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        if not line.strip():
            current_switch = current_ca = None
            continue
        if line.startswith("#") or "=" in line.split(None, 1)[0]:
            # comments, vendid=/devid=/sysimgguid=/switchguid=/caguid= lines, chassis comments
            continue
        if line.startswith(("Chassis ", "Hostname:", "Non-Chassis Nodes")):
            continue
        if line.startswith("Switch"):
            m = _SWITCH_HDR.match(line)
            if not m:
                raise ParseError(f"line {lineno}: unrecognised Switch header: {line!r}")
            guid = normalize_guid(m["guid"])
            current_switch = IbSwitch(guid, m["desc"], int(m["nports"]), int(m["lid"]), m["mode"] == "enhanced")
            fabric.switches[guid] = current_switch
            current_ca = None
            continue
        if line.startswith(("Ca", "Rt")):
            m = _CA_HDR.match(line)
            if not m:
                raise ParseError(f"line {lineno}: unrecognised Ca header: {line!r}")
            guid = normalize_guid(m["guid"])
            current_ca = IbCa(guid, m["desc"], int(m["nports"]), m["kind"])
            fabric.cas[guid] = current_ca
            current_switch = None
            continue
        if line.startswith("["):
            if current_switch is not None:
                m = _SWITCH_PORT.match(line)
                if not m:
                    raise ParseError(f"line {lineno}: unrecognised switch port line: {line!r}")
                sp = SwitchPort(
                    port=int(m["port"]),
                    remote_type=m["rtype"],
                    remote_guid=normalize_guid(m["rguid"]),
                    remote_port=int(m["rport"]),
                    remote_port_guid=normalize_guid(m["rpguid"]) if m["rpguid"] else "",
                    remote_desc=m["rdesc"],
                    remote_lid=int(m["rlid"]),
                    link=m["link"],
                )
                current_switch.ports[sp.port] = sp
                continue
            if current_ca is not None:
                m = _CA_PORT.match(line)
                if not m:
                    raise ParseError(f"line {lineno}: unrecognised CA port line: {line!r}")
                cp = CaPort(
                    port=int(m["port"]),
                    port_guid=normalize_guid(m["pguid"]) if m["pguid"] else "",
                    lid=int(m["lid"]),
                    lmc=int(m["lmc"]),
                    remote_type=m["rtype"],
                    remote_guid=normalize_guid(m["rguid"]),
                    remote_port=int(m["rport"]),
                    remote_desc=m["rdesc"],
                    remote_lid=int(m["rlid"]),
                    link=m["link"],
                )
                current_ca.ports[cp.port] = cp
                continue
            raise ParseError(f"line {lineno}: port line outside a Switch or Ca block: {line!r}")
        raise ParseError(f"line {lineno}: unrecognised line: {line!r}")
    if not fabric.switches and not fabric.cas:
        raise ParseError("no Switch or Ca block found: is this ibnetdiscover's default output?")
    return fabric


def fabric_switch_descriptions(fabric: Fabric) -> dict[str, str]:
    """GUID → description of every switch of the fabric: those with a ``Switch`` block, and those
    seen only as the far end of a link (a truncated scan)."""
    descs: dict[str, str] = {}
    for sw in fabric.switches.values():
        for p in sw.ports.values():
            if p.remote_type == "S":
                descs.setdefault(p.remote_guid, p.remote_desc)
    for ca in fabric.cas.values():
        for cp in ca.ports.values():
            if cp.remote_type == "S":
                descs.setdefault(cp.remote_guid, cp.remote_desc)
    for guid, sw in fabric.switches.items():
        descs[guid] = sw.desc  # a switch's own header wins over what its neighbours printed
    return descs


def switch_names(fabric: Fabric, given: Mapping[str, str] | None = None) -> dict[str, str]:
    """GUID → unique name of every switch of the fabric, by the rule of :mod:`discovery.ib.naming`.

    ``given``: normalised GUID → name (:func:`discovery.ib.naming.parse_switch_names`); entries for GUIDs not in the
    fabric are ignored.
    """
    given = given or {}
    descs = fabric_switch_descriptions(fabric)
    taken = {given[g] for g in descs if g in given}
    count = Counter(d for g, d in descs.items() if g not in given and not is_unknown_description(d))
    names: dict[str, str] = {}
    for guid, desc in descs.items():
        if guid in given:
            names[guid] = given[guid]
        elif is_unknown_description(desc):
            names[guid] = "S-" + guid[2:]
        elif count[desc] == 1 and desc not in taken:
            names[guid] = desc
        else:
            names[guid] = f"{desc} ({guid})"
    return names


@dataclass(frozen=True, slots=True)
class HcaAttachment:
    """One HCA port and the switch port it is cabled to (the leaf)."""

    ca_guid: str
    ca_desc: str
    port: int
    port_guid: str
    switch_guid: str
    switch_name: str
    switch_port: int


def attachments(fabric: Fabric, names: Mapping[str, str] | None = None) -> list[HcaAttachment]:
    """Every channel-adapter port cabled to a switch, sorted by (CA GUID, port).

    Taken from the ``Ca`` blocks, completed from the switches' port lines for adapters whose own
    block is missing (so a truncated output still yields what it shows). Routers and
    adapter-to-adapter (back-to-back) links are not attachments. ``switch_name`` is the switch's
    unique name: ``names`` (GUID → name, from :func:`switch_names`) or, without it, the
    :func:`switch_names` of the fabric with no names file.
    """
    found: dict[tuple[str, int], HcaAttachment] = {}
    unique = names if names is not None else switch_names(fabric)

    def switch_name(guid: str) -> str:
        return unique.get(guid) or "S-" + guid[2:]

    for ca in fabric.cas.values():
        if ca.kind != "Ca":
            continue
        for p in ca.ports.values():
            if p.remote_type != "S":
                continue
            found[(ca.guid, p.port)] = HcaAttachment(
                ca.guid, ca.desc, p.port, p.port_guid, p.remote_guid,
                switch_name(p.remote_guid), p.remote_port,
            )  # fmt: skip
    for sw in fabric.switches.values():
        for sp in sw.ports.values():
            if sp.remote_type != "H" or (sp.remote_guid, sp.remote_port) in found:
                continue
            remote = fabric.cas.get(sp.remote_guid)
            if remote is not None and remote.kind != "Ca":
                continue
            found[(sp.remote_guid, sp.remote_port)] = HcaAttachment(
                sp.remote_guid, remote.desc if remote is not None else sp.remote_desc, sp.remote_port,
                sp.remote_port_guid, sw.guid, switch_name(sw.guid), sp.port,
            )  # fmt: skip
    return [found[k] for k in sorted(found)]
