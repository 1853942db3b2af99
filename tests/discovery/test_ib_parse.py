"""The ibnetdiscover parser on fabrics in its real default output format."""

from __future__ import annotations

from pathlib import Path

import pytest

from discovery.ib import parse

LEAF1 = "MF0;leaf-01:MQM8700/U1"
LEAF2 = "MF0;leaf-02:MQM8700/U1"
LEAF3 = "MF0;leaf-03:MQM8700/U1"


@pytest.fixture
def fabric(fixtures: Path) -> parse.Fabric:
    return parse.parse_ibnetdiscover((fixtures / "ib" / "fat-tree.txt").read_text())


def test_whole_fat_tree_is_parsed(fabric: parse.Fabric) -> None:
    assert sorted(s.name for s in fabric.switches.values()) == [
        LEAF1, LEAF2, LEAF3, "MF0;leaf-04:MQM8700/U1", "MF0;spine-01:MQM8700/U1", "Quantum Mellanox Technologies",
    ]  # fmt: skip
    spine1 = fabric.switches["0xb8599f0300fc7a00"]
    assert (spine1.nports, spine1.lid, spine1.enhanced) == (41, 1, True)
    assert sorted(spine1.ports) == [1, 2, 3, 4]
    assert len(fabric.cas) == 8
    n05 = fabric.cas["0x1070fd0300176a4c"]
    assert (n05.desc, n05.nports, sorted(n05.ports)) == ("gpu-n05 mlx5_0", 2, [1, 2])


def test_switch_to_switch_links_are_listed_once(fabric: parse.Fabric) -> None:
    links = fabric.switch_links()
    assert len(links) == 8  # 4 leaves x 2 spines
    assert ("0xb8599f0300fc6d00", 39, "0xb8599f0300fc7a00", 1) in links


def test_leaves_are_the_switches_with_hcas(fabric: parse.Fabric) -> None:
    names = {fabric.switches[g].name for g in fabric.leaf_guids()}
    assert names == {LEAF1, LEAF2, LEAF3}  # leaf-04 has no HCA; spines have none


def test_every_hca_port_is_attached_to_its_leaf(fabric: parse.Fabric) -> None:
    atts = {(a.ca_desc, a.port): (a.switch_name, a.switch_port, a.port_guid) for a in parse.attachments(fabric)}
    assert atts == {
        ("gpu-n01 mlx5_0", 1): (LEAF1, 1, "0x0c42a10300a1b200"),
        ("gpu-n01 mlx5_1", 1): (LEAF2, 1, "0x0c42a10300a1b210"),
        ("gpu-n02 mlx5_0", 1): (LEAF1, 2, "0x0c42a10300a1b300"),
        ("gpu-n03 mlx5_0", 1): (LEAF1, 3, "0x0c42a10300a1b400"),
        ("gpu-n04 HCA-1", 1): (LEAF2, 2, "0x0c42a10300a1b500"),
        ("gpu-n05 mlx5_0", 1): (LEAF3, 1, "0x1070fd0300176a4c"),
        ("gpu-n05 mlx5_0", 2): (LEAF3, 2, "0x1070fd0300176a4d"),
        ("gpu-n99 mlx5_0", 1): (LEAF3, 3, "0x1070fd0300177000"),
        ("???", 1): (LEAF3, 4, "0x1070fd0300178000"),
    }


def test_unknown_description_and_speed_placeholders(fabric: parse.Fabric) -> None:
    unknown = fabric.cas["0x1070fd0300178000"]
    assert parse.is_unknown_description(unknown.desc)
    assert unknown.ports[1].link == "4x???"
    leaf3 = fabric.switches["0xb8599f0300fc6f00"]
    assert (leaf3.ports[4].remote_desc, leaf3.ports[4].remote_lid, leaf3.ports[4].link) == ("???", 18, "4x???")
    assert leaf3.ports[1].remote_port_guid == "0x1070fd0300176a4c"
    assert leaf3.ports[39].remote_port_guid == ""  # a switch remote has no port GUID printed


def test_moved_cable_changes_the_leaf(fixtures: Path) -> None:
    moved = parse.parse_ibnetdiscover((fixtures / "ib" / "fat-tree-moved.txt").read_text())
    (n02,) = [a for a in parse.attachments(moved) if a.ca_desc == "gpu-n02 mlx5_0"]
    assert (n02.switch_name, n02.switch_port) == (LEAF2, 3)


