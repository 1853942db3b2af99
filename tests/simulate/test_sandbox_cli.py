"""The command line a newcomer meets first (issue 21): the sandbox's ports, and a subcommand that
loads only what it needs."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_taken_ops_port_is_a_clear_error_naming_the_flag(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "extender.cli", "sandbox", "empty-8-node", "--ops-port", str(port)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"--ops-port {port}" in done.stderr and "in use" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "sky-sandbox.kubeconfig").exists()  # nothing half-started left behind


def test_a_subcommand_does_not_import_the_others() -> None:
    code = (
        "import sys; from extender.cli import main; "
        "rc = main(['quotas', 'create', '--queue', 'q', '--count', '1', '--request', 'gpu=1', '--dry-run']); "
        "print(rc, sorted(m for m in ('extender.simulate.scenario', 'extender.emulator', 'discovery.cli') "
        "if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "0 []"
    assert "kind: Quota" in done.stdout
