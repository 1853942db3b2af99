"""Statuses the binder leader keeps, read back with the official kubectl from the emulator
after a scenario settles: every printer column of every CRD shows a value."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from extender.simulate.runner import Simulation
from extender.simulate.scenario import load_scenario
from tests.kubectl import needs_kubectl, run_kubectl

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[2]


def _rows(table: str) -> list[dict[str, str]]:
    """``kubectl get -o wide`` output → one dict per row (columns split at the header's offsets)."""
    lines = [line for line in table.splitlines() if line.strip()]
    header = lines[0]
    names = header.split()
    starts = []  # header names are unique and in order: search each from the previous one
    pos = 0
    for n in names:
        pos = header.index(n, pos)
        starts.append(pos)
        pos += len(n)
    rows = []
    for line in lines[1:]:
        cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], len(line) + 1], strict=True)]
        rows.append(dict(zip(names, cells, strict=True)))
    return rows


async def _settled(name: str) -> Simulation:
    sim = Simulation(load_scenario(name))
    await sim.start()
    await sim.run()
    for _ in range(3):
        await sim.round()
    return sim


@needs_kubectl
async def test_every_printer_column_shows_a_value_after_the_default_scenario(tmp_path: Path) -> None:
    sim = await _settled("seed-8-node")
    try:
        kc = sim.emulator.write_kubeconfig(tmp_path / "kc")
        for kind, want in (("skypg", 2), ("skyq", 1), ("quota", 7)):
            out = await asyncio.to_thread(run_kubectl, kc, tmp_path / "cache", "get", kind, "-A", "-o", "wide")
            rows = _rows(out)
            assert len(rows) == want, out
            for row in rows:
                empty = [col for col, cell in row.items() if col != "NAMESPACE" and cell in ("", "<none>")]
                assert not empty, f"{kind}: empty columns {empty} in\n{out}"
        pgs = {
            r["NAME"]: r
            for r in _rows(await asyncio.to_thread(run_kubectl, kc, tmp_path / "c", "get", "skypg", "-o", "wide"))
        }
        assert {n: (r["PHASE"], r["RUNNING"], r["BOUNDQUOTAS"]) for n, r in pgs.items()} == {
            "train": ("Running", "4", "4"),
            "llama": ("Running", "3", "3"),
        }
        (queue,) = _rows(await asyncio.to_thread(run_kubectl, kc, tmp_path / "c", "get", "skyq", "-o", "wide"))
        assert (queue["RUNNING"], queue["PENDING"]) == ("2", "0")
        research = sim.emulator.get("scheduling.infini-ai.com/v1alpha1", "queues", "research")["status"]
        # 4 × 1 GPU + 3 × 8 GPU, all on A100 nodes
        assert research["allocated"]["nvidia.com/gpu"] == "28"
        assert [spec["nvidia.com/gpu"] for spec in research["specAllocated"].values()] == ["28"]
        # settled: a further cycle writes no status at all
        loop = sim.cluster.rt.loop
        assert loop is not None
        before = loop.statuses.writes
        await sim.round()
        assert loop.statuses.writes == before
    finally:
        await sim.stop()


@needs_kubectl
async def test_jobqueue_and_blocked_job_columns(tmp_path: Path) -> None:
    sim = await _settled("jobqueue")
    try:
        kc = sim.emulator.write_kubeconfig(tmp_path / "kc")
        (jq,) = _rows(await asyncio.to_thread(run_kubectl, kc, tmp_path / "c", "get", "jq", "-o", "wide"))
        assert (jq["STATE"], jq["RUNNING"]) == ("Closed", "0")
        status = sim.emulator.get("scheduling.infini-ai.com/v1alpha1", "jobqueues", "nightly")["status"]
        # batch (2 workers) and lone (one pod: JobQueue admission holds on the inline path too)
        assert (status["runningJobs"], status["pendingJobs"], status["blockedJobs"]) == (0, 0, 2)
        pgs = {
            r["NAME"]: r
            for r in _rows(await asyncio.to_thread(run_kubectl, kc, tmp_path / "c", "get", "skypg", "-o", "wide"))
        }
        assert pgs["batch"]["PHASE"] == "Pending" and pgs["interactive"]["PHASE"] == "Running"
        for row in pgs.values():
            assert all(cell not in ("", "<none>") for cell in row.values()), row
        batch = sim.emulator.get("scheduling.infini-ai.com/v1alpha1", "podgroups", "batch", "default")["status"]
        (cond,) = batch["conditions"]
        assert (cond["status"], cond["reason"]) == ("True", "JobBlockedByJobQueue")
    finally:
        await sim.stop()


@needs_kubectl
async def test_the_gpus_column_shows_amd_gpus_in_the_seed_scenario_on_amd(tmp_path: Path) -> None:
    """The seed scenario with every nvidia.com/gpu as amd.com/gpu (serve --gpu-resources
    amd.com/gpu): `kubectl get quota` fills the GPUS column from status.gpus for every quota."""
    text = (REPO / "examples" / "scenarios" / "seed-8-node.yaml").read_text(encoding="utf-8")
    amd = text.replace("nvidia.com/gpu:", "amd.com/gpu:").replace(
        "defaults:\n", "defaults:\n  gpuResource: amd.com/gpu\n"
    )
    assert "nvidia.com/gpu:" not in amd
    path = tmp_path / "seed-amd.yaml"
    path.write_text(amd, encoding="utf-8")
    sim = await _settled(str(path))
    try:
        kc = sim.emulator.write_kubeconfig(tmp_path / "kc")
        out = await asyncio.to_thread(run_kubectl, kc, tmp_path / "cache", "get", "quota")
        rows = {r["NAME"]: r for r in _rows(out)}
        assert len(rows) == 7, out
        gpus = {name: row["GPUS"] for name, row in rows.items()}
        # 4 training quotas of 1 GPU, 3 llama quotas of 8 (the seed's jobs)
        assert sorted(gpus.values()) == ["1 amd.com/gpu"] * 4 + ["8 amd.com/gpu"] * 3, out
        assert all(row["PHASE"] == "QuotaBound" for row in rows.values()), out
        # a quota's request edited: the next cycle rewrites the column
        name = next(n for n, g in gpus.items() if g == "1 amd.com/gpu")
        quota = sim.emulator.get("scheduling.infini-ai.com/v1alpha1", "quotas", name)
        patch = {"spec": {"request": {**quota["spec"]["request"], "amd.com/gpu": "2"}}}
        await asyncio.to_thread(
            run_kubectl, kc, tmp_path / "cache", "patch", "quota", name, "--type=merge", "-p", json.dumps(patch)
        )
        for _ in range(3):
            await sim.round()
        out = await asyncio.to_thread(run_kubectl, kc, tmp_path / "cache", "get", "quota", name)
        assert _rows(out)[0]["GPUS"] == "2 amd.com/gpu", out
    finally:
        await sim.stop()