def test_grouping_full_info_router_and_back_to_back_forms() -> None:
    text = (
        "#\n# Topology file: generated on Mon Jan  1 00:00:00 2024\n#\n"
        "# Initiated from node 0002c90300000001 port 0002c90300000002\n\n"
        "Chassis 1 (guid 0x2c9010a0c0000)\n\n# Line Nodes\n"
        "vendid=0x2c9\ndevid=0xbd36\nsysimgguid=0x2c9020040bc03\t\t# Chassis 1\n"
        "switchguid=0x2c9020040bc00(2c9020040bc00)\t# ISR9288/ISR9096 Voltaire sLB-24D Line 1\n"
        'Switch\t24 "S-0002c9020040bc00"\t\t# "ISR9288 Voltaire sLB-24 spine 1 chip 1" base port 0 lid 5 lmc 0\n'
        '[1][ext 1]\t"H-0002c90300000001"[1](2c90300000002) \t\t# "node a HCA-1" lid 7 4xQDR s=4 w=2 v=4\n'
        '[2][ext 2]\t"R-0002c90300000009"[1](2c9030000000a) \t\t# "router one" lid 9 4xQDR\n\n'
        "Non-Chassis Nodes\n\n"
        "vendid=0x2c9\ndevid=0x1003\nsysimgguid=0x2c90300000001\ncaguid=0x2c90300000001\n"
        'Ca\t2 "H-0002c90300000001"\t\t# "node a HCA-1"\n'
        '[1](2c90300000002) \t"S-0002c9020040bc00"[1][ext 1]\t\t# lid 7 lmc 0 "ISR9288 Voltaire sLB-24 spine 1 chip 1"'
        " lid 5 4xQDR s=4 w=2 v=4\n"
        '[2](2c90300000003) \t"H-0002c90300000005"[1] (2c90300000006) \t\t# lid 8 lmc 0 "node b HCA-1" lid 11 4xFDR\n\n'
        "vendid=0x2c9\ndevid=0x1003\nsysimgguid=0x2c90300000009\ncaguid=0x2c90300000009\n"
        'Rt\t1 "R-0002c90300000009"\t\t# "router one"\n'
        '[1](2c9030000000a) \t"S-0002c9020040bc00"[2]\t\t# lid 9 lmc 0 "ISR9288 Voltaire sLB-24 spine 1 chip 1"'
        " lid 5 4xQDR\n"
    )
    fab = parse.parse_ibnetdiscover(text)
    sw = fab.switches["0x0002c9020040bc00"]
    assert (sw.enhanced, sw.ports[1].remote_desc, sw.ports[1].link) == (False, "node a HCA-1", "4xQDR")
    ca = fab.cas["0x0002c90300000001"]
    assert ca.ports[2].remote_type == "H" and ca.ports[1].remote_port == 1
    assert fab.cas["0x0002c90300000009"].kind == "Rt"
    atts = parse.attachments(fab)
    # the router and the back-to-back HCA link are not leaf attachments
    assert [(a.ca_desc, a.port, a.switch_name) for a in atts] == [
        ("node a HCA-1", 1, "ISR9288 Voltaire sLB-24 spine 1 chip 1")
    ]


def test_switch_blocks_alone_still_give_attachments() -> None:
    text = (
        "switchguid=0x1(1)\n"
        'Switch\t37 "S-0000000000000001"\t\t# "leaf with spaces in name" enhanced port 0 lid 3 lmc 0\n'
        '[5]\t"H-00000000000000a0"[1](a0) \t\t# "gpu-x HCA-1" lid 4 4xEDR\n'
    )
    (a,) = parse.attachments(parse.parse_ibnetdiscover(text))
    assert (a.ca_guid, a.ca_desc, a.port_guid, a.switch_name, a.switch_port) == (
        "0x00000000000000a0", "gpu-x HCA-1", "0x00000000000000a0", "leaf with spaces in name", 5,
    )  # fmt: skip


def test_a_switch_with_unknown_description_is_named_by_its_guid() -> None:
    text = (
        'Switch\t37 "S-00000000000000ff"\t\t# "???" enhanced port 0 lid 3 lmc 0\n'
        '[1]\t"H-00000000000000a0"[1](a0) \t\t# "gpu-x mlx5_0" lid 4 4xEDR\n'
    )
    (a,) = parse.attachments(parse.parse_ibnetdiscover(text))
    assert a.switch_name == "S-00000000000000ff"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "no Switch or Ca block"),
        ("# only comments\n", "no Switch or Ca block"),
        ('Switch\t37 "S-01"\t\t# "x"\n', "line 1: unrecognised Switch header"),
        ('Switch\t37 "S-01"\t\t# "x" enhanced port 0 lid 3 lmc 0\n[1] garbage\n', "line 2: unrecognised switch port"),
        ('[1]\t"S-01"[1]\t\t# "x" lid 3 4xHDR\n', "outside a Switch or Ca block"),
        ("what is this\n", "unrecognised line"),
    ],
)
def test_malformed_input_raises_with_the_line(text: str, needle: str) -> None:
    with pytest.raises(parse.ParseError, match=needle):
        parse.parse_ibnetdiscover(text)


def test_guids_are_normalised() -> None:
    assert parse.normalize_guid("c42a10300a1b200") == "0x0c42a10300a1b200"
    assert parse.normalize_guid("0xB8599F0300FC6D00") == "0xb8599f0300fc6d00"
    with pytest.raises(parse.ParseError):
        parse.normalize_guid("0x12345678901234567")
