"""Unique switch names and the tiers above the leaves, on fabrics whose switches all carry the
factory description (real ``ibnetdiscover`` format), and on random three-tier fat trees."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from discovery.ib import naming, parse, tiers

Q = "Quantum Mellanox Technologies"
CORE1, CORE2 = "0x0c42a10301b00001", "0x0c42a10301b00002"
SPINE_A, SPINE_B = "0x0c42a10301b00003", "0x0c42a10301b00005"
A1, A2, B1, B2, B3 = (f"0x0c42a10301b0000{c}" for c in "789ab")


def q(guid: str) -> str:
    return f"{Q} ({guid})"


@pytest.fixture
def three_tier(fixtures: Path) -> parse.Fabric:
    return parse.parse_ibnetdiscover((fixtures / "ib" / "fat-tree-3tier.txt").read_text())


@pytest.fixture
def edr(fixtures: Path) -> parse.Fabric:
    return parse.parse_ibnetdiscover((fixtures / "ib" / "edr-2level.txt").read_text())


def _leaves_by_host(fabric: parse.Fabric, names: dict[str, str] | None = None) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for a in parse.attachments(fabric, names):
        out.setdefault(a.ca_desc.split()[0], set()).add(a.switch_name)
    return out


def test_identical_descriptions_get_the_guid_so_every_leaf_is_its_own(three_tier: parse.Fabric) -> None:
    names = parse.switch_names(three_tier)
    assert len(names) == 11 and len(set(names.values())) == 11
    assert all(names[g] == q(g) for g in names)
    hosts = _leaves_by_host(three_tier)
    assert hosts["gpu-a01"] == hosts["gpu-a02"] == hosts["gpu-a03"] == {q(A1)}
    assert hosts["gpu-a04"] == {q(A2)} and hosts["gpu-b04"] == hosts["stor-01"] == {q(B2)}
    assert hosts["gpu-d01"] == {q(A1), q(A2)}  # dual-rail: both leaves
    assert hosts["gpu-x01"] == {q(A2), q(B1)}
    assert hosts["???"] == {q(B2)}


def test_edr_fat_tree_gives_four_leaves_of_24_hosts(edr: parse.Fabric) -> None:
    hosts = _leaves_by_host(edr)
    assert len(hosts) == 96 and all(len(v) == 1 for v in hosts.values())
    per_leaf = Counter(next(iter(v)) for v in hosts.values())
    assert sorted(per_leaf.values()) == [24, 24, 24, 24]
    assert all(name.startswith("SwitchIB Mellanox Technologies (0x7cfe900300b1e2") for name in per_leaf)


def test_a_unique_description_is_kept_and_a_given_name_wins(three_tier: parse.Fabric) -> None:
    given = naming.parse_switch_names(f"{A1}: leaf-a1\n'0c42a10301b00008': {Q}\n0x99: not-in-fabric\n")
    names = parse.switch_names(three_tier, given)
    assert names[A1] == "leaf-a1"
    assert names[A2] == Q  # the operator gave this one the factory description: it is its name now
    assert names[B1] == q(B1)  # and the others keep their GUID, so it stays unique
    assert "0x0000000000000099" not in names


def test_the_first_fat_tree_keeps_its_descriptions(fixtures: Path) -> None:
    fabric = parse.parse_ibnetdiscover((fixtures / "ib" / "fat-tree.txt").read_text())
    assert parse.switch_names(fabric)["0xb8599f0300fc7b00"] == Q  # the only unrenamed switch: unique


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", {}),
        ("# none yet\n", {}),
        ("0x0c42a10301b00001: leaf-1\n", {CORE1: "leaf-1"}),
        ('{"0C42A10301B00001": " leaf-1 ", "0x2": "s2"}', {CORE1: "leaf-1", "0x0000000000000002": "s2"}),
        ("0000000000000010: ten\n", {"0x0000000000000010": "ten"}),  # digits only: still a GUID, not octal
    ],
)
def test_switch_names_file_is_yaml_or_json(text: str, expected: dict[str, str]) -> None:
    assert naming.parse_switch_names(text) == expected


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("- a\n- b\n", "expected a mapping"),
        ("leaf-1: 0x1\n", "'leaf-1' is not a switch GUID"),
        ("0x1: ''\n", "non-empty string"),
        ("0x1: [a, b]\n", "non-empty string"),
        ("0x1: a\n0x01: b\n", "named twice"),
        ("0x1: a\n0x2: a\n", "given to two switches"),
        ("0x1: [a\n", "not YAML or JSON"),
    ],
)
def test_a_bad_switch_names_file_is_a_clear_error(text: str, needle: str) -> None:
    with pytest.raises(naming.SwitchNamesError, match=needle):
        naming.parse_switch_names(text, "names.yaml")


def test_unreadable_switch_names_file(tmp_path: Path) -> None:
    with pytest.raises(naming.SwitchNamesError, match="cannot read switch names file"):
        naming.load_switch_names(tmp_path / "missing.yaml")


def test_three_tier_pods_are_spine_groups_and_the_cores_join_them(three_tier: parse.Fabric) -> None:
    names = parse.switch_names(three_tier)
    t = tiers.fabric_tiers(three_tier, names)
    assert t.depth == 3
    assert {g for g, lv in t.level.items() if lv == 3} == {CORE1, CORE2}
    assert B3 not in t.level  # a leaf without HCAs under one pod's spines is no tier of its own
    pod_a, pod_b, cores = q(SPINE_A) + "+1", q(SPINE_B) + "+1", q(CORE1) + "+1"
    assert t.unit[2] == {A1: pod_a, A2: pod_a, B1: pod_b, B2: pod_b}
    assert t.unit[3] == dict.fromkeys([A1, A2, B1, B2], cores)
    assert tiers.node_tiers(t, [A1]) == [(2, pod_a), (3, cores)]
    assert tiers.node_tiers(t, [A1, A2]) == [(2, pod_a), (3, cores)]  # dual-rail in one pod
    assert tiers.node_tiers(t, [A2, B1]) == [(2, f"{pod_a},{pod_b}"), (3, cores)]  # across the pods


def test_two_level_trees_have_one_spine_group(edr: parse.Fabric, fixtures: Path) -> None:
    t = tiers.fabric_tiers(edr, parse.switch_names(edr))
    assert t.depth == 2 and set(t.unit[2].values()) == {"SwitchIB Mellanox Technologies (0x7cfe900300b1e100)+1"}
    fat = parse.parse_ibnetdiscover((fixtures / "ib" / "fat-tree.txt").read_text())
    t = tiers.fabric_tiers(fat, parse.switch_names(fat))
    assert t.depth == 2  # leaf-04 (no HCA) hangs off the spine group only: not a third tier
    assert set(t.unit[2].values()) == {"MF0;spine-01:MQM8700/U1+1"}


def test_a_fabric_of_one_leaf_has_no_upper_tier() -> None:
    text = (
        'Switch\t37 "S-0000000000000001"\t\t# "leaf" enhanced port 0 lid 3 lmc 0\n'
        '[1]\t"H-00000000000000a0"[1](a0) \t\t# "gpu-x mlx5_0" lid 4 4xEDR\n'
        '[2]\t"S-0000000000000002"[1]\t\t# "spine" lid 5 4xEDR\n'
    )
    fabric = parse.parse_ibnetdiscover(text)
    t = tiers.fabric_tiers(fabric, parse.switch_names(fabric))
    assert t.depth == 1 and t.unit == {} and tiers.node_tiers(t, ["0x0000000000000001"]) == []


def _clos(pods: list[tuple[int, int]], cores: int) -> parse.Fabric:
    """A three-tier Clos: pods of (leaves, spines), every leaf to every spine of its pod, every
    core to every spine; one HCA per leaf. GUIDs: 0x1PPLL leaves, 0x2PPSS spines, 0x3CC cores."""
    fabric = parse.Fabric()

    def switch(guid: int) -> parse.IbSwitch:
        g = parse.normalize_guid(f"{guid:x}")
        return fabric.switches.setdefault(g, parse.IbSwitch(g, Q, 41, 1, True))

    def link(a: parse.IbSwitch, b: parse.IbSwitch) -> None:
        pa, pb = len(a.ports) + 1, len(b.ports) + 1
        a.ports[pa] = parse.SwitchPort(pa, "S", b.guid, pb, "", Q, 1, "4xHDR")
        b.ports[pb] = parse.SwitchPort(pb, "S", a.guid, pa, "", Q, 1, "4xHDR")

    for p, (n_leaves, n_spines) in enumerate(pods):
        spines = [switch(0x20000 + p * 0x100 + s) for s in range(n_spines)]
        for lf in range(n_leaves):
            leaf = switch(0x10000 + p * 0x100 + lf)
            hca = parse.normalize_guid(f"{0x90000 + p * 0x100 + lf:x}")
            leaf.ports[40] = parse.SwitchPort(40, "H", hca, 1, hca, f"h{p}-{lf} mlx5_0", 2, "4xHDR")
            for spine in spines:
                link(leaf, spine)
        for c in range(cores):
            for spine in spines:
                link(switch(0x30000 + c), spine)
    return fabric


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 4), st.integers(1, 3)), min_size=1, max_size=4),
    st.integers(0, 3),
)
def test_random_clos_leaves_share_the_spine_tier_exactly_within_a_pod(pods: list[tuple[int, int]], cores: int) -> None:
    fabric = _clos(pods, cores)
    t = tiers.fabric_tiers(fabric, parse.switch_names(fabric))
    leaves = {g: int(g[-4:-2], 16) for g in fabric.leaf_guids()}  # leaf GUID → its pod
    multi_leaf = {p for p, (n, _) in enumerate(pods) if n >= 2}
    spine_units = t.unit.get(2, {})
    # a pod of two leaves or more is one spine group; a one-leaf pod's spines join nothing
    assert {leaves[g] for g in spine_units} == multi_leaf
    for a in spine_units:
        for b in spine_units:
            assert (spine_units[a] == spine_units[b]) == (leaves[a] == leaves[b])
    # the cores join the pods into one unit when they join two pods or more
    core_units = t.unit.get(3, {})
    if cores and len(multi_leaf) >= 2:
        assert set(core_units) == set(spine_units) and len(set(core_units.values())) == 1
    else:
        assert core_units == {}
