"""The real kubectl binary for tests (from ``tests/tools/get-k8s-tools.sh``, or ``$SKY_TOOLS_BIN``)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

__all__ = ["KUBECTL", "needs_kubectl", "run_kubectl"]

REPO = Path(__file__).resolve().parents[1]
KUBECTL = Path(os.environ.get("SKY_TOOLS_BIN", REPO / ".tools" / "bin")) / "kubectl"
needs_kubectl = pytest.mark.skipif(not os.access(KUBECTL, os.X_OK), reason=f"kubectl not found at {KUBECTL}")


def run_kubectl(kubeconfig: Path, cache: Path, *args: str) -> str:
    """``kubectl --kubeconfig … --cache-dir … ARGS``; its stdout, asserting it succeeded."""
    done = subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(kubeconfig), "--cache-dir", str(cache), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
