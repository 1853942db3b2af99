"""A small LLDP lab made of network namespaces and real ``lldpd`` daemons.

One namespace per leaf switch (lldpd announcing the switch's system name, port ids = interface
names, like a real switch), one namespace per node, veth pairs as cables. Each lldpd has its own
control socket, so ``lldpcli -u <socket>`` reads one node's neighbour table from the root namespace
(a Unix socket is a file, not a network endpoint).

Everything created is named with a random suffix and removed by :meth:`LldpLab.close` (processes
killed, namespaces deleted, files removed). Needs root, ``ip`` and ``lldpd``.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path


def lab_unavailable_reason() -> str | None:
    """Why the lab cannot run here (None: it can)."""
    if os.geteuid() != 0:
        return "network-namespace tests need root"
    for tool in ("ip", "lldpd", "lldpcli"):
        if shutil.which(tool) is None:
            return f"network-namespace tests need `{tool}` (apt-get install -y iproute2 lldpd)"
    return None


def _run(*argv: str) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()}")


@dataclass
class Netns:
    name: str
    label: str
    system_name: str
    is_switch: bool
    lldpd: bool
    socket: Path
    conf: Path
    log: Path
    interfaces: list[str] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None


class LldpLab:
    def __init__(self) -> None:
        self.tag = secrets.token_hex(3)
        self.dir = Path(tempfile.mkdtemp(prefix=f"skylldp{self.tag}-"))  # short: Unix socket paths <108
        self.dir.chmod(0o755)  # lldpd drops privileges to _lldpd: it must reach its socket
        self.spaces: dict[str, Netns] = {}
        self._closed = False

    # ------------------------------------------------------------------ building
    def _add(self, label: str, system_name: str, is_switch: bool, lldpd: bool = True) -> Netns:
        ns = Netns(
            name=f"sky{self.tag}{label}"[:40],
            label=label,
            system_name=system_name,
            is_switch=is_switch,
            lldpd=lldpd,
            socket=self.dir / f"{label}.sock",
            conf=self.dir / f"{label}.conf",
            log=self.dir / f"{label}.log",
        )
        _run("ip", "netns", "add", ns.name)
        self.spaces[label] = ns
        _run("ip", "-n", ns.name, "link", "set", "lo", "up")
        return ns

    def add_switch(self, label: str, system_name: str, *, lldpd: bool = True) -> Netns:
        """A switch namespace; ``lldpd=False`` makes a switch that sends no LLDP at all."""
        return self._add(label, system_name, True, lldpd)

    def add_node(self, label: str, *, lldpd: bool = True) -> Netns:
        """A node namespace; ``lldpd=False``: :meth:`start` runs no lldpd there (the test does)."""
        return self._add(label, label, False, lldpd)

    def cable(self, node: str, nic: str, switch: str, port: str) -> None:
        """A veth pair: ``nic`` in the node's namespace, ``port`` in the switch's."""
        n, s = self.spaces[node], self.spaces[switch]
        _run("ip", "link", "add", nic, "netns", n.name, "type", "veth", "peer", "name", port, "netns", s.name)
        _run("ip", "-n", n.name, "link", "set", nic, "up")
        _run("ip", "-n", s.name, "link", "set", port, "up")
        n.interfaces.append(nic)
        s.interfaces.append(port)

    def move_port(self, port: str, from_switch: str, to_switch: str) -> None:
        """Re-cable: move a switch-side veth end into another switch's namespace."""
        a, b = self.spaces[from_switch], self.spaces[to_switch]
        _run("ip", "-n", a.name, "link", "set", port, "netns", b.name)
        _run("ip", "-n", b.name, "link", "set", port, "up")
        a.interfaces.remove(port)
        b.interfaces.append(port)

    # ------------------------------------------------------------------ daemons
    def start(self) -> None:
        for ns in self.spaces.values():
            if not ns.lldpd:
                continue
            lines = [f"configure system hostname {ns.system_name}", "configure lldp tx-interval 1"]
            if ns.is_switch:
                lines += ["configure lldp portidsubtype ifname", "configure system capabilities enabled bridge"]
            ns.conf.write_text("\n".join(lines) + "\n")
            with ns.log.open("wb") as logf:
                # -d: foreground; -u: own control socket; -O: own configuration; -I: every interface
                # of the namespace (lo is never used), so a port moved in later is picked up.
                argv = ["ip", "netns", "exec", ns.name, "lldpd", "-d", "-u", str(ns.socket), "-O", str(ns.conf)]
                ns.proc = subprocess.Popen(
                    [*argv, "-I", "*"],
                    stdout=logf,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        deadline = time.monotonic() + 30
        for ns in self.spaces.values():
            while ns.lldpd and not ns.socket.exists():
                if ns.proc is not None and ns.proc.poll() is not None:
                    raise RuntimeError(f"lldpd in {ns.name} exited: {ns.log.read_text(errors='replace')}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"lldpd in {ns.name} did not create {ns.socket}")
                time.sleep(0.05)

    def lldpcli(self, node: str, fmt: str = "json0") -> list[str]:
        return ["lldpcli", "-u", str(self.spaces[node].socket), "-f", fmt, "show", "neighbors"]

    def neighbors_text(self, node: str, fmt: str = "json0") -> str:
        return subprocess.run(self.lldpcli(node, fmt), capture_output=True, text=True, check=True).stdout

    # ------------------------------------------------------------------ cleanup
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for ns in self.spaces.values():
            if ns.proc is not None and ns.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(ns.proc.pid, signal.SIGTERM)
                try:
                    ns.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(ns.proc.pid, signal.SIGKILL)
                    ns.proc.wait(timeout=10)
        for ns in self.spaces.values():
            subprocess.run(["ip", "netns", "del", ns.name], capture_output=True, check=False)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> LldpLab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
