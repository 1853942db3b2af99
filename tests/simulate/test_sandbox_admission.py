"""The sandbox behaves like a cluster for a user's own objects (issue 21): ``kubectl create
namespace`` works, and a pod applied with the real kubectl goes through hop ① — the emulator
calls the MutatingWebhookConfiguration the sandbox registered, as kube-apiserver would."""

from __future__ import annotations

import json
import os
import re
import signal
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
KUBECTL = Path(os.environ.get("SKY_TOOLS_BIN", ROOT / ".tools" / "bin")) / "kubectl"
QUOTA = "scheduling.infini-ai.com/quota-name"

pytestmark = pytest.mark.skipif(not os.access(KUBECTL, os.X_OK), reason=f"kubectl not found at {KUBECTL}")

SCENARIO = {
    "name": "free-quotas",
    "description": "two nodes and two free one-GPU quotas of queue research, nothing submitted",
    "defaults": {"gpuModel": "A100", "gpus": 8, "rdma": 8},
    "leaves": [{"name": "s1", "nodes": ["n0", "n1"]}],
    "queues": [{"name": "research", "weight": 1}],
    "quotas": [{"name": "q-free-{i}", "count": 2, "queue": "research", "request": {"nvidia.com/gpu": 1}}],
    "steps": [{"title": "nothing submitted yet"}],
}

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "my-trainer",
        "namespace": "ml-research",
        "annotations": {"scheduling.infini-ai.com/queue-name": "research"},
    },
    "spec": {
        "schedulerName": "sky-scheduler",
        "containers": [
            {
                "name": "trainer",
                "image": "pytorch/pytorch:2",
                "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}},
            }
        ],
    },
}


def _mutate_count(metrics: str) -> float:
    total = 0.0
    for line in metrics.splitlines():
        if line.startswith("sky_webhook_requests_total{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump(SCENARIO))
    kubeconfig = tmp_path / "kc"
    args = [sys.executable, "-m", "extender.cli", "sandbox", str(scenario), "--kubeconfig-out", str(kubeconfig)]
    args += ["--webhook-ca-out", str(tmp_path / "ca.crt"), "--period", "0.2", "--ops-port", "0"]
    proc = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        while not lines or not lines[-1].startswith("try:"):
            line = proc.stdout.readline()
            assert line, "sandbox exited early:\n" + "".join(lines)
            lines.append(line)
        yield "".join(lines), kubeconfig
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_kubectl_pod_goes_through_the_webhook_in_the_sandbox(sandbox: tuple[str, Path], tmp_path: Path) -> None:
    banner, kubeconfig = sandbox
    ops = re.search(r"ops\s+(http://\S+)", banner)
    webhook = re.search(r"webhook\s+(https://\S+)", banner)
    ca = re.search(r"webhook CA\s+(\S+)", banner)
    assert ops and webhook and ca, banner
    assert Path(ca.group(1)) == tmp_path / "ca.crt"

    def kubectl(*args: str, stdin: str | None = None) -> str:
        base = [str(KUBECTL), "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp_path / "cache")]
        done = subprocess.run([*base, *args], input=stdin, capture_output=True, text=True, timeout=30, check=False)
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stdout}{done.stderr}"
        return done.stdout

    assert "sky-scheduler" in kubectl("get", "mutatingwebhookconfigurations")
    kubectl("create", "namespace", "ml-research")
    before = _mutate_count(httpx.get(ops.group(1) + "/metrics").text)

    created = json.loads(kubectl("apply", "-f", "-", "-o", "json", stdin=json.dumps(POD)))

    # the object the API returned for the CREATE already carries hop ①'s answer (not the binder's)
    assert created["metadata"]["annotations"][QUOTA] in {"q-free-0", "q-free-1"}
    assert _mutate_count(httpx.get(ops.group(1) + "/metrics").text) == before + 1
    # the CA the sandbox wrote verifies the webhook's certificate
    r = httpx.post(
        webhook.group(1) + "/mutate/pods", content=b"{}", verify=ssl.create_default_context(cafile=ca.group(1))
    )
    assert r.status_code == 400  # a review without a uid: the webhook's own answer, over verified TLS
