"""KubeWriter against the emulator: NodeTopology spec and status (its own write, skipped for a
missing object, conflicts given up without an Event) and node labels."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from extender import wellknown
from extender.emulator import Emulator
from extender.kube.errors import (
    NotFound,
    WriteConflict,
)

from .writes import writer

pytestmark = pytest.mark.anyio


async def test_apply_node_topology(emu: Emulator, api: Any) -> None:
    name = f"node-{uuid.uuid4().hex[:6]}"
    spec = {"net": {"roce": [{"name": "eth0", "switchName": "leaf1"}]}}
    w = writer(api)
    obj, changed = await w.apply_node_topology(name, spec, labels={"zone": "abc"})
    assert changed and obj["spec"] == spec and obj["metadata"]["labels"] == {"zone": "abc"}
    rv = emu.resource_version
    obj, changed = await w.apply_node_topology(name, spec, labels={"zone": "abc"})
    assert not changed and emu.resource_version == rv
    spec2 = {"net": {"roce": [{"name": "eth0", "switchName": "leaf2"}]}}
    emu.faults.add("update", "nodetopologies", code=409, count=1)
    obj, changed = await w.apply_node_topology(name, spec2)
    assert changed and obj["spec"] == spec2 and obj["metadata"]["labels"] == {"zone": "abc"}


async def test_node_topology_status_is_its_own_write_and_a_missing_object_is_skipped(emu: Emulator, api: Any) -> None:
    name = f"node-{uuid.uuid4().hex[:6]}"
    w = writer(api)
    assert await w.update_node_topology_status(name, {"observedAt": "2027-01-15T08:00:00Z"}) is None  # no object
    spec = {"net": {"roce": [{"name": "eth0", "switchName": "leaf1"}]}}
    await w.apply_node_topology(name, spec)
    emu.journal.clear()
    beat = {"observedAt": "2027-01-15T08:00:00Z", "agent": "roce/pod-a"}
    out = await w.update_node_topology_status(name, beat)
    assert out is not None and out["status"] == beat and out["spec"] == spec
    assert [(r.verb, r.resource, r.subresource) for r in emu.journal.records()] == [
        ("get", wellknown.NODETOPOLOGIES, ""),
        ("update", wellknown.NODETOPOLOGIES, "status"),
    ]
    stored = emu.get(wellknown.API_VERSION, wellknown.NODETOPOLOGIES, name)
    assert stored["status"] == beat and stored["spec"] == spec
    # the same heartbeat again (a retry): nothing written
    emu.journal.clear()
    await w.update_node_topology_status(name, beat)
    assert [r.verb for r in emu.journal.records()] == ["get"]
    # a conflict is re-read and re-applied; other status fields are kept
    emu.update({**stored, "status": {**beat, "other": "x"}}, subresource="status")
    emu.faults.add("update", "nodetopologies/status", code=409, count=1)
    out = await w.update_node_topology_status(name, {"observedAt": "2027-01-15T08:05:00Z"})
    assert out is not None and out["status"] == {
        "observedAt": "2027-01-15T08:05:00Z",
        "agent": "roce/pod-a",
        "other": "x",
    }
    # and a spec update does not touch it
    await w.apply_node_topology(name, {"net": {}})
    assert emu.get(wellknown.API_VERSION, wellknown.NODETOPOLOGIES, name)["status"] == out["status"]


async def test_node_topology_status_conflicts_give_up_without_an_event(emu: Emulator, api: Any) -> None:
    name = f"node-{uuid.uuid4().hex[:6]}"
    w = writer(api, retries=3)
    await w.apply_node_topology(name, {"net": {}})
    emu.faults.add("update", "nodetopologies/status", code=409)
    with pytest.raises(WriteConflict):
        await w.update_node_topology_status(name, {"observedAt": "2027-01-15T08:00:00Z"})
    assert not [r for r in emu.journal.records() if r.resource == "events"]  # the agents may not post Events


async def test_patch_node_labels(emu: Emulator, api: Any) -> None:
    name = f"node-{uuid.uuid4().hex[:6]}"
    emu.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"old": "x"}}})
    out = await writer(api).patch_node_labels(name, {wellknown.LABEL_ZONE: "0123abcd", "old": None})
    assert out["metadata"]["labels"] == {wellknown.LABEL_ZONE: "0123abcd"}
    with pytest.raises(NotFound):
        await writer(api).patch_node_labels("no-such-node", {"a": "b"})
