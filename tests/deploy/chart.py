"""Rendering the Helm chart for the deploy tests: the helm binary, value variants, object lookup.

The helm binary is looked up in ``$HELM``, then ``.tools/bin/helm`` of the repository (what
``tests/tools/get-k8s-tools.sh .tools`` installs), then ``PATH``. Without it the chart tests skip,
except in CI (``CI`` set), where a missing helm is a failure: a green run must not hide it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "sky-scheduler"
RELEASE = "sky"
NAMESPACE = "sky-system"
KUBE_VERSION = "1.30.0"
"""Rendered with this cluster version; also the Kubernetes schema version objects are checked against."""

Obj = dict[str, Any]

# Named value variants every structural test runs over.
VARIANTS: dict[str, Mapping[str, Any]] = {
    "default": {},
    "cert-manager": {"webhook": {"certificates": {"mode": "certManager"}}},
    "cert-manager-issuer": {
        "webhook": {
            "certificates": {
                "mode": "certManager",
                "certManager": {"issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer"}},
            }
        }
    },
    "secret-cert": {"webhook": {"certificates": {"mode": "secret", "secret": {"name": "my-tls", "caBundle": "Q0E="}}}},
    "no-discovery": {"discovery": {"roce": {"enabled": False}, "ib": {"enabled": False}}},
    "no-webhook": {"webhook": {"enabled": False}},
    "host-lldpd": {"discovery": {"roce": {"lldpd": {"enabled": False, "hostSocket": "/run/lldpd.socket"}}}},
    "separate": {"scheduler": {"layout": "separate"}},
    "separate-cert-manager": {
        "scheduler": {"layout": "separate", "extenderTLS": {"mode": "certManager"}},
        "webhook": {"certificates": {"mode": "certManager"}},
    },
    "everything": {
        "metrics": {"serviceMonitor": {"enabled": True}},
        "imagePullSecrets": [{"name": "regcred"}],
        "scheduler": {
            "podAntiAffinity": "hard",
            "policy": (REPO / "extender" / "conf" / "default_policy.yaml").read_text(encoding="utf-8"),
            "kubeScheduler": {
                "image": {"tag": "v1.31.4"},
                "extender": {"managedResources": [{"name": "nvidia.com/gpu", "ignoredByScheduler": False}]},
            },
            "serve": {"extraArgs": ["--log-level=debug"]},
        },
        "discovery": {
            "ib": {"hostnamePattern": r"^\s*(?P<host>[^\s]+)", "switchNamesConfigMap": "ib-switch-names"},
            "roce": {"fabricMapConfigMap": "roce-fabric-map"},
        },
        "webhook": {"namespaceSelection": "optIn", "failurePolicy": "Fail"},
    },
}
ALL_VARIANTS = sorted(VARIANTS)
"""The variant names in the order the tests are parametrized over them."""


def helm_binary() -> str | None:
    for candidate in (os.environ.get("HELM"), str(REPO / ".tools" / "bin" / "helm"), shutil.which("helm")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def require_helm() -> str:
    helm = helm_binary()
    if helm is None:
        msg = "helm not found: run `bash tests/tools/get-k8s-tools.sh .tools` (or set $HELM)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return helm


def run_helm(args: Sequence[str], *, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    helm = require_helm()
    env = {
        **os.environ,
        "HELM_CACHE_HOME": tempfile.gettempdir() + "/sky-helm-cache",
        "KUBECONFIG": os.devnull,  # never a real cluster; the emulator test passes --kubeconfig
    }
    return subprocess.run([helm, *args], capture_output=True, text=True, timeout=timeout, check=False, env=env)


def _values_file(values: Mapping[str, Any], directory: str) -> str:
    path = Path(directory) / "values.yaml"
    path.write_text(yaml.safe_dump(dict(values), sort_keys=False), encoding="utf-8")
    return str(path)


def helm_template(
    values: Mapping[str, Any] | None = None,
    *,
    extra: Sequence[str] = (),
    kube_version: str | None = KUBE_VERSION,
) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as tmp:
        args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE]
        if kube_version:
            args += ["--kube-version", kube_version]
        if values:
            args += ["--values", _values_file(values, tmp)]
        return run_helm([*args, *extra])


def helm_lint(
    values: Mapping[str, Any] | None = None, *, kube_version: str = KUBE_VERSION
) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as tmp:
        args = ["lint", "--strict", str(CHART), "--namespace", NAMESPACE, "--kube-version", kube_version]
        if values:
            args += ["--values", _values_file(values, tmp)]
        return run_helm(args)


def parse_documents(text: str) -> list[Obj]:
    return [d for d in yaml.safe_load_all(text) if d]


@contextlib.contextmanager
def server_dry_run(tmp_path: Path, objects: Sequence[Obj]) -> Iterator[Callable[[Sequence[str]], list[Obj]]]:
    """``helm template --dry-run=server`` against the project's API emulator (a child process of
    ``sky-scheduler emulator`` loaded with ``objects``), so the chart's ``lookup`` sees a live API;
    yields ``render(extra helm arguments) -> objects``. The emulator stops when the block ends."""
    seed = tmp_path / "seed.yaml"
    seed.write_text(yaml.safe_dump_all(list(objects)), encoding="utf-8")
    kubeconfig = tmp_path / "kubeconfig"
    with (tmp_path / "emulator.log").open("w") as log:
        emulator = ["emulator", "--kubeconfig-out", str(kubeconfig), "--load", str(seed)]
        proc = subprocess.Popen([sys.executable, "-m", "extender.cli", *emulator], cwd=REPO, stdout=log, stderr=log)
        try:
            deadline = time.monotonic() + 60
            while not kubeconfig.exists():
                assert proc.poll() is None, (tmp_path / "emulator.log").read_text()
                assert time.monotonic() < deadline, "the emulator did not start"
                time.sleep(0.1)

            def render(extra: Sequence[str]) -> list[Obj]:
                res = helm_template(
                    kube_version=None, extra=["--dry-run=server", "--kubeconfig", str(kubeconfig), *extra]
                )
                assert res.returncode == 0, res.stderr
                return parse_documents(res.stdout)

            yield render
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def render(values: Mapping[str, Any] | None = None, *, extra: Sequence[str] = ()) -> list[Obj]:
    proc = helm_template(values, extra=extra)
    if proc.returncode != 0:
        raise AssertionError(f"helm template failed:\n{proc.stderr}")
    return parse_documents(proc.stdout)


@functools.cache
def render_variant(name: str) -> tuple[Obj, ...]:
    return tuple(render(VARIANTS[name]))


def find(objs: Iterable[Obj], kind: str, name: str | None = None) -> list[Obj]:
    return [o for o in objs if o.get("kind") == kind and (name is None or o["metadata"]["name"] == name)]


def one(objs: Iterable[Obj], kind: str, name: str | None = None) -> Obj:
    found = find(objs, kind, name)
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def container(pod_owner: Obj, name: str) -> Obj:
    containers = pod_owner["spec"]["template"]["spec"]["containers"]
    matches: list[Obj] = [c for c in containers if c["name"] == name]
    assert matches, f"{pod_owner['kind']} {pod_owner['metadata']['name']} has no container {name}"
    return matches[0]


def deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def chart_values() -> dict[str, Any]:
    """The chart's default values.yaml."""
    values: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    return values
