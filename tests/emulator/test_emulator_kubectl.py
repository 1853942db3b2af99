"""The official kubectl v1.32 against the emulator: apply, get with printer columns, get -w.

kubectl is looked up in ``$SKY_TOOLS_BIN`` (default ``<repo>/.tools/bin``; CI fetches it with
``tests/tools/get-k8s-tools.sh .tools``). Each command gets a fresh ``--cache-dir``.
"""

from __future__ import annotations

import os
import queue
import subprocess
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from extender.emulator import Emulator
from tests.emulator.builders import widget_crd

REPO = Path(__file__).resolve().parents[2]
KUBECTL = Path(os.environ.get("SKY_TOOLS_BIN", REPO / ".tools" / "bin")) / "kubectl"

pytestmark = pytest.mark.skipif(
    not os.access(KUBECTL, os.X_OK),
    reason=f"kubectl not found at {KUBECTL} (run tests/tools/get-k8s-tools.sh .tools or set SKY_TOOLS_BIN)",
)


class Kubectl:
    def __init__(self, kubeconfig: Path, cache: Path) -> None:
        self.base = [str(KUBECTL), "--kubeconfig", str(kubeconfig), "--cache-dir", str(cache)]

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([*self.base, *args], capture_output=True, text=True, timeout=30, check=False)
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        return done


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator() as emu:
        yield emu


@pytest.fixture
def kubectl(emu: Emulator, tmp_path: Path) -> Kubectl:
    return Kubectl(emu.write_kubeconfig(tmp_path / "kubeconfig"), tmp_path / "cache")


def _write(path: Path, *docs: Mapping[str, object]) -> Path:
    path.write_text(yaml.safe_dump_all(docs))
    return path


