"""The per-node RoCE agent (``sky-scheduler discover roce``; DaemonSet, hostNetwork, lldpd sidecar).

Every round (default 10 s):

1. candidate NICs = ``master`` of every macvlan/ipvlan plugin in the CNI configuration directory;
2. bonds among them are replaced by their slaves (``<sysfs>/class/net/<bond>/bonding/slaves``);
3. switch name / port of each NIC from the LLDP neighbour table (``lldpcli -f json0 show neighbors``);
4. RDMA device of each NIC from ``rdma -j link`` (fallback ``<sysfs>/class/infiniband/*/device/net/*``);
5. the tiers above its leaves from the fabric map, if one is given (:mod:`discovery.common.fabric_map`,
   re-read every round: a ConfigMap mount);
6. the node's NodeTopology ``spec.net.roce`` (+ ``spec.zone``, ``spec.tiers``) and the ``zone`` labels
   are written through the sink when they differ from what is there;
7. its heartbeat (``status.observedAt``, ``status.agent``) when the spec changed or the last one
   is ``heartbeat_seconds`` old (:mod:`discovery.common.heartbeat`).

A missing or failing input is logged once (and once more when it is back) and the round is
retried next period; the agent never exits on it. While the CNI directory or the LLDP table cannot
be read, nothing is written: a half-known topology must not replace a known one. A NIC that has no
LLDP neighbour yet is written with an empty ``switchName``. An unreadable fabric map is logged
the same way and leaves the tiers written before as they are.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from discovery.common import fabric_map
from discovery.common.conditions import ConditionLog
from discovery.common.heartbeat import DEFAULT_HEARTBEAT_SECONDS, Heartbeats, agent_identity
from discovery.common.model import RoceNic, Tier
from discovery.common.sink import PublishOutcome, TopologySink, publish_part
from discovery.roce import parse, sources

__all__ = [
    "DEFAULT_LLDPCLI",
    "DEFAULT_RDMA_CMD",
    "Discovery",
    "RoceAgent",
    "RoceConfig",
    "RoundResult",
    "parse_command",
]

log = logging.getLogger("discovery.roce")

DEFAULT_LLDPCLI: tuple[str, ...] = ("lldpcli", "-f", "json0", "show", "neighbors")
DEFAULT_RDMA_CMD: tuple[str, ...] = ("rdma", "-j", "link")


@dataclass(frozen=True, slots=True)
class RoceConfig:
    node_name: str
    cni_dir: Path = Path("/etc/cni/net.d")
    sysfs_root: Path = Path("/sys")
    lldpcli: tuple[str, ...] = DEFAULT_LLDPCLI
    rdma_cmd: tuple[str, ...] = DEFAULT_RDMA_CMD
    period: float = 10.0
    tool_timeout: float = 10.0
    publish_incomplete: bool = False
    """Publish even when an input is missing (the dry run prints what it has)."""
    resync_rounds: int = 30
    """Re-read the API every this many rounds even when nothing changed locally (someone may have
    edited or deleted the object)."""
    heartbeat_seconds: float = DEFAULT_HEARTBEAT_SECONDS
    """Write ``status.observedAt`` at least this often (and whenever the spec changes); 0: never."""
    agent: str = ""
    """``status.agent`` of the heartbeat; empty: ``roce/`` + ``$POD_NAME``, else the hostname."""
    fabric_map: Path | None = None
    """leaf → spine → core file (:mod:`discovery.common.fabric_map`); None: no tiers above the leaf."""


@dataclass(frozen=True, slots=True)
class Discovery:
    """What one round found. ``complete`` is False when a blocking input (CNI directory, LLDP
    table) could not be read; ``problems`` maps condition keys to their messages.
    ``upper_tiers``: the node's tiers above its leaves (empty without a fabric map; None when the
    map could not be read: the tiers written before stay)."""

    nics: list[RoceNic]
    complete: bool
    problems: dict[str, str] = field(default_factory=dict)
    upper_tiers: list[Tier] | None = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class RoundResult:
    discovery: Discovery
    outcome: PublishOutcome | None
    """None when nothing was sent to the sink (incomplete inputs, or unchanged since last round)."""
    error: str | None = None
    heartbeat: bool = False
    """True when this round wrote the node's heartbeat (``status``); not a change."""


