"""The emulator's Python API, its two ways of running, the kubeconfig and the CLI."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest
import yaml
from kubernetes_asyncio import client

from extender.emulator import ApiError, Emulator
from extender.kube import client as kube_client
from tests.emulator.builders import pod, unique, widget_crd

REPO = Path(__file__).resolve().parents[2]


def test_python_api_has_http_semantics(emu: Emulator, ns: str) -> None:
    created = emu.create(pod("p", ns))
    assert created["metadata"]["resourceVersion"] == str(emu.resource_version)
    created["metadata"]["labels"] = {"mutated": "locally"}  # a copy: the store is untouched
    assert "labels" not in emu.get("v1", "pods", "p", ns)["metadata"]  # empty maps are omitted, as in Go
    with pytest.raises(ApiError) as err:
        emu.create(pod("p", ns))
    assert err.value.code == 409 and err.value.status["reason"] == "AlreadyExists"
    stale = emu.get("v1", "Pod", "p", ns)
    emu.patch("v1", "po", "p", {"metadata": {"labels": {"a": "b"}}}, namespace=ns)
    with pytest.raises(ApiError) as err:
        emu.update(stale)
    assert err.value.code == 409
    with pytest.raises(ApiError) as err:
        emu.create({**pod("q", ns), "spec": {"containers": []}})
    assert err.value.code == 422
    with pytest.raises(ApiError) as err:  # the Python API is strict about unknown fields by default
        emu.create({**pod("q", ns), "sepc": {}})
    assert err.value.code == 400


def test_with_status_loads_running_pods_and_bound_quotas(emu: Emulator, ns: str) -> None:
    body = pod("running", ns, nodeName="n1")
    body["status"] = {"phase": "Running"}
    assert emu.create(body, with_status=True)["status"] == {"phase": "Running"}
    assert emu.create({**body, "metadata": {"name": "reset", "namespace": ns}})["status"] == {"phase": "Pending"}
    group = unique("g") + ".example.com"
    emu.create(widget_crd(group))
    w = {
        "apiVersion": f"{group}/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": ns},
        "spec": {"size": 1},
        "status": {"phase": "Bound"},
    }
    assert emu.create(w, with_status=True)["status"] == {"phase": "Bound"}


def test_load_applies_crds_first_and_is_idempotent(emu: Emulator, tmp_path: Path) -> None:
    group = unique("g") + ".example.com"
    ns = unique("ns-")
    docs = [
        {
            "apiVersion": f"{group}/v1",
            "kind": "Widget",
            "metadata": {"name": "w", "namespace": ns},
            "spec": {"size": 1},
        },
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        widget_crd(group),
    ]
    path = tmp_path / "objs.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    first = emu.load_yaml(path)
    assert [o["kind"] for o in first] == ["CustomResourceDefinition", "Namespace", "Widget"]
    rv = emu.resource_version
    emu.load_yaml(path)  # unchanged objects: no writes
    assert emu.resource_version == rv
    docs[0]["spec"] = {"size": 2}
    path.write_text(yaml.safe_dump_all(docs))
    emu.load_yaml(path)
    assert emu.get(f"{group}/v1", "widgets", "w", ns)["spec"]["size"] == 2


def test_python_api_is_thread_safe(emu: Emulator, ns: str) -> None:
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            for j in range(50):
                emu.create(
                    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}-{j}", "namespace": ns}}
                )
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    items = emu.list("v1", "configmaps", namespace=ns)
    rvs = [int(i["metadata"]["resourceVersion"]) for i in items]
    assert len(items) == 200 and len(set(rvs)) == 200


@pytest.mark.anyio
async def test_in_loop_emulator_and_kubeconfig_for_kubernetes_asyncio(tmp_path: Path) -> None:
    async with Emulator() as emu:
        path = emu.write_kubeconfig(tmp_path / "kc")
        assert oct(path.stat().st_mode & 0o777) == "0o600"
        api = await kube_client.from_kubeconfig(path)
        try:
            namespaces = await client.CoreV1Api(api).list_namespace()
            assert "default" in {n.metadata.name for n in namespaces.items}
            seen = [r.user_agent for r in emu.journal.records()]
            assert seen and seen[-1] == "sky-scheduler"
        finally:
            await api.close()
    assert not emu.running


def test_threaded_emulator_starts_and_stops_cleanly() -> None:
    emu = Emulator().start()
    try:
        url = emu.url
        assert url.startswith("http://127.0.0.1:")
        with pytest.raises(RuntimeError):
            emu.start()
    finally:
        emu.stop()
    emu.stop()  # idempotent
    assert not emu.running


def test_cli_runs_until_sigterm(tmp_path: Path) -> None:
    kc = tmp_path / "kc"
    crd_dir = tmp_path / "crds"
    crd_dir.mkdir()
    (crd_dir / "w.yaml").write_text(yaml.safe_dump(widget_crd("cli.example.com", scope="Cluster")))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from extender.cli import main; sys.exit(main())",
            "emulator",
            "--kubeconfig-out",
            str(kc),
            "--crds",
            str(crd_dir),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(3)]
        assert lines[0].startswith("applied 1 CRD(s)")
        assert "listening on http://127.0.0.1:" in lines[1]
        assert str(kc) in lines[2]
        server = yaml.safe_load(kc.read_text())["clusters"][0]["cluster"]["server"]
        with urllib.request.urlopen(server + "/apis/cli.example.com/v1", timeout=5) as resp:
            assert resp.status == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert "emulator stopped" in out


def test_cli_reports_bad_crd_files(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(
        "kind: CustomResourceDefinition\napiVersion: apiextensions.k8s.io/v1\nmetadata: {name: x}\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from extender.cli import main; sys.exit(main())",
            "emulator",
            "--crds",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    assert done.returncode == 1
    assert "is invalid" in done.stderr