def test_kubectl_applies_a_crd_and_shows_printer_columns(emu: Emulator, kubectl: Kubectl, tmp_path: Path) -> None:
    columns = [
        {"name": "Node", "type": "string", "jsonPath": ".status.nodeName"},
        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
    ]
    crd = _write(
        tmp_path / "crd.yaml", widget_crd("kubectl.example.com", scope="Cluster", columns=columns, short_names=["wd"])
    )
    out = kubectl("apply", "-f", str(crd)).stdout
    assert "customresourcedefinition.apiextensions.k8s.io/widgets.kubectl.example.com created" in out
    widget = {"apiVersion": "kubectl.example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 3}}
    assert (
        "widget.kubectl.example.com/w1 created"
        in kubectl("apply", "-f", str(_write(tmp_path / "w.yaml", widget))).stdout
    )
    emu.patch("kubectl.example.com/v1", "widgets", "w1", {"status": {"nodeName": "node-7"}}, subresource="status")
    lines = kubectl("get", "wd").stdout.splitlines()
    assert lines[0].split() == ["NAME", "NODE", "SIZE"]
    assert lines[1].split() == ["w1", "node-7", "3"]
    # the server validates (kubectl apply uses fieldValidation=Strict)
    bad = {**widget, "metadata": {"name": "w2"}, "spec": {"size": 0}}
    done = kubectl("apply", "-f", str(_write(tmp_path / "bad.yaml", bad)), check=False)
    assert done.returncode != 0 and "spec.size" in done.stderr
    typo = {**widget, "metadata": {"name": "w3"}, "spec": {"size": 1, "colour": "red"}}
    done = kubectl("apply", "-f", str(_write(tmp_path / "typo.yaml", typo)), check=False)
    assert done.returncode != 0 and 'unknown field "spec.colour"' in done.stderr


def test_kubectl_apply_twice_patches_the_pod(emu: Emulator, kubectl: Kubectl, tmp_path: Path) -> None:
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p1", "namespace": "default", "labels": {"app": "a"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    manifest = _write(tmp_path / "pod.yaml", pod)
    assert "pod/p1 created" in kubectl("apply", "-f", str(manifest)).stdout
    pod["metadata"]["labels"] = {"app": "b"}
    _write(manifest, pod)
    assert "pod/p1 configured" in kubectl("apply", "-f", str(manifest)).stdout
    patches = [r for r in emu.journal.records() if r.method == "PATCH" and r.resource == "pods"]
    assert [p.content_type for p in patches] == ["application/strategic-merge-patch+json"]
    stored = emu.get("v1", "pods", "p1", "default")
    assert stored["metadata"]["labels"] == {"app": "b"}
    assert "kubectl.kubernetes.io/last-applied-configuration" in stored["metadata"]["annotations"]
    assert "unchanged" in kubectl("apply", "-f", str(manifest)).stdout
    table = kubectl("get", "pods").stdout.splitlines()
    assert table[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "NODE"]
    assert table[1].split()[:3] == ["p1", "0/1", "Pending"]


def test_kubectl_get_watch_prints_new_pods(emu: Emulator, kubectl: Kubectl) -> None:
    proc = subprocess.Popen(
        [*kubectl.base, "get", "pods", "-w", "--namespace", "default"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in proc.stdout or ():
            lines.put(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        # kubectl lists, then watches from the list's resourceVersion: wait until the watch is open
        for _ in range(500):
            if emu.store.open_watches("pods"):
                break
            threading.Event().wait(0.01)
        assert emu.store.open_watches("pods") == 1, "kubectl never opened its watch"
        emu.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "watched", "namespace": "default"},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            }
        )
        seen = []
        while True:
            line = lines.get(timeout=20)
            seen.append(line)
            if line.startswith("watched"):
                break
        assert seen[0].split()[:2] == ["NAME", "READY"]
        assert seen[-1].split()[:3] == ["watched", "0/1", "Pending"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout:
            proc.stdout.close()
        if proc.stderr:
            proc.stderr.close()


def test_kubectl_sees_namespaces_nodes_and_the_project_crds(emu: Emulator, kubectl: Kubectl) -> None:
    emu.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n0"}})
    assert kubectl("get", "nodes", "-o", "name").stdout.split() == ["node/n0"]
    assert {"default", "kube-system"} <= set(
        kubectl("get", "ns", "-o", "name").stdout.replace("namespace/", "").split()
    )
    crds = sorted((REPO / "crds").glob("*.yaml"))
    if not crds:
        pytest.skip("crds/ has no manifests yet")
    out = kubectl("apply", "--server-side", "-f", str(REPO / "crds")).stdout  # as docs/api.md says
    assert out.count("serverside-applied") == len(crds)
    names = kubectl("api-resources", "--api-group", "scheduling.infini-ai.com", "-o", "name").stdout.split()
    assert "quotas.scheduling.infini-ai.com" in names
    assert kubectl("get", "qo").stderr.strip() == "No resources found"


def test_kubectl_get_nodetopology_shows_leaf_and_spine_columns(emu: Emulator, kubectl: Kubectl, tmp_path: Path) -> None:
    kubectl("apply", "--server-side", "-f", str(REPO / "crds" / "scheduling.infini-ai.com_nodetopologies.yaml"))
    topo = {
        "apiVersion": "scheduling.infini-ai.com/v1alpha1",
        "kind": "NodeTopology",
        "metadata": {"name": "gpu-a01"},
        "spec": {
            "zone": "ib#leaf-a1",
            "tiers": [
                {"level": 1, "name": "leaf-a1"},
                {"level": 2, "name": "spine-a1+1"},
                {"level": 3, "name": "core"},
            ],
        },
    }
    bare = {**topo, "metadata": {"name": "cpu-01"}, "spec": {}}
    kubectl("apply", "-f", str(_write(tmp_path / "t.yaml", topo, bare)))
    lines = kubectl("get", "ntopo").stdout.splitlines()
    assert lines[0].split() == ["NAME", "ZONE", "LEAF", "SPINE", "AGE"]
    assert len(lines[1].split()) == 2 and lines[1].startswith("cpu-01 ")  # name, then only the age: no tiers
    assert lines[2].split()[:4] == ["gpu-a01", "ib#leaf-a1", "leaf-a1", "spine-a1+1"]