class RoceAgent:
    def __init__(
        self,
        config: RoceConfig,
        sink: TopologySink,
        logger: logging.Logger | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.sink = sink
        self.conditions = ConditionLog(logger or log)
        self._log = logger or log
        self._last: tuple[list[RoceNic], list[Tier] | None] | None = None
        self._rounds_since_sync = 0
        self.heartbeats = Heartbeats(
            config.agent or agent_identity("roce"), config.heartbeat_seconds, clock=clock, wall_clock=wall_clock
        )

    def _retry(self, message: str) -> str:
        return f"{message} — will retry every {self.config.period:g}s"

    async def discover(self) -> Discovery:
        """Read every input once and build the NIC list (no write)."""
        cfg = self.config
        problems: dict[str, str] = {}
        complete = True

        masters: list[str] = []
        try:
            scan = sources.scan_cni_dir(cfg.cni_dir)
        except sources.SourceError as e:
            problems[e.key] = self._retry(str(e))
            complete = False
        else:
            for name, why in scan.bad_files.items():
                problems[f"cni-file:{name}"] = f"skipping CNI file {name}: {why}"
            for found in scan.masters:
                if found.master not in masters:
                    masters.append(found.master)
            if not masters:
                problems["no-candidates"] = (
                    f"no macvlan/ipvlan master interface in {cfg.cni_dir}: this node reports no RoCE NIC"
                )

        bonds: dict[str, list[str]] = {}

        def resolve(name: str, depth: int = 0) -> list[str]:
            """The bond or physical NIC(s) under a master: a bond is kept (expanded below), a
            VLAN/macvlan device is replaced by the device(s) it is stacked on."""
            try:
                slaves = sources.bond_slaves(cfg.sysfs_root, name)
            except sources.SourceError as e:
                problems[e.key] = str(e)
                return [name]
            if slaves is not None:
                if not slaves:
                    problems[f"bond-empty:{name}"] = f"bond {name} has no slaves; reporting it as one NIC"
                else:
                    bonds[name] = slaves
                return [name]
            lowers = sources.lower_devices(cfg.sysfs_root, name) if depth < 4 else []
            return [n for lower in lowers for n in resolve(lower, depth + 1)] or [name]

        masters = list(dict.fromkeys(n for m in masters for n in resolve(m)))

        # The tools are asked even without candidates, so that what is missing is said at once;
        # a failing LLDP table only blocks writing when there are NICs to report.
        neighbors: list[parse.LldpNeighbor] = []
        try:
            neighbors = await sources.lldp_neighbors(cfg.lldpcli, cfg.tool_timeout)
        except sources.SourceError as e:
            problems[e.key] = self._retry(str(e))
            complete = complete and not masters

        try:
            links = await sources.rdma_links(cfg.rdma_cmd, cfg.tool_timeout)
        except sources.SourceError as e:
            links = sources.rdma_links_from_sysfs(cfg.sysfs_root)
            where = cfg.sysfs_root / "class" / "infiniband"
            problems[e.key] = (
                f"{e}; RDMA devices taken from {where} ({len(links)} found) — will retry every {cfg.period:g}s"
            )
        rdma = parse.rdma_map(links)

        nics = parse.build_nics(masters, bonds, neighbors, rdma)
        if complete:
            for nic in nics:
                if not nic.switch_name:
                    problems[f"no-neighbor:{nic.name}"] = (
                        f"NIC {nic.name} has no LLDP neighbour yet; reported with an empty switchName"
                    )
        return Discovery(nics, complete, problems, self._upper_tiers(nics, problems))

    def _upper_tiers(self, nics: Sequence[RoceNic], problems: dict[str, str]) -> list[Tier] | None:
        """The node's tiers above its leaves by the fabric map (see :class:`Discovery`)."""
        path = self.config.fabric_map
        if path is None:
            return []
        try:
            fmap = fabric_map.load_fabric_map(path)
        except fabric_map.FabricMapError as e:
            problems["fabric-map"] = self._retry(f"{e}; the tiers above the leaf are left as they are")
            return None
        leaves = sorted({n.switch_name for n in nics if n.switch_name})
        for leaf in leaves:
            if leaf not in fmap:
                problems[f"not-in-fabric-map:{leaf}"] = f"leaf {leaf!r} is not in the fabric map {path}: no spine known"
        return fabric_map.map_tiers(fmap, leaves)

    def _log_round(self, d: Discovery) -> None:
        c = self.conditions
        c.begin_round()
        for key, message in d.problems.items():
            level = logging.INFO if key == "no-candidates" else logging.WARNING
            c.report(key, message, level)
        for key, message in c.active.items():
            if not key.startswith("no-neighbor:") or key in d.problems:
                continue
            if not d.complete:  # the LLDP table was not read: the condition is not known to be over
                c.report(key, message)
                continue
            nic = key.split(":", 1)[1]
            found = next((n for n in d.nics if n.name == nic), None)
            if found is not None and found.switch_name:
                c.resolve(key, f"NIC {nic} now sees switch {found.switch_name!r} port {found.switch_port!r}")

    async def run_once(self) -> RoundResult:
        """One round: discover, and publish if complete and changed. Never raises (except
        cancellation)."""
        d = await self.discover()
        self._log_round(d)
        result: RoundResult
        checked = False  # the node was checked: its result is (now) what the API holds
        if not d.complete and not self.config.publish_incomplete:
            self.conditions.report(
                "not-published",
                f"not updating NodeTopology {self.config.node_name} until the inputs above are readable",
            )
            result = RoundResult(d, None)
        elif (d.nics, d.upper_tiers) == self._last and self._rounds_since_sync < self.config.resync_rounds:
            self._rounds_since_sync += 1
            result = RoundResult(d, None)
            checked = True
        else:
            try:
                outcome = await publish_part(self.sink, self.config.node_name, roce=d.nics, upper_tiers=d.upper_tiers)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                msg = self._retry(f"cannot publish NodeTopology {self.config.node_name}: {type(e).__name__}: {e}")
                self.conditions.report("publish", msg, logging.ERROR)
                result = RoundResult(d, None, error=msg)
            else:
                self._last = (d.nics, d.upper_tiers)
                self._rounds_since_sync = 0
                if outcome.changed:
                    self._log.info(
                        "%s NodeTopology %s: zone %r, label zone=%s, %d RoCE NIC(s): %s",
                        "dry run: would write" if self.sink.dry_run else "wrote",
                        outcome.node,
                        outcome.spec["zone"],
                        outcome.zone_label or "<none>",
                        len(d.nics),
                        ", ".join(f"{n.name}→{n.switch_name or '?'}" for n in d.nics) or "none",
                    )
                result = RoundResult(d, outcome)
                checked = True
        if checked:
            changed = result.outcome is not None and result.outcome.changed
            result = dataclasses.replace(result, heartbeat=await self._heartbeat(changed))
        elif "heartbeat" in self.conditions.active:  # not tried this round: not known to be over
            self.conditions.report("heartbeat", self.conditions.active["heartbeat"])
        self.conditions.end_round()
        self._log.debug(
            "round done: %d NIC(s), inputs %s, %s%s",
            len(d.nics),
            "complete" if d.complete else "incomplete",
            "written" if result.outcome is not None and result.outcome.changed else "nothing written",
            ", heartbeat" if result.heartbeat else "",
        )
        return result

    async def _heartbeat(self, changed: bool) -> bool:
        """Write the node's heartbeat if due; whether it was written. A failure is a condition
        (logged once, retried next round), never an exception."""
        node = self.config.node_name
        try:
            written = await self.heartbeats.beat(self.sink, node, changed=changed)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self.conditions.report(
                "heartbeat",
                self._retry(f"cannot write the heartbeat (status) of NodeTopology {node}: {type(e).__name__}: {e}"),
            )
            return False
        if written is False:
            # the object is gone (deleted since it was last published): publish it next round
            self._log.info("NodeTopology %s does not exist: publishing it again next round", node)
            self._last = None
        return bool(written)

    async def run(self, stop: asyncio.Event, on_round: Callable[[], None] | None = None) -> None:
        """Rounds every ``period`` seconds until ``stop`` is set; ``on_round`` after each (liveness)."""
        while not stop.is_set():
            await self.run_once()
            if on_round is not None:
                on_round()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.config.period)


def parse_command(value: str | Sequence[str]) -> tuple[str, ...]:
    """A command given as one string (split like a shell would) or as argv."""
    return tuple(shlex.split(value)) if isinstance(value, str) else tuple(value)
