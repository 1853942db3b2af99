"""The lldpd sidecar's capabilities, found by running the real lldpd the way the chart runs it.

A switch namespace (a full lldpd announcing ``leaf-cap`` every second) is cabled by a veth pair to
a node namespace where lldpd runs with the chart's command and arguments, as root with exactly the
capabilities the chart's securityContext adds (bounding set = permitted set, no inheritable or
ambient ones, ``no_new_privs`` as ``allowPrivilegeEscalation: false`` sets), in a private mount
namespace whose ``/run/lldpd`` is a shared directory (the chart's emptyDir). The agent's side is
``lldpcli -f json0 show neighbors`` run as the agent runs it: UID 65532 in lldpd's socket group,
no capabilities, a plain 0755 lldpcli (the image drops Debian's setuid bit).

What "works" means, each observed directly:
- ``running``: lldpd is still up;
- ``multicast``: the NIC joined the LLDP multicast address 01:80:c2:00:00:0e (``ip maddr``). A
  veth delivers every frame anyway, but a real NIC filters multicast in hardware: without the
  membership it never passes LLDP frames up;
- ``agent_reads``: the agent's lldpcli reads the switch's name on the NIC, parsed by the agent's
  own parser;
- ``sent`` (only without ``-r``): the switch's lldpd sees the node.

Then every capability is dropped in turn and the observation it is kept for must break.
Measured with Debian's lldpd 1.0.16; another version may need another set, which this test shows.
"""

from __future__ import annotations

import contextlib
import grp
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from discovery.roce.agent import DEFAULT_LLDPCLI
from discovery.roce.parse import ParseError, parse_lldp_json0
from tests.deploy.chart import container, one, render
from tests.discovery.lldp_lab import LldpLab

pytestmark = pytest.mark.netns

SWITCH = "leaf-cap"
NIC, PORT = "ens9f0", "swp9"
AGENT_UID = 65532
LLDP_MULTICAST = "01:80:c2:00:00:0e"  # nearest bridge: the address switches send LLDP to
CONVERGE = 30.0
"""Seconds a working lldpd gets to show everything (the switch sends every second: normally 1–3)."""
SETTLE = 6.0
"""Seconds a lldpd missing a capability gets before it is judged (several switch transmissions)."""

WHY: dict[str, tuple[str, str]] = {
    "NET_RAW": ("agent_reads", "the raw AF_PACKET socket LLDP frames are sent and received on"),
    "NET_ADMIN": ("multicast", "SIOCADDMULTI: joining the LLDP multicast address, or a NIC drops the frames"),
    "SETUID": ("running", "privilege separation: the frame parser runs as _lldpd"),
    "SETGID": ("running", "privilege separation: setresgid to _lldpd"),
    "SYS_CHROOT": ("running", "privilege separation: the parser is chrooted to /run/lldpd"),
    "CHOWN": ("agent_reads", "the control socket is handed to the _lldpd group the agent is in"),
    "FOWNER": ("agent_reads", "chmod of the control socket, which then belongs to _lldpd"),
    "DAC_OVERRIDE": ("agent_reads", "lldpd configures itself through its _lldpd-owned socket, else stays paused"),
}
"""Each capability the chart keeps → the observation that breaks without it, and why."""


@dataclass
class Observation:
    running: bool = False
    multicast: bool = False
    agent_reads: bool = False
    sent: bool = False
    detail: str = ""

    def works(self, *, sending: bool) -> bool:
        return self.running and self.multicast and self.agent_reads and (self.sent or not sending)


def _chart_lldpd(receive_only: bool) -> dict[str, object]:
    values = {"discovery": {"roce": {"lldpd": {"receiveOnly": receive_only}}}}
    daemonset = one(render(values), "DaemonSet", "sky-scheduler-roce")
    return container(daemonset, "lldpd")


def _chart_capabilities() -> list[str]:
    ctx = _chart_lldpd(True)["securityContext"]
    assert isinstance(ctx, dict)
    assert ctx["capabilities"]["drop"] == ["ALL"]
    assert ctx["allowPrivilegeEscalation"] is False and ctx["runAsUser"] == 0
    return list(ctx["capabilities"].get("add", []))


def _lldpd_gid() -> int:
    try:
        return grp.getgrnam("_lldpd").gr_gid
    except KeyError:
        pytest.skip("no _lldpd group (Debian's lldpd package creates it)")


@pytest.fixture(scope="module")
def chart_caps() -> list[str]:
    return _chart_capabilities()


@pytest.fixture
def cabled(lab: LldpLab) -> LldpLab:
    chroot = Path("/run/lldpd")  # each sidecar binds its own directory over it: it must exist
    if not chroot.is_dir():
        try:  # lldpd makes it when it first starts on a host: a fresh machine has none yet
            chroot.mkdir(mode=0o755)
        except OSError as exc:
            pytest.skip(f"/run/lldpd (lldpd's privilege-separation chroot) is missing and cannot be made: {exc}")
    lab.add_switch("sw", SWITCH)
    lab.add_node("n", lldpd=False)
    lab.cable("n", NIC, "sw", PORT)
    lab.start()
    return lab


