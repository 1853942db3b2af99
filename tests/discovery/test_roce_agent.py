"""The RoCE agent's sources and rounds on fixture files, a fake sysfs and fixture-printing commands."""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from discovery.common import proc
from discovery.common.model import NodeTopologySpec
from discovery.common.sink import MemorySink, Published
from discovery.roce import sources
from discovery.roce.agent import RoceAgent, RoceConfig, parse_command
from extender.model import topology

EXPECTED_ROCE = [
    {"name": "ens1f0", "switchName": "leaf-a", "switchPort": "a-p1", "rdmaDevice": "mlx5_0", "master": ""},
    {"name": "ens1f1", "switchName": "leaf-b", "switchPort": "b-p1", "rdmaDevice": "mlx5_1", "master": ""},
    {"name": "ens2f0", "switchName": "leaf-a", "switchPort": "a-p2", "rdmaDevice": "mlx5_bond_0", "master": "bond0"},
    {"name": "ens2f1", "switchName": "leaf-b", "switchPort": "b-p2", "rdmaDevice": "mlx5_bond_0", "master": "bond0"},
    {"name": "ens4f0", "switchName": "", "switchPort": "", "rdmaDevice": "mlx5_4", "master": ""},
]


def _cat(path: Path) -> tuple[str, ...]:
    return ("cat", str(path))


def _config(fixtures: Path, **kw: object) -> RoceConfig:
    base: dict[str, object] = {
        "node_name": "gpu-n01",
        "cni_dir": fixtures / "cni",
        "sysfs_root": fixtures / "sysfs",
        "lldpcli": _cat(fixtures / "lldp" / "node-four-nics.json0"),
        "rdma_cmd": _cat(fixtures / "rdma" / "roce-node.json"),
    }
    base.update(kw)
    return RoceConfig(**base)  # type: ignore[arg-type]


class CountingSink(MemorySink):
    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        self.fail_with: Exception | None = None
        self.on_publish: Callable[[], None] = lambda: None

    async def read(self, node: str) -> Published:
        self.reads += 1
        return await super().read(node)

    async def publish(self, node: str, spec: NodeTopologySpec, zone_label: str | None) -> bool:
        if self.fail_with is not None:
            raise self.fail_with
        changed = await super().publish(node, spec, zone_label)
        self.on_publish()
        return changed


def _messages(caplog: pytest.LogCaptureFixture, needle: str) -> list[str]:
    """Log lines containing ``needle`` (the "resolved: …" lines only when asked for)."""
    return [
        m
        for m in (r.getMessage() for r in caplog.records)
        if needle in m and (needle.startswith("resolved") or not m.startswith("resolved"))
    ]


# ------------------------------------------------------------------ sources


def test_scan_cni_dir_reads_every_supported_file(fixtures: Path) -> None:
    scan = sources.scan_cni_dir(fixtures / "cni")
    assert [m.master for m in scan.masters] == ["ens1f0", "ens1f1", "bond0", "ens4f0"]
    assert scan.bad_files == {}


def test_scan_cni_dir_skips_a_broken_file_and_reports_it(fixtures: Path, tmp_path: Path) -> None:
    shutil.copytree(fixtures / "cni", tmp_path / "cni")
    (tmp_path / "cni" / "15-broken.conf").write_text('{"type": "macvlan", ')
    (tmp_path / "cni" / "README.md").write_text("not a CNI file")
    scan = sources.scan_cni_dir(tmp_path / "cni")
    assert [m.master for m in scan.masters] == ["ens1f0", "ens1f1", "bond0", "ens4f0"]
    assert list(scan.bad_files) == ["15-broken.conf"]


def test_missing_cni_dir_is_a_source_error(tmp_path: Path) -> None:
    with pytest.raises(sources.SourceError, match="does not exist") as e:
        sources.scan_cni_dir(tmp_path / "nope")
    assert e.value.key == "cni-dir"


