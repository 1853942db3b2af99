"""The RoCE agent's I/O: files of the CNI configuration directory, sysfs, and the two tools.

Each function either returns its data or raises :class:`SourceError` with one sentence an operator
can act on; none of them logs. Parsing is in :mod:`discovery.roce.parse`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from discovery.common import proc
from discovery.roce import parse

__all__ = [
    "CNI_SUFFIXES",
    "CniScan",
    "SourceError",
    "bond_slaves",
    "lldp_neighbors",
    "lower_devices",
    "rdma_links",
    "rdma_links_from_sysfs",
    "scan_cni_dir",
]

CNI_SUFFIXES: tuple[str, ...] = (".conf", ".conflist", ".json", ".yaml", ".yml")
"""Files of the CNI directory that are read (``.conf``/``.conflist`` as CNI, the others as NADs)."""


class SourceError(Exception):
    """An input could not be read; the message is the log line."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True, slots=True)
class CniScan:
    masters: list[parse.CniMaster]
    bad_files: dict[str, str]
    """file name → why it was skipped (unreadable, not JSON/YAML, bad NAD config)."""


def scan_cni_dir(cni_dir: Path) -> CniScan:
    """All macvlan/ipvlan masters in the CNI configuration directory (sorted file order).

    Raises :class:`SourceError` if the directory itself is missing or unreadable; a single bad
    file is reported in :attr:`CniScan.bad_files` and skipped.
    """
    try:
        entries = sorted(p for p in cni_dir.iterdir() if p.suffix in CNI_SUFFIXES)
    except FileNotFoundError:
        raise SourceError("cni-dir", f"CNI configuration directory {cni_dir} does not exist") from None
    except NotADirectoryError:
        raise SourceError("cni-dir", f"CNI configuration path {cni_dir} is not a directory") from None
    except OSError as e:
        raise SourceError("cni-dir", f"cannot read CNI configuration directory {cni_dir}: {e}") from None
    masters: list[parse.CniMaster] = []
    bad: dict[str, str] = {}
    for path in entries:
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            bad[path.name] = f"cannot read {path}: {e}"
            continue
        try:
            masters.extend(parse.parse_cni_file(text, str(path)))
        except parse.ParseError as e:
            bad[path.name] = str(e)
    return CniScan(masters, bad)


def bond_slaves(sysfs_root: Path, ifname: str) -> list[str] | None:
    """Slaves of ``ifname`` from ``<sysfs>/class/net/<ifname>/bonding/slaves``; None if not a bond."""
    path = sysfs_root / "class" / "net" / ifname / "bonding" / "slaves"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as e:
        raise SourceError(f"bond:{ifname}", f"cannot read {path}: {e}") from None
    return text.split()


def lower_devices(sysfs_root: Path, ifname: str) -> list[str]:
    """Devices ``ifname`` is stacked on (``<sysfs>/class/net/<ifname>/lower_*``): the parent of a
    VLAN or macvlan device, the slaves of a bond; [] for a physical NIC or an unknown name."""
    try:
        entries = list((sysfs_root / "class" / "net" / ifname).iterdir())
    except OSError:
        return []
    return sorted(p.name.removeprefix("lower_") for p in entries if p.name.startswith("lower_"))


def rdma_links_from_sysfs(sysfs_root: Path) -> list[parse.RdmaLink]:
    """Fallback for ``rdma link``: ``<sysfs>/class/infiniband/<dev>/device/net/<netdev>``."""
    base = sysfs_root / "class" / "infiniband"
    out: list[parse.RdmaLink] = []
    try:
        devices = sorted(base.iterdir())
    except OSError:
        return out
    for dev in devices:
        try:
            netdevs = sorted(p.name for p in (dev / "device" / "net").iterdir())
        except OSError:
            continue
        out.extend(parse.RdmaLink(dev.name, 1, nd, "") for nd in netdevs)
    return out


async def lldp_neighbors(argv: Sequence[str], time_limit: float) -> list[parse.LldpNeighbor]:
    """Run the lldpcli command and parse its json0 output."""
    try:
        out = await proc.run_tool(argv, time_limit)
    except proc.ToolMissing as e:
        raise SourceError("lldpcli", f"{e} (is the lldpd sidecar running?)") from None
    except proc.ToolFailed as e:
        raise SourceError("lldpcli", f"{e} (is lldpd running, and is its control socket shared?)") from None
    except proc.ToolError as e:
        raise SourceError("lldpcli", str(e)) from None
    try:
        return parse.parse_lldp_json0(out.stdout)
    except parse.ParseError as e:
        raise SourceError("lldpcli", f"cannot use the output of `{' '.join(argv)}`: {e}") from None


async def rdma_links(argv: Sequence[str], time_limit: float) -> list[parse.RdmaLink]:
    """Run the rdma link command and parse its JSON output."""
    try:
        out = await proc.run_tool(argv, time_limit)
    except proc.ToolError as e:
        raise SourceError("rdma", str(e)) from None
    try:
        return parse.parse_rdma_link(out.stdout)
    except parse.ParseError as e:
        raise SourceError("rdma", f"cannot use the output of `{' '.join(argv)}`: {e}") from None
