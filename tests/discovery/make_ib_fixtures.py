"""Write the ibnetdiscover fixtures in tests/fixtures/discovery/ib/.

No InfiniBand fabric is reachable from CI, so the fabrics are described here and printed with the
exact format strings of rdma-core ``infiniband-diags/ibnetdiscover.c`` (``out_ids``, ``out_switch``,
``out_switch_detail``, ``out_switch_port``, ``out_ca``, ``out_ca_detail``, ``out_ca_port``,
``dump_topology``): tabs, ``"S-%016x"`` node names, un-padded GUIDs in parentheses, a trailing
space after ``(guid)``, width+speed glued (``4xHDR``), ``??``/``???`` for unknown width/speed.

Run ``python tests/discovery/make_ib_fixtures.py`` after changing a fabric; the files are committed.

Fabric ``fat-tree``: a two-level fat tree of Quantum HDR switches (40 ports, printed as 41 with
port 0): spines spine-01/02, leaves leaf-01..04; every leaf has one uplink to each spine; leaf-04
has no HCA. Hosts: gpu-n01 has two HCAs on different leaves; gpu-n04 uses the old ``HCA-1``
description; gpu-n05 has a dual-port HCA; gpu-n99 is not a Kubernetes node; one HCA's description
and link speed are unknown (``???``). Fabric ``fat-tree-moved``: the same with gpu-n02's cable
moved from leaf-01 port 2 to leaf-02 port 3.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

OUT = Path(__file__).parent.parent / "fixtures" / "discovery" / "ib"


@dataclass
class Sw:
    guid: int
    desc: str
    lid: int
    nports: int = 41
    links: dict[int, tuple[str, int, int]] = field(default_factory=dict)  # port → (kind, guid, rport)


@dataclass
class Hca:
    guid: int
    desc: str
    lids: dict[int, int]  # port → lid
    nports: int = 1
    links: dict[int, tuple[int, int]] = field(default_factory=dict)  # port → (switch guid, switch port)
    link_text: str = "4xHDR"


def node_name(kind: str, guid: int) -> str:
    return f'"{kind}-{guid:016x}"'


def port_guid(h: Hca, port: int) -> int:
    return h.guid + (port - 1)


def build(moved: bool) -> tuple[list[Sw], list[Hca]]:
    spine1 = Sw(0xB8599F0300FC7A00, "MF0;spine-01:MQM8700/U1", 1)
    spine2 = Sw(0xB8599F0300FC7B00, "Quantum Mellanox Technologies", 2)  # unmanaged: default description
    leaves = [
        Sw(0xB8599F0300FC6D00, "MF0;leaf-01:MQM8700/U1", 3),
        Sw(0xB8599F0300FC6E00, "MF0;leaf-02:MQM8700/U1", 4),
        Sw(0xB8599F0300FC6F00, "MF0;leaf-03:MQM8700/U1", 5),
        Sw(0xB8599F0300FC7000, "MF0;leaf-04:MQM8700/U1", 6),  # no HCA on it
    ]
    for i, leaf in enumerate(leaves, start=1):
        leaf.links[39] = ("S", spine1.guid, i)
        leaf.links[40] = ("S", spine2.guid, i)
        spine1.links[i] = ("S", leaf.guid, 39)
        spine2.links[i] = ("S", leaf.guid, 40)
    l1, l2, l3, _ = leaves
    hcas = [
        Hca(0x0C42A10300A1B200, "gpu-n01 mlx5_0", {1: 10}, links={1: (l1.guid, 1)}),
        Hca(0x0C42A10300A1B210, "gpu-n01 mlx5_1", {1: 11}, links={1: (l2.guid, 1)}),
        Hca(0x0C42A10300A1B300, "gpu-n02 mlx5_0", {1: 12}, links={1: (l2.guid, 3) if moved else (l1.guid, 2)}),
        Hca(0x0C42A10300A1B400, "gpu-n03 mlx5_0", {1: 13}, links={1: (l1.guid, 3)}),
        Hca(0x0C42A10300A1B500, "gpu-n04 HCA-1", {1: 14}, links={1: (l2.guid, 2)}),
        Hca(0x1070FD0300176A4C, "gpu-n05 mlx5_0", {1: 15, 2: 16}, nports=2, links={1: (l3.guid, 1), 2: (l3.guid, 2)}),
        Hca(0x1070FD0300177000, "gpu-n99 mlx5_0", {1: 17}, links={1: (l3.guid, 3)}),
        Hca(0x1070FD0300178000, "???", {1: 18}, links={1: (l3.guid, 4)}, link_text="4x???"),
    ]
    by_guid = {s.guid: s for s in [spine1, spine2, *leaves]}
    for h in hcas:
        for port, (sguid, sport) in h.links.items():
            by_guid[sguid].links[sport] = ("H", h.guid, port)
    return [spine1, spine2, *leaves], hcas


def render(switches: list[Sw], hcas: list[Hca]) -> str:
    sw_by = {s.guid: s for s in switches}
    hca_by = {h.guid: h for h in hcas}
    first = hcas[0]
    out = [
        "#\n# Topology file: generated on Sat Nov 29 19:00:00 2026\n#\n",
        f"# Initiated from node {first.guid:016x} port {port_guid(first, 1):016x}\n",
    ]
    for s in switches:
        out.append(f"\nvendid=0x2c9\ndevid=0xcf08\nsysimgguid=0x{s.guid:x}\n")
        out.append(f"switchguid=0x{s.guid:x}(0x{s.guid:x})\n".replace("(0x", "("))
        out.append(f'Switch\t{s.nports} {node_name("S", s.guid)}\t\t# "{s.desc}" enhanced port 0 lid {s.lid} lmc 0\n')
        for port in sorted(s.links):
            kind, rguid, rport = s.links[port]
            line = f"[{port}]\t{node_name(kind, rguid)}[{rport}]"
            if kind == "S":
                remote = sw_by[rguid]
                line += f'\t\t# "{remote.desc}" lid {remote.lid} 4xHDR\n'
            else:
                h = hca_by[rguid]
                line += f'({port_guid(h, rport):x}) \t\t# "{h.desc}" lid {h.lids[rport]} {h.link_text}\n'
            out.append(line)
    for h in hcas:
        out.append(f"\nvendid=0x2c9\ndevid=0x101b\nsysimgguid=0x{h.guid:x}\ncaguid=0x{h.guid:x}\n")
        out.append(f'Ca\t{h.nports} {node_name("H", h.guid)}\t\t# "{h.desc}"\n')
        for port in sorted(h.links):
            sguid, sport = h.links[port]
            s = sw_by[sguid]
            out.append(
                f"[{port}]({port_guid(h, port):x}) \t{node_name('S', sguid)}[{sport}]"
                f'\t\t# lid {h.lids[port]} lmc 0 "{s.desc}" lid {s.lid} {h.link_text}\n'
            )
    return "".join(out)


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "fat-tree.txt").write_text(render(*build(moved=False)))
    (OUT / "fat-tree-moved.txt").write_text(render(*build(moved=True)))
    print(f"written to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
