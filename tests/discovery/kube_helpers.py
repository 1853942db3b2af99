"""Helpers of the end-to-end tests against the Kubernetes API emulator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from extender import wellknown
from extender.emulator import Emulator
from extender.model import topology

REPO = Path(__file__).parent.parent.parent
CRD = REPO / "crds" / "scheduling.infini-ai.com_nodetopologies.yaml"


def node_obj(name: str, hostname: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {wellknown.LABEL_HOSTNAME: hostname or name}},
    }


WRITE_VERBS = frozenset({"create", "update", "patch", "delete"})


def writes(emu: Emulator) -> list[tuple[str, str, str]]:
    """(verb, resource[/subresource], name) of every write the emulator answered."""
    return [
        (r.verb, r.resource + (f"/{r.subresource}" if r.subresource else ""), r.name)
        for r in emu.journal.records()
        if r.verb in WRITE_VERBS
    ]


HEARTBEAT = ("update", f"{wellknown.NODETOPOLOGIES}/status")
"""(verb, resource) of a heartbeat write."""


def spec_writes(emu: Emulator) -> list[tuple[str, str, str]]:
    """The writes that are not heartbeats: NodeTopology objects and labels."""
    return [w for w in writes(emu) if w[:2] != HEARTBEAT]


def as_the_binder_leaves_it(node: dict[str, Any], topo: dict[str, Any] | None) -> dict[str, Any]:
    """The Node with its NodeTopology's ``zone`` label copied on, as the binder leader writes it
    (``extender.binder.loop``; tested in tests/binder/test_loop_emulator.py): no agent writes a Node."""
    zone = ((topo or {}).get("metadata") or {}).get("labels", {}).get(wellknown.LABEL_ZONE)
    labels = {k: v for k, v in ((node.get("metadata") or {}).get("labels") or {}).items() if k != wellknown.LABEL_ZONE}
    if zone:
        labels[wellknown.LABEL_ZONE] = zone
    return {**node, "metadata": {**(node.get("metadata") or {}), "labels": labels}}


def heartbeat_writes(emu: Emulator) -> list[str]:
    """The node of each heartbeat write, in order."""
    return [name for *call, name in writes(emu) if tuple(call) == HEARTBEAT]


async def read_back(kubeconfig: Path, nodes: list[str]) -> dict[str, tuple[dict[str, Any] | None, dict[str, str]]]:
    """Each node's NodeTopology (None if absent) and labels, read with kubernetes-asyncio."""
    from kubernetes_asyncio import client as k8s
    from kubernetes_asyncio import config as k8s_config
    from kubernetes_asyncio.client.exceptions import ApiException

    cfg = k8s.Configuration()
    await k8s_config.load_kube_config(config_file=str(kubeconfig), client_configuration=cfg)
    out: dict[str, tuple[dict[str, Any] | None, dict[str, str]]] = {}
    async with k8s.ApiClient(cfg) as api:
        custom, core = k8s.CustomObjectsApi(api), k8s.CoreV1Api(api)
        for name in nodes:
            try:
                obj = await custom.get_cluster_custom_object(
                    wellknown.GROUP, wellknown.VERSION, wellknown.NODETOPOLOGIES, name
                )
            except ApiException as e:
                if e.status != 404:
                    raise
                obj = None
            node = await core.read_node(name)
            out[name] = (obj, dict(node.metadata.labels or {}))
    return out


def zone_keys(state: dict[str, tuple[dict[str, Any] | None, dict[str, str]]]) -> dict[str, str | None]:
    """The scheduler's zone key of each node, from the written objects and labels."""
    keys: dict[str, str | None] = {}
    for name, (obj, labels) in state.items():
        net = (obj or {}).get("spec", {}).get("net", {})
        keys[name] = topology.node_zone_key(
            {},
            labels,
            roce_switches=[n.get("switchName", "") for n in net.get("roce", [])],
            ib_switches=[p.get("switchName", "") for p in net.get("ib", [])],
        )
    return keys


def groups(keys: dict[str, str | None]) -> list[list[str]]:
    by_key: dict[str | None, list[str]] = {}
    for name, key in sorted(keys.items()):
        by_key.setdefault(key, []).append(name)
    return sorted(by_key.values())
