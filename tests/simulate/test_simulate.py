"""The embedded default and every example scenario, through the real CLI (issue 7)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import httpx
import pytest

from extender.simulate.scenario import ScenarioError, load_scenario
from extender.simulate.scenario_objects import cluster_objects
from tests.cli_process import run_cli

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "examples" / "scenarios").glob("*.yaml"))


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, timeout=timeout, cwd=ROOT)


def test_default_scenario_json() -> None:
    r = _cli("simulate", "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert set(doc) >= {"quotas", "pods", "jobs"}
    step1 = doc["steps"][0]["quotas"]
    # the seed's example: q-train-0..3 on N0..N3 in rank order (node names are lowercase in Kubernetes)
    assert [step1[f"q-train-{i}"] for i in range(4)] == ["n0", "n1", "n2", "n3"]
    # the drift: q-train-1's pod found on n4 → the quota follows it
    assert doc["steps"][1]["quotas"]["q-train-1"] == "n4"
    assert doc["quotas"]["q-train-1"] == "n4"
    assert doc["pods"]["default/train-worker-1"] == "n4"
    # the second job: three whole nodes, all on leaf s2, in rank order after n4
    assert doc["jobs"]["default/llama"] == {"leaves": ["s2"], "nodes": ["n5", "n6", "n7"]}
    assert doc["jobs"]["default/train"]["nodes"] == ["n0", "n4", "n2", "n3"]


def test_default_scenario_text_and_svg(tmp_path: Path) -> None:
    svg = tmp_path / "placement.svg"
    r = _cli("simulate", "--svg", str(svg))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "$ kubectl" not in out  # the tables have columns kubectl would not print: no kubectl headings
    # the seed-2.7 observation table: quota bound at hop ②, pod running at hop ③
    row = next(line for line in out.splitlines() if line.strip().startswith("q-train-0"))
    assert re.search(r"QuotaEmpty\s+QuotaBound n0\s+QuotaBound n0", row)
    pod = next(line for line in out.splitlines() if line.strip().startswith("train-worker-0"))
    assert "Pending (quota on n0)" in pod and "Running n0" in pod
    assert "[1/3]" in r.stderr  # progress
    root = ET.fromstring(svg.read_text())
    gpu_cells = [e for e in root.iter() if e.tag.endswith("rect") and e.get("class") == "gpu"]
    assert len(gpu_cells) == 3 * 8 * 8  # one panel per step, 8 nodes × 8 GPUs each
    coloured = [c for c in gpu_cells[-64:] if c.get("fill") not in ("#fff", "#ffffff")]
    assert len(coloured) == 4 * 1 + 3 * 8  # the last step: train 4 × 1 GPU, llama 3 × 8 GPUs


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_every_example_scenario_runs_clean(path: Path) -> None:
    r = _cli("simulate", str(path), "--check", "--quiet")
    assert r.returncode == 0, f"{path.name}:\n{r.stderr}\n{r.stdout[-2000:]}"
    assert load_scenario(str(path)).expect is not None, "every example states what it must end with"


@pytest.mark.parametrize(
    ("scenario", "old", "new", "said"),
    [
        ("seed-8-node", "q-train-1: n4", "q-train-1: n1", "quota q-train-1: expected on n1, found n4"),
        # expect.reasons reads kube-scheduler's FailedScheduling message of the job's pending pods
        (
            "storage-not-ready",
            "needs-fs2: StorageNotReady",
            "needs-fs2: NoZoneFits",
            "job default/needs-fs2: expected every pending pod's reason to contain 'NoZoneFits', found "
            "{'default/needs-fs2-worker-0': '0/3 nodes are available: 2 StorageNotReady(",
        ),
        # the launcher counts: without it the MPIJob would take s1, the leaf with 4 free nodes
        (
            "mpijob-launcher",
            "default/mpi: [s2]",
            "default/mpi: [s1]",
            "job default/mpi: expected leaves ['s1'], found ['s2']",
        ),
        (
            "mpijob-launcher",
            "q-wide-launcher: n7",
            "q-wide-launcher: n20",
            "quota q-wide-launcher: expected on n20, found n7",
        ),
    ],
)
def test_check_fails_when_the_outcome_differs(tmp_path: Path, scenario: str, old: str, new: str, said: str) -> None:
    text = (ROOT / "examples" / "scenarios" / f"{scenario}.yaml").read_text()
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(text.replace(old, new))
    r = _cli("simulate", str(wrong), "--check", "--quiet")
    assert r.returncode == 1
    assert said in r.stderr


def test_the_readme_table_lists_every_example_scenario() -> None:
    """``examples/scenarios/README.md`` has a line per file, and no line for a file that is not there."""
    readme = (ROOT / "examples" / "scenarios" / "README.md").read_text(encoding="utf-8")
    listed = re.findall(r"^\| `([\w.-]+\.yaml)`", readme, flags=re.MULTILINE)
    assert sorted(listed) == sorted(p.name for p in SCENARIOS)


def test_mount_points_become_the_storage_daemons_node_conditions() -> None:
    scenario = load_scenario(str(ROOT / "examples" / "scenarios" / "storage-not-ready.yaml"))
    nodes = {o["metadata"]["name"]: o for o in cluster_objects(scenario) if o["kind"] == "Node"}
    conditions = {n: {c["type"]: c["status"] for c in o["status"]["conditions"]} for n, o in nodes.items()}
    assert conditions == {
        "n0": {"Ready": "True", "infiniai-fs-fs1": "False"},
        "n1": {"Ready": "True", "infiniai-fs-fs1": "True"},
        "n2": {"Ready": "True"},
    }


def test_bad_scenarios_are_clear_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: x\nleaves: [{name: s1, nodes: [n0]}]\n"
        "steps: [{jobs: [{name: j, request: {nvidia.com/gpu: '8 GPUs'}}]}]\n"
    )
    with pytest.raises(ScenarioError, match="8 GPUs"):
        load_scenario(str(bad))
    r = _cli("simulate", str(tmp_path / "missing.yaml"))
    assert r.returncode == 2 and "cannot read scenario" in r.stderr
    r = _cli("simulate", "no-such-embedded-scenario")
    assert r.returncode == 2 and "seed-8-node" in r.stderr


@pytest.mark.anyio
async def test_sandbox_answers_a_filter_call_and_a_kubernetes_asyncio_list(tmp_path: Path) -> None:
    from kubernetes_asyncio import client, config

    kubeconfig = tmp_path / "kc"
    proc = subprocess.Popen(  # noqa: ASYNC220 (a long-running child; the loop only waits on HTTP)
        [
            sys.executable,
            "-m",
            "extender.cli",
            "sandbox",
            "--kubeconfig-out",
            str(kubeconfig),
            "--webhook-ca-out",
            str(tmp_path / "ca.crt"),
            "--period",
            "0.2",
            "--ops-port",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        lines: list[str] = []
        assert proc.stdout is not None
        while True:
            line = proc.stdout.readline()
            assert line, "sandbox exited early:\n" + "".join(lines)
            lines.append(line)
            if line.startswith("try:"):
                break
        text = "".join(lines)
        extender = re.search(r"extender\s+(http://\S+)", text)
        assert extender is not None, text
        # a kubernetes-asyncio list through the written kubeconfig
        cfg = client.Configuration()
        await config.load_kube_config(config_file=str(kubeconfig), client_configuration=cfg)
        async with client.ApiClient(cfg) as api:
            custom = client.CustomObjectsApi(api)
            quotas = await custom.list_cluster_custom_object("scheduling.infini-ai.com", "v1alpha1", "quotas")
            assert {q["metadata"]["name"] for q in quotas["items"]} >= {f"q-train-{i}" for i in range(4)}
            pods = await client.CoreV1Api(api).list_namespaced_pod("default")
            assert pods.items
        # a filter call, as kube-scheduler makes it
        pod = pods.items[0]
        body = {
            "Pod": {
                "metadata": {"name": pod.metadata.name, "namespace": "default", "uid": pod.metadata.uid},
                "spec": {"schedulerName": "sky-scheduler"},
            },
            "Nodes": None,
            "NodeNames": [f"n{i}" for i in range(8)],
        }
        async with httpx.AsyncClient() as c:
            r = await c.post(extender.group(1) + "/filter", json=body)
        assert r.status_code == 200
        reply = r.json()
        assert set(reply) == {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}
        assert reply["Error"] == ""
        failures = len(reply["FailedNodes"]) + len(reply["FailedAndUnresolvableNodes"])
        # the lean reply: reasons only when no node passes, then one for every candidate
        assert failures == (0 if reply["NodeNames"] else 8)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_the_seed_scenario_runs_the_same_on_amd_gpus(tmp_path: Path) -> None:
    """Every nvidia.com/gpu of the seed scenario as amd.com/gpu (nodes advertise it, serve runs
    with --gpu-resources amd.com/gpu): the same placements, the same expectations met."""
    text = (ROOT / "examples" / "scenarios" / "seed-8-node.yaml").read_text()
    amd = text.replace("nvidia.com/gpu:", "amd.com/gpu:").replace(
        "defaults:\n", "defaults:\n  gpuResource: amd.com/gpu\n"
    )
    assert "nvidia.com/gpu:" not in amd and amd.count("amd.com/gpu") >= 4
    path = tmp_path / "seed-amd.yaml"
    path.write_text(amd)
    scenario = load_scenario(str(path))
    objs = cluster_objects(scenario)
    nodes = [o for o in objs if o["kind"] == "Node"]
    assert all(n["status"]["allocatable"].get("amd.com/gpu") == "8" for n in nodes)
    assert not any("nvidia.com/gpu" in n["status"]["allocatable"] for n in nodes)
    r = _cli("simulate", str(path), "--check", "--quiet", "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    final = doc["steps"][-1]["quotas"]
    assert final["q-llama-0"] == "n5" and final["q-train-1"] == "n4"
