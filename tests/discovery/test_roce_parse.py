"""Pure RoCE parsers on captured / real-format inputs (no subprocess, no files besides fixtures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from discovery.common.model import RoceNic
from discovery.roce import parse
from discovery.roce.parse import LldpNeighbor


def _masters(path: Path) -> list[tuple[str, str, str]]:
    return [(m.master, m.plugin, m.network) for m in parse.parse_cni_file(path.read_text(), path.name)]


# ------------------------------------------------------------------ CNI configuration


def test_cni_files_in_every_accepted_shape(fixtures: Path) -> None:
    cni = fixtures / "cni"
    assert _masters(cni / "00-multus.conf") == []  # Multus delegates: calico + portmap, no master
    assert _masters(cni / "10-roce-a.conflist") == [("ens1f0", "macvlan", "roce-a")]
    assert _masters(cni / "20-roce-b.conf") == [("ens1f1", "ipvlan", "roce-b")]
    assert _masters(cni / "30-roce-bond.yaml") == [("bond0", "macvlan", "roce-bond")]  # NAD YAML, config string
    assert _masters(cni / "40-roce-lonely.json") == [("ens4f0", "ipvlan", "roce-lonely")]  # NAD JSON, conflist


def test_multus_delegates_with_a_macvlan_master_are_candidates() -> None:
    text = (
        '{"type": "multus", "name": "multus", "delegates": [{"name": "rdma", "cniVersion": "0.4.0",'
        ' "plugins": [{"type": "macvlan", "master": "enp24s0"}]}]}'
    )
    assert [(m.master, m.network) for m in parse.parse_cni_file(text, "00-multus.conf")] == [("enp24s0", "rdma")]


def test_several_nads_in_one_yaml_stream_and_in_a_list() -> None:
    text = """
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: a}
spec:
  config: '{"cniVersion": "0.3.1", "type": "macvlan", "master": "ens1"}'
---
apiVersion: v1
kind: List
items:
- apiVersion: k8s.cni.cncf.io/v1
  kind: NetworkAttachmentDefinition
  metadata: {name: b}
  spec:
    config: '{"cniVersion": "0.3.1", "plugins": [{"type": "ipvlan", "master": "ens2"}, {"type": "tuning"}]}'
- apiVersion: k8s.cni.cncf.io/v1
  kind: NetworkAttachmentDefinition
  metadata: {name: c}
  spec: {}