def test_bond_slaves_and_rdma_fallback_from_a_fake_sysfs(fixtures: Path) -> None:
    sysfs = fixtures / "sysfs"
    assert sources.bond_slaves(sysfs, "bond0") == ["ens2f0", "ens2f1"]
    assert sources.bond_slaves(sysfs, "ens1f0") is None
    links = sources.rdma_links_from_sysfs(sysfs)
    assert {(lk.device, lk.netdev) for lk in links} == {
        ("mlx5_0", "ens1f0"),
        ("mlx5_1", "ens1f1"),
        ("mlx5_bond_0", "bond0"),
    }
    assert sources.rdma_links_from_sysfs(sysfs / "nothing-here") == []


@pytest.mark.anyio
async def test_lldp_source_errors_say_what_is_missing(fixtures: Path) -> None:
    with pytest.raises(sources.SourceError, match=r"not found on PATH \(is the lldpd sidecar running\?\)"):
        await sources.lldp_neighbors(("no-such-lldpcli-xyz", "-f", "json0"), 5)
    with pytest.raises(sources.SourceError, match=r"failed \(exit 3\): boom"):
        await sources.lldp_neighbors((sys.executable, "-c", "import sys; sys.stderr.write('boom'); sys.exit(3)"), 5)
    with pytest.raises(sources.SourceError, match="json0"):
        await sources.lldp_neighbors(_cat(fixtures / "lldp" / "node-one-nic.json"), 5)


@pytest.mark.anyio
async def test_a_hanging_tool_is_killed_after_its_time_limit() -> None:
    with pytest.raises(proc.ToolTimeout, match="did not finish"):
        await proc.run_tool((sys.executable, "-c", "import time; time.sleep(60)"), 0.3)


@pytest.mark.anyio
async def test_failure_messages_drop_the_tools_own_timestamps() -> None:
    script = "import sys; sys.stderr.write('2026-11-29T19:24:23 [WARN/control] unable to connect'); sys.exit(1)"
    with pytest.raises(proc.ToolFailed) as e:
        await proc.run_tool((sys.executable, "-c", script), 5)
    assert str(e.value).endswith("failed (exit 1): unable to connect")


def test_commands_are_split_like_a_shell() -> None:
    assert parse_command("lldpcli -u '/run/a b.sock' -f json0 show neighbors") == (
        "lldpcli", "-u", "/run/a b.sock", "-f", "json0", "show", "neighbors",
    )  # fmt: skip


# ------------------------------------------------------------------ rounds


@pytest.mark.anyio
async def test_a_round_writes_the_exact_topology(fixtures: Path) -> None:
    sink = CountingSink()
    result = await RoceAgent(_config(fixtures), sink).run_once()
    assert result.discovery.complete
    assert sink.writes == ["gpu-n01"]
    assert sink.specs["gpu-n01"] == {
        "zone": "roce#leaf-a,leaf-b",
        "net": {"roce": EXPECTED_ROCE, "ib": []},
        "tiers": [{"level": 1, "name": "leaf-a,leaf-b"}],
    }
    assert sink.labels["gpu-n01"] == topology.zone_label_value(["leaf-b", "leaf-a"])


@pytest.mark.anyio
async def test_unchanged_rounds_do_not_write_nor_read_until_resync(fixtures: Path) -> None:
    sink = CountingSink()
    agent = RoceAgent(_config(fixtures, resync_rounds=3), sink)
    for _ in range(4):
        await agent.run_once()
    assert (sink.writes, sink.reads) == (["gpu-n01"], 1)
    await agent.run_once()  # 3 quiet rounds passed: re-read the API, still nothing to write
    assert (sink.writes, sink.reads) == (["gpu-n01"], 2)
    sink.specs["gpu-n01"]["net"]["roce"] = []  # someone edited the object: repaired at the next resync
    for _ in range(4):
        await agent.run_once()
    assert sink.writes == ["gpu-n01", "gpu-n01"]
    assert sink.specs["gpu-n01"]["net"]["roce"] == EXPECTED_ROCE