@contextlib.contextmanager
def _sidecar(lab: LldpLab, caps: Sequence[str], argv: Sequence[str]) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """lldpd in the node namespace with only ``caps``; /run/lldpd bound to a fresh directory."""
    run = lab.dir / f"run{len(list(lab.dir.glob('run*')))}"
    run.mkdir()
    run.chmod(0o777)  # an emptyDir's mode
    log = run.with_suffix(".log")
    bounding = ",".join(["-all", *(f"+{c.lower()}" for c in caps)])
    setpriv = ["setpriv", "--inh-caps=-all", "--ambient-caps=-all", f"--bounding-set={bounding}", "--no-new-privs"]
    shell = 'mount --bind "$1" /run/lldpd && shift && exec "$@"'
    cmd = ["ip", "netns", "exec", lab.spaces["n"].name, "unshare", "--mount", "--propagation", "private"]
    cmd += ["sh", "-c", shell, "sh", str(run), *setpriv, *argv]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield proc, run
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def _agent_lldpcli(lab: LldpLab) -> Path:
    copy = lab.dir / "lldpcli"
    if not copy.exists():
        shutil.copyfile(shutil.which("lldpcli") or "lldpcli", copy)
        copy.chmod(0o755)
    return copy


def _observe(lab: LldpLab, proc: subprocess.Popen[bytes], run: Path) -> Observation:
    obs = Observation(running=proc.poll() is None)
    maddr = subprocess.run(
        ["ip", "-n", lab.spaces["n"].name, "maddr", "show", "dev", NIC], capture_output=True, text=True, check=False
    )
    obs.multicast = LLDP_MULTICAST in maddr.stdout
    agent = ["setpriv", f"--reuid={AGENT_UID}", f"--regid={AGENT_UID}", f"--groups={_lldpd_gid()}"]
    agent += ["--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]
    agent += [str(_agent_lldpcli(lab)), "-u", str(run / "lldpd.socket"), *DEFAULT_LLDPCLI[1:]]
    reply = subprocess.run(agent, capture_output=True, text=True, check=False, timeout=20)
    try:
        seen = parse_lldp_json0(reply.stdout) if reply.returncode == 0 else []
    except ParseError:
        seen = []
    obs.agent_reads = any(n.interface == NIC and n.switch_name == SWITCH for n in seen)
    try:
        switch_side = parse_lldp_json0(lab.neighbors_text("sw"))
    except (ParseError, subprocess.CalledProcessError):
        switch_side = []
    obs.sent = any(n.interface == PORT for n in switch_side)
    log = run.with_suffix(".log").read_text(errors="replace")
    obs.detail = f"agent: {reply.stderr.strip()[-300:]!r}; lldpd log tail: {log[-600:]!r}"
    return obs


def _watch(lab: LldpLab, caps: Sequence[str], argv: Sequence[str], *, sending: bool, wait: float) -> Observation:
    """Observe until lldpd works or ``wait`` seconds pass; the last observation."""
    with _sidecar(lab, caps, argv) as (proc, run):
        deadline = time.monotonic() + wait
        while True:
            obs = _observe(lab, proc, run)
            if obs.works(sending=sending) or time.monotonic() > deadline:
                return obs
            time.sleep(0.25)


def _chart_argv(receive_only: bool) -> list[str]:
    c = _chart_lldpd(receive_only)
    return [*c["command"], *c["args"]]  # type: ignore[misc]


def test_every_kept_capability_is_explained(chart_caps: list[str]) -> None:
    assert sorted(chart_caps) == sorted(WHY), "the chart's lldpd capabilities and the measured set differ"


@pytest.mark.parametrize("receive_only", [True, False], ids=["receive-only", "sending"])
def test_lldpd_works_with_exactly_the_charts_capabilities(
    cabled: LldpLab, chart_caps: list[str], receive_only: bool
) -> None:
    argv = _chart_argv(receive_only)
    assert ("-r" in argv) is receive_only
    obs = _watch(cabled, chart_caps, argv, sending=not receive_only, wait=CONVERGE)
    assert obs.works(sending=not receive_only), obs


@pytest.mark.parametrize("dropped", sorted(WHY))
def test_dropping_any_capability_breaks_lldpd(cabled: LldpLab, chart_caps: list[str], dropped: str) -> None:
    if dropped not in chart_caps:
        pytest.fail(f"{dropped} is not in the chart's set any more: remove it from WHY")
    kept = [c for c in chart_caps if c != dropped]
    obs = _watch(cabled, kept, _chart_argv(True), sending=False, wait=SETTLE)
    broken, why = WHY[dropped]
    assert not obs.works(sending=False), f"lldpd works without {dropped}: it is not needed ({obs})"
    assert getattr(obs, broken) is False, f"without {dropped} expected {broken} to fail ({why}): {obs}"
