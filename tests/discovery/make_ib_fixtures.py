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

Fabric ``fat-tree-3tier``: a three-tier fat tree of unrenamed Quantum switches, every one of them
described ``Quantum Mellanox Technologies``: two pods (spine groups) A and B of two spines each,
leaves A1, A2 under pod A and B1, B2, B3 under pod B (every leaf cabled to both spines of its pod),
two cores cabled to all four spines. gpu-a01..03 on A1, gpu-a04/05 on A2, gpu-b01..03 on B1,
gpu-b04 on B2; gpu-d01 is dual-rail (A1 and A2, one pod), gpu-x01 dual-rail across the pods (A2
and B1); stor-01 (storage, not a Kubernetes node) on B2; an HCA with an unknown description
(``???``) on B2; leaf B3 has no HCA.

Fabric ``edr-2level``: a two-level EDR fat tree of SwitchIB switches (36 ports, printed as 37),
all described ``SwitchIB Mellanox Technologies``: 4 leaves with 24 hosts each (node001..096, one
ConnectX-4 ``mlx5_0`` each) on ports 1–24, ports 25–30 cabled to spine 1 and 31–36 to spine 2.
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


QUANTUM = "Quantum Mellanox Technologies"
SWITCHIB = "SwitchIB Mellanox Technologies"


def cable(a: Sw, a_port: int, b: Sw, b_port: int) -> None:
    a.links[a_port] = ("S", b.guid, b_port)
    b.links[b_port] = ("S", a.guid, a_port)


def attach(switches: list[Sw], hcas: list[Hca]) -> None:
    by_guid = {s.guid: s for s in switches}
    for h in hcas:
        for port, (sguid, sport) in h.links.items():
            by_guid[sguid].links[sport] = ("H", h.guid, port)


def build_three_tier() -> tuple[list[Sw], list[Hca]]:
    """Two pods of two spines, two cores; every switch has the factory description."""
    guid = iter(range(0x0C42A10301B00001, 0x0C42A10301B00100))
    lid = iter(range(1, 1000))
    cores = [Sw(next(guid), QUANTUM, next(lid)) for _ in range(2)]
    spines = {pod: [Sw(next(guid), QUANTUM, next(lid)) for _ in range(2)] for pod in "AB"}
    leaves = {name: Sw(next(guid), QUANTUM, next(lid)) for name in ("A1", "A2", "B1", "B2", "B3")}
    for c_i, core in enumerate(cores):
        for s_i, spine in enumerate([*spines["A"], *spines["B"]]):
            cable(core, 1 + s_i, spine, 39 + c_i)
    for name, leaf in leaves.items():
        pod_spines = spines[name[0]]
        index = int(name[1])
        for s_i, spine in enumerate(pod_spines):
            cable(leaf, 39 + s_i, spine, index)
    hca_guid = iter(range(0x248A070300A10000, 0x248A070300A20000, 0x10))
    host_lid = iter(range(100, 1000))

    def hca(desc: str, *on: tuple[str, int], link_text: str = "4xHDR") -> Hca:
        return Hca(next(hca_guid), desc, {1: next(host_lid)}, links={1: (leaves[on[0][0]].guid, on[0][1])},
                   link_text=link_text)  # fmt: skip

    hcas = [
        hca("gpu-a01 mlx5_0", ("A1", 1)),
        hca("gpu-a02 mlx5_0", ("A1", 2)),
        hca("gpu-a03 mlx5_0", ("A1", 3)),
        hca("gpu-a04 mlx5_0", ("A2", 1)),
        hca("gpu-a05 mlx5_0", ("A2", 2)),
        hca("gpu-b01 mlx5_0", ("B1", 1)),
        hca("gpu-b02 mlx5_0", ("B1", 2)),
        hca("gpu-b03 mlx5_0", ("B1", 3)),
        hca("gpu-b04 mlx5_0", ("B2", 1)),
        hca("gpu-d01 mlx5_0", ("A1", 4)),
        hca("gpu-d01 mlx5_1", ("A2", 4)),
        hca("gpu-x01 mlx5_0", ("A2", 5)),
        hca("gpu-x01 mlx5_1", ("B1", 5)),
        hca("stor-01 mlx5_0", ("B2", 2)),
        hca("???", ("B2", 3), link_text="4x???"),
    ]
    switches = [*cores, *spines["A"], *spines["B"], *leaves.values()]
    attach(switches, hcas)
    return switches, hcas


def build_edr() -> tuple[list[Sw], list[Hca]]:
    """4 leaves x 24 hosts, 2 spines, SwitchIB EDR, all with the factory description."""
    spines = [Sw(0x7CFE900300B1E100 + i, SWITCHIB, 1 + i, nports=37) for i in range(2)]
    leaves = [Sw(0x7CFE900300B1E200 + i, SWITCHIB, 3 + i, nports=37) for i in range(4)]
    for l_i, leaf in enumerate(leaves):
        for k in range(6):
            cable(leaf, 25 + k, spines[0], 1 + l_i * 6 + k)
            cable(leaf, 31 + k, spines[1], 1 + l_i * 6 + k)
    hcas = []
    for n in range(96):
        leaf = leaves[n // 24]
        hcas.append(
            Hca(
                0xE41D2D0300F00000 + n * 0x10,
                f"node{n + 1:03d} mlx5_0",
                {1: 10 + n},
                links={1: (leaf.guid, 1 + n % 24)},
                link_text="4xEDR",
            )
        )
    attach([*spines, *leaves], hcas)
    return [*spines, *leaves], hcas


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


def render(
    switches: list[Sw], hcas: list[Hca], switch_link: str = "4xHDR", devids: tuple[str, str] = ("0xcf08", "0x101b")
) -> str:
    sw_by = {s.guid: s for s in switches}
    hca_by = {h.guid: h for h in hcas}
    first = hcas[0]
    out = [
        "#\n# Topology file: generated on Sat Nov 29 19:00:00 2026\n#\n",
        f"# Initiated from node {first.guid:016x} port {port_guid(first, 1):016x}\n",
    ]
    for s in switches:
        out.append(f"\nvendid=0x2c9\ndevid={devids[0]}\nsysimgguid=0x{s.guid:x}\n")
        out.append(f"switchguid=0x{s.guid:x}(0x{s.guid:x})\n".replace("(0x", "("))
        out.append(f'Switch\t{s.nports} {node_name("S", s.guid)}\t\t# "{s.desc}" enhanced port 0 lid {s.lid} lmc 0\n')
        for port in sorted(s.links):
            kind, rguid, rport = s.links[port]
            line = f"[{port}]\t{node_name(kind, rguid)}[{rport}]"
            if kind == "S":
                remote = sw_by[rguid]
                line += f'\t\t# "{remote.desc}" lid {remote.lid} {switch_link}\n'
            else:
                h = hca_by[rguid]
                line += f'({port_guid(h, rport):x}) \t\t# "{h.desc}" lid {h.lids[rport]} {h.link_text}\n'
            out.append(line)
    for h in hcas:
        out.append(f"\nvendid=0x2c9\ndevid={devids[1]}\nsysimgguid=0x{h.guid:x}\ncaguid=0x{h.guid:x}\n")
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
    (OUT / "fat-tree-3tier.txt").write_text(render(*build_three_tier()))
    (OUT / "edr-2level.txt").write_text(render(*build_edr(), switch_link="4xEDR", devids=("0xcb20", "0x1013")))
    print(f"written to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