@pytest.mark.anyio
async def test_missing_lldpcli_is_logged_once_nothing_is_written_and_it_recovers(
    fixtures: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sink = CountingSink()
    agent = RoceAgent(_config(fixtures, lldpcli=("lldpcli-missing-xyz", "-f", "json0", "show", "neighbors")), sink)
    with caplog.at_level(logging.INFO, logger="discovery.roce"):
        for _ in range(3):
            result = await agent.run_once()
            assert result.outcome is None and not result.discovery.complete
        assert sink.writes == []
        assert _messages(caplog, "not found on PATH") == [
            "lldpcli-missing-xyz not found on PATH (is the lldpd sidecar running?) — will retry every 10s"
        ]
        assert len(_messages(caplog, "not updating NodeTopology gpu-n01")) == 1
        agent.config = _config(fixtures)  # the sidecar came up
        await agent.run_once()
    assert sink.writes == ["gpu-n01"]
    assert len(_messages(caplog, "resolved: lldpcli-missing-xyz not found")) == 1


@pytest.mark.anyio
async def test_missing_cni_dir_blocks_writing_and_is_logged_once(
    fixtures: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sink = CountingSink()
    agent = RoceAgent(_config(fixtures, cni_dir=tmp_path / "absent"), sink)
    with caplog.at_level(logging.INFO, logger="discovery.roce"):
        for _ in range(3):
            await agent.run_once()
    assert sink.writes == []
    assert len(_messages(caplog, "does not exist")) == 1


@pytest.mark.anyio
async def test_missing_rdma_tool_falls_back_to_sysfs(fixtures: Path, caplog: pytest.LogCaptureFixture) -> None:
    sink = CountingSink()
    agent = RoceAgent(_config(fixtures, rdma_cmd=("rdma-missing-xyz", "-j", "link")), sink)
    with caplog.at_level(logging.INFO, logger="discovery.roce"):
        await agent.run_once()
        await agent.run_once()
    by_name = {n["name"]: n["rdmaDevice"] for n in sink.specs["gpu-n01"]["net"]["roce"]}
    assert by_name == {
        "ens1f0": "mlx5_0",
        "ens1f1": "mlx5_1",
        "ens2f0": "mlx5_bond_0",
        "ens2f1": "mlx5_bond_0",
        "ens4f0": "",  # not in the fake sysfs
    }
    assert len(_messages(caplog, "rdma-missing-xyz not found on PATH; RDMA devices taken from")) == 1


@pytest.mark.anyio
async def test_a_nic_without_neighbour_is_logged_once_then_its_switch_when_it_appears(
    fixtures: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    table = tmp_path / "neighbors.json0"
    table.write_text((fixtures / "lldp" / "node-four-nics.json0").read_text())
    sink = CountingSink()
    agent = RoceAgent(_config(fixtures, lldpcli=_cat(table)), sink)
    with caplog.at_level(logging.INFO, logger="discovery.roce"):
        for _ in range(3):
            await agent.run_once()
        # ens4f0 gets a neighbour: a copy of ens1f0's entry under the name ens4f0
        doc = json.loads(table.read_text())
        entry = copy.deepcopy(doc["lldp"][0]["interface"][0])
        entry["name"] = "ens4f0"
        doc["lldp"][0]["interface"].append(entry)
        table.write_text(json.dumps(doc))
        await agent.run_once()
    assert _messages(caplog, "has no LLDP neighbour") == [
        "NIC ens4f0 has no LLDP neighbour yet; reported with an empty switchName"
    ]
    assert _messages(caplog, "now sees switch") == ["NIC ens4f0 now sees switch 'leaf-a' port 'a-p1'"]
    ens4 = next(n for n in sink.specs["gpu-n01"]["net"]["roce"] if n["name"] == "ens4f0")
    assert ens4["switchName"] == "leaf-a"
    assert len(sink.writes) == 2


@pytest.mark.anyio
async def test_a_failing_write_is_logged_once_and_retried(fixtures: Path, caplog: pytest.LogCaptureFixture) -> None:
    sink = CountingSink()
    sink.fail_with = ConnectionError("apiserver unreachable")
    agent = RoceAgent(_config(fixtures), sink)
    with caplog.at_level(logging.INFO, logger="discovery.roce"):
        for _ in range(3):
            result = await agent.run_once()
            assert result.error is not None
        sink.fail_with = None
        await agent.run_once()
    assert len(_messages(caplog, "cannot publish NodeTopology gpu-n01: ConnectionError: apiserver unreachable")) == 1
    assert sink.writes == ["gpu-n01"]


@pytest.mark.anyio
async def test_the_loop_stops_when_asked(fixtures: Path) -> None:
    sink = CountingSink()
    written = asyncio.Event()
    sink.on_publish = written.set
    agent = RoceAgent(_config(fixtures, period=3600), sink)
    stop = asyncio.Event()
    task = asyncio.create_task(agent.run(stop))
    await asyncio.wait_for(written.wait(), 30)
    stop.set()
    await asyncio.wait_for(task, 30)
    assert sink.writes == ["gpu-n01"]


@pytest.mark.anyio
async def test_vlan_masters_resolve_to_the_nics_they_are_stacked_on(fixtures: Path, tmp_path: Path) -> None:
    sysfs = tmp_path / "sysfs"
    shutil.copytree(fixtures / "sysfs", sysfs)
    (sysfs / "class" / "net" / "bond0" / "lower_ens2f0").touch()  # a bond lists its slaves as lower_* too
    (sysfs / "class" / "net" / "bond0" / "lower_ens2f1").touch()
    (sysfs / "class" / "net" / "bond0.100").mkdir()
    (sysfs / "class" / "net" / "bond0.100" / "lower_bond0").touch()
    (sysfs / "class" / "net" / "ens1f0.200").mkdir()
    (sysfs / "class" / "net" / "ens1f0.200" / "lower_ens1f0").touch()
    cni = tmp_path / "cni"
    cni.mkdir()
    (cni / "a.conf").write_text('{"cniVersion": "0.4.0", "type": "macvlan", "master": "bond0.100"}')
    (cni / "b.conf").write_text('{"cniVersion": "0.4.0", "type": "ipvlan", "master": "ens1f0.200"}')
    assert sources.lower_devices(sysfs, "bond0.100") == ["bond0"]
    assert sources.lower_devices(sysfs, "ens1f0") == []
    sink = CountingSink()
    await RoceAgent(_config(fixtures, cni_dir=cni, sysfs_root=sysfs), sink).run_once()
    assert [(n["name"], n["switchName"], n["master"]) for n in sink.specs["gpu-n01"]["net"]["roce"]] == [
        ("ens1f0", "leaf-a", ""),
        ("ens2f0", "leaf-a", "bond0"),
        ("ens2f1", "leaf-b", "bond0"),
    ]


@pytest.mark.anyio
async def test_without_candidates_a_missing_lldpcli_is_reported_but_does_not_block(
    fixtures: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "cni").mkdir()
    (tmp_path / "cni" / "00-calico.conflist").write_text('{"cniVersion": "0.4.0", "plugins": [{"type": "calico"}]}')
    sink = CountingSink()
    agent = RoceAgent(_config(fixtures, cni_dir=tmp_path / "cni", lldpcli=("lldpcli-missing-xyz",)), sink)
    with caplog.at_level(logging.INFO, logger="discovery.roce"):
        result = await agent.run_once()
    empty: NodeTopologySpec = {"zone": "", "net": {"roce": [], "ib": []}, "tiers": []}
    assert result.discovery.complete and sink.specs["gpu-n01"] == empty
    assert len(_messages(caplog, "lldpcli-missing-xyz not found on PATH")) == 1
    assert len(_messages(caplog, "no macvlan/ipvlan master interface")) == 1


# ------------------------------------------------------------------ heartbeat

WALL0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z


class FakeClock:
    """Monotonic seconds for the throttle, and the matching wall clock for observedAt."""

    def __init__(self) -> None:
        self.t = 0.0

    def monotonic(self) -> float:
        return self.t

    def wall(self) -> float:
        return WALL0 + self.t


def _beating_agent(
    fixtures: Path, tmp_path: Path, sink: MemorySink, clock: FakeClock, **kw: object
) -> tuple[RoceAgent, Path]:
    """An agent whose LLDP table is a file the test can rewrite."""
    table = tmp_path / "lldp.json0"
    shutil.copy(fixtures / "lldp" / "node-four-nics.json0", table)
    kw.setdefault("agent", "roce/pod-a")
    agent = RoceAgent(_config(fixtures, lldpcli=_cat(table), **kw), sink, clock=clock.monotonic, wall_clock=clock.wall)
    return agent, table


def _stamps(sink: MemorySink) -> list[tuple[str, str, str]]:
    return [(h.node, h.observed_at, h.agent) for h in sink.heartbeats]


@pytest.mark.anyio
async def test_heartbeat_first_round_then_throttled_then_after_the_interval(fixtures: Path, tmp_path: Path) -> None:
    sink, clock = MemorySink(), FakeClock()
    agent, _ = _beating_agent(fixtures, tmp_path, sink, clock, heartbeat_seconds=300, resync_rounds=2)
    result = await agent.run_once()
    assert result.heartbeat and result.outcome is not None and result.outcome.changed
    assert _stamps(sink) == [("gpu-n01", "2027-01-15T08:00:00Z", "roce/pod-a")]
    assert sink.status["gpu-n01"] == {"observedAt": "2027-01-15T08:00:00Z", "agent": "roce/pod-a"}
    for _ in range(29):  # 290 s of unchanged rounds, resyncs with the API included: no heartbeat
        clock.t += 10
        assert not (await agent.run_once()).heartbeat
    assert len(sink.heartbeats) == 1 and sink.writes == ["gpu-n01"]
    clock.t += 10  # 300 s since the last one
    result = await agent.run_once()
    assert result.heartbeat and (result.outcome is None or not result.outcome.changed)  # not a change
    assert _stamps(sink)[1:] == [("gpu-n01", "2027-01-15T08:05:00Z", "roce/pod-a")]
    assert sink.writes == ["gpu-n01"]
    clock.t += 10
    assert not (await agent.run_once()).heartbeat
    assert len(sink.heartbeats) == 2


@pytest.mark.anyio
async def test_heartbeat_at_once_when_the_spec_changes(fixtures: Path, tmp_path: Path) -> None:
    sink, clock = MemorySink(), FakeClock()
    agent, table = _beating_agent(fixtures, tmp_path, sink, clock)
    await agent.run_once()
    clock.t += 10
    await agent.run_once()
    assert len(sink.heartbeats) == 1
    shutil.copy(fixtures / "lldp" / "node-one-nic.json0", table)  # cables changed: a new spec
    clock.t += 10
    result = await agent.run_once()
    assert result.outcome is not None and result.outcome.changed and result.heartbeat
    assert sink.writes == ["gpu-n01", "gpu-n01"]
    assert _stamps(sink)[1:] == [("gpu-n01", "2027-01-15T08:00:20Z", "roce/pod-a")]
    clock.t += 10
    assert not (await agent.run_once()).heartbeat  # and the interval restarts from there


@pytest.mark.anyio
async def test_heartbeat_seconds_zero_never_writes_one(fixtures: Path, tmp_path: Path) -> None:
    sink, clock = MemorySink(), FakeClock()
    agent, table = _beating_agent(fixtures, tmp_path, sink, clock, heartbeat_seconds=0)
    for step in range(40):
        if step == 20:
            shutil.copy(fixtures / "lldp" / "node-one-nic.json0", table)
        await agent.run_once()
        clock.t += 60
    assert sink.writes == ["gpu-n01", "gpu-n01"] and sink.heartbeats == []


@pytest.mark.anyio
async def test_no_heartbeat_while_the_inputs_are_incomplete(fixtures: Path, tmp_path: Path) -> None:
    sink, clock = MemorySink(), FakeClock()
    agent, _ = _beating_agent(fixtures, tmp_path, sink, clock, cni_dir=tmp_path / "no-such-dir")
    for _ in range(3):
        result = await agent.run_once()
        clock.t += 600
    assert not result.heartbeat and sink.heartbeats == [] and sink.writes == []


class FailingHeartbeatSink(MemorySink):
    def __init__(self) -> None:
        super().__init__()
        self.fail_with: Exception | None = ConnectionError("apiserver unreachable")
        self.attempts = 0

    async def heartbeat(self, node: str, observed_at: str, agent: str) -> bool:
        self.attempts += 1
        if self.fail_with is not None:
            raise self.fail_with
        return await super().heartbeat(node, observed_at, agent)


@pytest.mark.anyio
async def test_a_failing_heartbeat_is_logged_once_retried_and_not_a_change(
    fixtures: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sink, clock = FailingHeartbeatSink(), FakeClock()
    agent, _ = _beating_agent(fixtures, tmp_path, sink, clock)
    with caplog.at_level(logging.INFO, logger="discovery.roce"):
        first = await agent.run_once()
        assert first.error is None and first.outcome is not None and first.outcome.changed
        assert not first.heartbeat
        for _ in range(3):  # retried every round (not only after the interval), still a quiet round
            clock.t += 10
            result = await agent.run_once()
            assert (result.error, result.outcome, result.heartbeat) == (None, None, False)
        assert sink.attempts == 4 and sink.writes == ["gpu-n01"]
        sink.fail_with = None
        clock.t += 10
        assert (await agent.run_once()).heartbeat
    failed = _messages(caplog, "cannot write the heartbeat (status) of NodeTopology gpu-n01")
    assert failed == [
        "cannot write the heartbeat (status) of NodeTopology gpu-n01: ConnectionError: apiserver unreachable"
        " — will retry every 10s"
    ]
    assert len(_messages(caplog, "resolved: cannot write the heartbeat")) == 1
    assert _stamps(sink) == [("gpu-n01", "2027-01-15T08:00:40Z", "roce/pod-a")]


@pytest.mark.anyio
async def test_a_heartbeat_for_a_deleted_object_is_skipped_and_the_object_published_again(
    fixtures: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sink, clock = MemorySink(), FakeClock()
    agent, _ = _beating_agent(fixtures, tmp_path, sink, clock)
    await agent.run_once()
    del sink.specs["gpu-n01"]  # someone deleted the NodeTopology
    clock.t += 300
    with caplog.at_level(logging.WARNING, logger="discovery.roce"):
        result = await agent.run_once()  # unchanged locally: no read, the heartbeat finds no object
        assert not result.heartbeat and result.error is None
        assert len(sink.heartbeats) == 1
        clock.t += 10
        result = await agent.run_once()  # published again, and its heartbeat at once
    assert result.outcome is not None and result.outcome.changed and result.heartbeat
    assert sink.writes == ["gpu-n01", "gpu-n01"] and len(sink.heartbeats) == 2
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and "gpu-n01" in r.getMessage()]  # quietly


def test_the_default_identity_is_the_pod_name_else_the_hostname(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    from discovery.common.heartbeat import agent_identity

    monkeypatch.setenv("POD_NAME", "sky-scheduler-roce-x7k2q")
    assert RoceAgent(RoceConfig(node_name="n"), MemorySink()).heartbeats.agent == "roce/sky-scheduler-roce-x7k2q"
    assert agent_identity("ib", "collector-a") == "ib/collector-a"
    monkeypatch.delenv("POD_NAME")
    assert agent_identity("roce") == f"roce/{socket.gethostname()}"