"""
    got = [(m.master, m.plugin, m.network) for m in parse.parse_cni_file(text, "nads.yaml")]
    assert got == [("ens1", "macvlan", "a"), ("ens2", "ipvlan", "b")]


def test_other_plugins_and_masterless_macvlan_are_not_candidates() -> None:
    text = (
        '{"cniVersion": "0.4.0", "name": "n", "plugins": ['
        '{"type": "sriov", "deviceID": "0000:3b:00.2"}, {"type": "bridge", "bridge": "br0"},'
        ' {"type": "host-device", "device": "ens9"}, {"type": "macvlan", "mode": "bridge"},'
        ' {"type": "macvlan", "master": ""}]}'
    )
    assert parse.parse_cni_file(text, "x.conflist") == []


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('{"type": "macvlan", "master": ', "invalid JSON"),
        ("a: [unclosed", "invalid YAML"),
        (
            "kind: NetworkAttachmentDefinition\nmetadata: {name: bad}\nspec:\n  config: '{not json'\n",
            "spec.config is not valid JSON",
        ),
        (
            "kind: NetworkAttachmentDefinition\nmetadata: {name: bad}\nspec:\n  config: '[1, 2]'\n",
            "spec.config is not a JSON object",
        ),
    ],
)
def test_broken_cni_files_raise_a_clear_parse_error(text: str, needle: str) -> None:
    with pytest.raises(parse.ParseError, match=needle):
        parse.parse_cni_file(text, "broken.conf")


# ------------------------------------------------------------------ LLDP json0


def test_lldp_json0_captured_from_real_lldpd(fixtures: Path) -> None:
    got = parse.parse_lldp_json0((fixtures / "lldp" / "node-four-nics.json0").read_text())
    assert [(n.interface, n.switch_name, n.port, n.is_bridge_or_router) for n in got] == [
        ("ens1f0", "leaf-a", "a-p1", True),
        ("ens1f1", "leaf-b", "b-p1", True),
        ("ens2f0", "leaf-a", "a-p2", True),
        ("ens2f1", "leaf-b", "b-p2", True),
    ]
    assert all(n.chassis_id.count(":") == 5 for n in got)  # MAC chassis ids


def test_lldp_json0_with_one_neighbour_keeps_lists(fixtures: Path) -> None:
    got = parse.parse_lldp_json0((fixtures / "lldp" / "node-one-nic.json0").read_text())
    assert [(n.interface, n.switch_name, n.port) for n in got] == [("ens1f0", "leaf-a", "a-p3")]


def test_lldp_empty_table(fixtures: Path) -> None:
    assert parse.parse_lldp_json0((fixtures / "lldp" / "empty.json0").read_text()) == []


def test_switch_without_a_system_name_is_named_by_its_chassis_id(fixtures: Path) -> None:
    (n,) = parse.parse_lldp_json0((fixtures / "lldp" / "chassis-id-only.json0").read_text())
    assert n.switch_name == n.chassis_id == "56:4a:2b:7e:1d:a2"
    assert n.port == "Ethernet1/7"  # a MAC port id is replaced by the port description


@pytest.mark.parametrize("name", ["node-four-nics.json", "node-one-nic.json"])
def test_plain_json_output_is_refused_with_a_hint_to_use_json0(fixtures: Path, name: str) -> None:
    with pytest.raises(parse.ParseError, match="json0"):
        parse.parse_lldp_json0((fixtures / "lldp" / name).read_text())


@pytest.mark.parametrize("text", ["", "not json", "[]", '{"other": 1}'])
def test_non_lldp_output_is_a_parse_error(text: str) -> None:
    with pytest.raises(parse.ParseError):
        parse.parse_lldp_json0(text)


# ------------------------------------------------------------------ rdma link


def test_rdma_link_json_of_a_roce_node(fixtures: Path) -> None:
    links = parse.parse_rdma_link((fixtures / "rdma" / "roce-node.json").read_text())
    assert [(lk.device, lk.port, lk.netdev, lk.state) for lk in links] == [
        ("mlx5_0", 1, "ens1f0", "ACTIVE"),
        ("mlx5_1", 1, "ens1f1", "ACTIVE"),
        ("mlx5_bond_0", 1, "bond0", "ACTIVE"),
        ("mlx5_4", 1, "ens4f0", "DOWN"),
    ]
    assert parse.rdma_map(links) == {"ens1f0": "mlx5_0", "ens1f1": "mlx5_1", "bond0": "mlx5_bond_0", "ens4f0": "mlx5_4"}


def test_rdma_link_json_of_an_ib_node_skips_ports_without_netdev(fixtures: Path) -> None:
    links = parse.parse_rdma_link((fixtures / "rdma" / "ib-node.json").read_text())
    assert [lk.device for lk in links] == ["mlx5_0", "mlx5_1"]
    assert parse.rdma_map(links) == {"ibp24s0": "mlx5_0"}


def test_rdma_link_errors() -> None:
    assert parse.parse_rdma_link("") == []
    with pytest.raises(parse.ParseError, match="not a JSON array"):
        parse.parse_rdma_link('{"ifname": "mlx5_0"}')
    with pytest.raises(parse.ParseError, match="not JSON"):
        parse.parse_rdma_link("link mlx5_0/1 state ACTIVE physical_state LINK_UP netdev ens1f0")


# ------------------------------------------------------------------ joining


def _nb(iface: str, switch: str, port: str = "p", bridge: bool = True) -> LldpNeighbor:
    return LldpNeighbor(iface, switch, "00:00:00:00:00:01", port, bridge)


def test_bonds_expand_into_slaves_that_take_the_bond_rdma_device() -> None:
    nics = parse.build_nics(
        masters=["bond0", "ens1f0"],
        bonds={"bond0": ["ens2f0", "ens2f1"]},
        neighbors=[_nb("ens2f0", "S1", "1"), _nb("ens2f1", "S2", "2"), _nb("ens1f0", "S1", "3")],
        rdma={"bond0": "mlx5_bond_0", "ens1f0": "mlx5_0", "ens2f1": "mlx5_3"},
    )
    assert nics == [
        RoceNic("ens1f0", "S1", "3", "mlx5_0", ""),
        RoceNic("ens2f0", "S1", "1", "mlx5_bond_0", "bond0"),
        RoceNic("ens2f1", "S2", "2", "mlx5_3", "bond0"),  # its own RDMA device wins
    ]


def test_nic_without_neighbour_is_kept_with_an_empty_switch() -> None:
    nics = parse.build_nics(["ens1", "ens1", "ens9"], {}, [_nb("ens1", "S1")], {})
    assert nics == [RoceNic("ens1", "S1", "p", "", ""), RoceNic("ens9", "", "", "", "")]


def test_a_bridge_neighbour_wins_over_a_host_seen_on_the_same_nic() -> None:
    nics = parse.build_nics(["ens1"], {}, [_nb("ens1", "some-host", bridge=False), _nb("ens1", "leaf-7")], {})
    assert nics[0].switch_name == "leaf-7"
    nics = parse.build_nics(["ens1"], {}, [_nb("ens1", "h1", bridge=False), _nb("ens1", "h2", bridge=False)], {})
    assert nics[0].switch_name == "h1"
