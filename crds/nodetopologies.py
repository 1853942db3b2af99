"""The NodeTopology CRD: which RDMA switch each RDMA NIC of a node is cabled to, written by discovery."""

from __future__ import annotations

from crds.definition import AGE, column, crd, root
from crds.openapi import Schema, integer, map_list, obj, string, timestamp


def _roce_interface() -> Schema:
    """One entry of spec.net.roce: a RoCE interface and the switch port it is cabled to."""
    return obj(
        "A RoCE network interface and the switch it is cabled to.",
        {
            "name": string("Interface name of the netdev, e.g. enp24s0f0.", minLength=1),
            "switchName": string(
                "Neighbour switch from LLDP: its system (chassis) name, or the chassis ID when the switch "
                "announces no name. Empty while no LLDP neighbour has been seen."
            ),
            "switchPort": string("Switch port the interface is cabled to (LLDP port ID), e.g. Ethernet1/1."),
            "rdmaDevice": string("RDMA device backing the netdev (from rdma link), e.g. mlx5_1."),
            "master": string("Bond the interface is enslaved to, e.g. bond0; empty when it is not a bond slave."),
        },
        required=["name"],
    )


def _ib_port() -> Schema:
    """One entry of spec.net.ib: an InfiniBand HCA port and its leaf switch."""
    return obj(
        "An InfiniBand HCA port and the leaf switch it is cabled to.",
        {
            "name": string("HCA name, e.g. mlx5_0.", minLength=1),
            "port": integer("HCA port number, from 1.", minimum=1, default=1),
            "guid": string("Port GUID, e.g. 0x1070fd0300123456."),
            "switchName": string(
                "Unique name of the leaf switch the port is cabled to: the name given for its GUID in "
                "the collector's --switch-names file, else its node description when no other switch "
                'of the fabric has it (e.g. "MF0;ib-leaf-1:MQM8700/U1"), else the description followed '
                'by the GUID (e.g. "Quantum Mellanox Technologies (0x0c42a10301b00001)").'
            ),
            "switchGuid": string("GUID of that switch (its identity in the fabric)."),
            "rdmaDevice": string("RDMA device name on the node (usually equal to name)."),
        },
        required=["name"],
    )


def _tier() -> Schema:
    """One entry of spec.tiers: the unit of one tier of the fabric the node is in."""
    return obj(
        "The unit of one tier of the fabric the node is in.",
        {
            "level": integer(
                "Tier: 1 = leaf (the switches the node's RDMA NICs are cabled to), 2 = spine or spine group, "
                "3 = core, and so on outwards.",
                minimum=1,
            ),
            "name": string(
                "Name of the unit, the same on every node in it: at level 1 the node's leaf switch names "
                "joined by commas; above, the unit's switch with the smallest name, with +N when the unit "
                "has N more switches (a spine group), or the names of the several units a multi-rail "
                "node is in, joined by commas.",
                minLength=1,
            ),
        },
        required=["level", "name"],
    )


def _spec() -> Schema:
    """spec: the node's zone key, its RDMA NICs with their switches, and its tiers of the fabric."""
    return obj(
        "Discovered topology of the node. Written by the discovery agents, only when it changed.",
        {
            "zone": string(
                "Zone key generated from the switch names: prefix roce# or ib# and the sorted distinct "
                "switch names, e.g. roce#S1,S2. Informational: the scheduler derives the key itself, and the "
                "node annotation scheduling.infini-ai.com/rdma-topology-key and the node label zone take "
                "precedence."
            ),
            "net": obj(
                "RDMA NICs of the node and the switches they are cabled to.",
                {
                    "roce": map_list(
                        "RoCE NICs found by the RoCE agent on the node (Multus macvlan masters, bonds "
                        "expanded into their slaves), one entry per interface.",
                        _roce_interface(),
                        ["name"],
                    ),
                    "ib": map_list(
                        "InfiniBand HCA ports found by the InfiniBand collector (ibnetdiscover), one entry "
                        "per HCA port.",
                        _ib_port(),
                        ["name", "port"],
                    ),
                },
            ),
            "tiers": map_list(
                "The node's place in the fabric, from the leaf outwards, one entry per tier, in level "
                "order. InfiniBand: worked out by the collector from the switch-to-switch links; RoCE: "
                "level 1 from LLDP, the levels above from the agent's fabric map. The scheduler reads it "
                "below the node annotations scheduling.infini-ai.com/tier-N and above the topology labels.",
                _tier(),
                ["level"],
            ),
        },
    )


def _status() -> Schema:
    """status: the heartbeat of the discovery agent."""
    return obj(
        "Heartbeat of the agent that last looked at the node. Written by discovery through the status "
        "subresource; not used for scheduling.",
        {
            "observedAt": timestamp("When the agent last checked the node, whether or not spec changed."),
            "agent": string("Agent that reported, e.g. the discovery pod name."),
        },
    )


def nodetopology_crd() -> Schema:
    schema = root(
        "NodeTopology",
        "NodeTopology records which RDMA switch each RDMA NIC of a node is cabled to (seed 3.2). One "
        "object per node, named after the node. Written by the discovery agents (RoCE DaemonSet, "
        "InfiniBand collector); read by the scheduler to group nodes into RDMA zones. Cluster-scoped.",
        _spec(),
        _status(),
        spec_required=False,
    )
    return crd(
        kind="NodeTopology",
        plural="nodetopologies",
        short_names=["ntopo"],
        scope="Cluster",
        schema=schema,
        columns=[
            column("ZONE", ".spec.zone", "string", "Generated zone key of the node."),
            column("LEAF", ".spec.tiers[?(@.level==1)].name", "string", "The node's leaf switch(es) (tier 1)."),
            column("SPINE", ".spec.tiers[?(@.level==2)].name", "string", "The node's spine or spine group (tier 2)."),
            AGE,
            column(
                "LAST-SEEN",
                ".status.observedAt",
                "date",
                "Time since a discovery agent last checked the node (its heartbeat).",
                priority=1,
            ),
        ],
    )
