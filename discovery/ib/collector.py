"""The InfiniBand fabric collector (``sky-scheduler discover ib``; Deployment, one active instance).

Every round (default 10 min), while it holds its Lease:

1. the fabric: ``ibnetdiscover`` (or the file given with ``--input``), parsed whole;
2. each switch's unique name (:mod:`discovery.ib.naming`: the ``--switch-names`` file, re-read
   every round, else the description, else the description with the GUID);
3. each HCA port's leaf = the switch it is cabled to; the tiers above the leaves from the
   switch-to-switch links (:mod:`discovery.ib.tiers`);
4. HCA node descriptions → Kubernetes nodes by hostname (:mod:`discovery.ib.hosts`);
5. each such node's NodeTopology ``spec.net.ib`` (+ ``spec.zone``, ``spec.tiers``) and ``zone``
   labels are written through the sink when they differ;
6. each such node's heartbeat (``status.observedAt``, ``status.agent``) when its spec changed or
   its last one is ``heartbeat_seconds`` old (:mod:`discovery.common.heartbeat`) — with the default
   period (10 min) and interval (5 min), every round.

Hostnames that are not Kubernetes nodes are logged once each (and listed in the dry-run output);
they are not an error. Nodes that do not appear in the fabric are left as they are: a partial scan
must not erase what an earlier complete one found.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from discovery.common import proc
from discovery.common.conditions import ConditionLog
from discovery.common.heartbeat import DEFAULT_HEARTBEAT_SECONDS, Heartbeats, agent_identity
from discovery.common.model import IbPort
from discovery.common.sink import PublishOutcome, TopologySink, publish_part
from discovery.ib import hosts, naming, parse, tiers

__all__ = ["DEFAULT_IBNETDISCOVER", "IbCollector", "IbConfig", "IbRound"]

log = logging.getLogger("discovery.ib")

DEFAULT_IBNETDISCOVER: tuple[str, ...] = ("ibnetdiscover",)


@dataclass(frozen=True, slots=True)
class IbConfig:
    input: Path | None = None
    ibnetdiscover: tuple[str, ...] = DEFAULT_IBNETDISCOVER
    hostname_pattern: str = hosts.DEFAULT_HOSTNAME_PATTERN
    period: float = 600.0
    tool_timeout: float = 300.0
    heartbeat_seconds: float = DEFAULT_HEARTBEAT_SECONDS
    """Write each node's ``status.observedAt`` at least this often (and when its spec changes); 0: never."""
    agent: str = ""
    """``status.agent`` of the heartbeats; empty: ``ib/`` + ``$POD_NAME``, else the hostname."""
    switch_names: Path | None = None
    """GUID → name file (:mod:`discovery.ib.naming`), re-read every round (a ConfigMap mount)."""


@dataclass(slots=True)
class IbRound:
    """What one round did. ``error`` is set when the fabric could not be read or parsed."""

    mapping: hosts.HostMapping | None = None
    outcomes: dict[str, PublishOutcome] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    """node → why its NodeTopology could not be written."""
    heartbeats: list[str] = field(default_factory=list)
    """Nodes whose heartbeat (``status``) this round wrote; not changes."""
    heartbeat_failed: dict[str, str] = field(default_factory=dict)
    """node → why its heartbeat could not be written (logged, not an error of the round)."""
    error: str | None = None
    skipped: bool = False
    """True when this instance is not the leader and did nothing."""


class IbCollector:
    def __init__(
        self,
        config: IbConfig,
        sink: TopologySink,
        *,
        is_leader: Callable[[], bool] | None = None,
        logger: logging.Logger | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.sink = sink
        self.is_leader = is_leader
        self._rx: re.Pattern[str] = hosts.compile_pattern(config.hostname_pattern)
        self._log = logger or log
        self.conditions = ConditionLog(self._log)
        self.heartbeats = Heartbeats(
            config.agent or agent_identity("ib"), config.heartbeat_seconds, clock=clock, wall_clock=wall_clock
        )

    def _retry(self, message: str) -> str:
        return f"{message} — will retry every {self.config.period:g}s"

    async def fabric_text(self) -> str:
        """The ibnetdiscover output: from ``input`` if set, else by running the command."""
        cfg = self.config
        if cfg.input is not None:
            try:
                return cfg.input.read_text(encoding="utf-8")
            except OSError as e:
                raise proc.ToolError("input", f"cannot read ibnetdiscover output {cfg.input}: {e}") from None
        try:
            return (await proc.run_tool(cfg.ibnetdiscover, cfg.tool_timeout)).stdout
        except proc.ToolMissing as e:
            raise proc.ToolError(
                e.tool, f"{e} (install infiniband-diags, or give a saved output with --input)"
            ) from None

    async def run_once(self) -> IbRound:
        """One round. Never raises (except cancellation)."""
        if self.is_leader is not None and not self.is_leader():
            return IbRound(skipped=True)
        c = self.conditions
        c.begin_round()
        result = IbRound()
        try:
            result = await self._round()
            if result.error is not None and "heartbeat" in c.active:  # not tried: not known to be over
                c.report("heartbeat", c.active["heartbeat"])
        finally:
            c.end_round()
        return result

    async def _read_fabric(self) -> tuple[parse.Fabric, dict[str, str]] | str:
        """The parsed fabric and its switches' unique names, or why not (reported as a condition)."""
        c = self.conditions
        try:
            text = await self.fabric_text()
        except proc.ToolError as e:
            msg = self._retry(str(e))
            c.report("fabric", msg, logging.ERROR)
            return msg
        try:
            fabric = parse.parse_ibnetdiscover(text)
        except parse.ParseError as e:
            msg = self._retry(f"cannot parse the ibnetdiscover output: {e}")
            c.report("fabric", msg, logging.ERROR)
            return msg
        try:
            given = naming.load_switch_names(self.config.switch_names) if self.config.switch_names else None
        except naming.SwitchNamesError as e:
            msg = self._retry(str(e))
            c.report("switch-names", msg, logging.ERROR)
            return msg
        return fabric, parse.switch_names(fabric, given)

    async def _round(self) -> IbRound:
        read = await self._read_fabric()
        if isinstance(read, str):
            return IbRound(error=read)
        fabric, names = read
        atts = parse.attachments(fabric, names)
        levels = tiers.fabric_tiers(fabric, names)
        mapping = await self._map_hosts(atts)
        if isinstance(mapping, str):
            return IbRound(error=mapping)
        result = IbRound(mapping=mapping)
        for node, ports in sorted(mapping.nodes.items()):
            await self._publish_node(result, node, ports, levels)
        self._report_heartbeat_failures(result)
        self._log.info(
            "fabric: %d switch(es), %d leaf(s), %d tier(s), %d HCA port(s); %d node(s) mapped, %d changed, "
            "%d unknown host(s), %d heartbeat(s)",
            len(fabric.switches),
            len(fabric.leaf_guids()),
            levels.depth,
            len(atts),
            len(mapping.nodes),
            sum(1 for o in result.outcomes.values() if o.changed),
            len(mapping.unknown_hosts),
            len(result.heartbeats),
        )
        return result

    async def _map_hosts(self, atts: list[parse.HcaAttachment]) -> hosts.HostMapping | str:
        """The HCA ports grouped by Kubernetes node, or why the nodes could not be listed. Hosts that
        are not nodes and descriptions without a hostname are reported (once each), not errors."""
        c = self.conditions
        try:
            nodes = await self.sink.list_nodes()
        except asyncio.CancelledError:
            raise
        except Exception as e:
            msg = self._retry(f"cannot list Kubernetes nodes: {type(e).__name__}: {e}")
            c.report("nodes", msg, logging.ERROR)
            return msg
        if nodes is None:
            c.report(
                "no-cluster",
                "no Kubernetes API (dry run without --kubeconfig): hostnames are taken as node names",
                logging.INFO,
            )
        mapping = hosts.map_attachments(atts, nodes, self._rx)
        for host, descs in mapping.unknown_hosts.items():
            c.report(
                f"unknown-host:{host}",
                f"host {host!r} (HCA {', '.join(repr(d) for d in descs)}) is not a Kubernetes node; skipped",
            )
        for desc in mapping.unparsable:
            c.report(
                f"unparsable:{desc}",
                f"no hostname in HCA description {desc} (pattern {self._rx.pattern!r}); skipped",
            )
        return mapping

    async def _publish_node(self, result: IbRound, node: str, ports: list[IbPort], levels: tiers.FabricTiers) -> None:
        """Write the node's NodeTopology (when it differs) and its heartbeat (when due); a failure is
        recorded in ``result`` and reported, never raised, so the other nodes are still written."""
        try:
            upper = tiers.node_tiers(levels, (p.switch_guid for p in ports))
            outcome = await publish_part(self.sink, node, ib=ports, upper_tiers=upper)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            msg = self._retry(f"cannot publish NodeTopology {node}: {type(e).__name__}: {e}")
            self.conditions.report(f"publish:{node}", msg, logging.ERROR)
            result.failed[node] = msg
            return
        result.outcomes[node] = outcome
        if outcome.changed:
            self._log.info(
                "%s NodeTopology %s: zone %r, label zone=%s, %d IB port(s) on %s, tiers %s",
                "dry run: would write" if self.sink.dry_run else "wrote",
                node,
                outcome.spec["zone"],
                outcome.zone_label or "<none>",
                len(ports),
                ", ".join(sorted({p.switch_name for p in ports})),
                " > ".join(f"{t['level']}:{t['name']}" for t in outcome.spec["tiers"]) or "none",
            )
        await self._heartbeat(result, node, outcome.changed)

    def _report_heartbeat_failures(self, result: IbRound) -> None:
        """One condition for the round's failed heartbeats: the first node's reason and how many more."""
        if not result.heartbeat_failed:
            return
        node, why = next(iter(result.heartbeat_failed.items()))
        more = len(result.heartbeat_failed) - 1
        self.conditions.report(
            "heartbeat",
            self._retry(
                f"cannot write the heartbeat (status) of NodeTopology {node}"
                f"{f' and {more} other node(s)' if more else ''}: {why}"
            ),
        )

    async def _heartbeat(self, result: IbRound, node: str, changed: bool) -> None:
        """The node's heartbeat, if due; a failure is recorded in ``result``, never raised."""
        try:
            written = await self.heartbeats.beat(self.sink, node, changed=changed)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            result.heartbeat_failed[node] = f"{type(e).__name__}: {e}"
            return
        if written:
            result.heartbeats.append(node)

    async def run(
        self, stop: asyncio.Event, standby_poll: float = 5.0, on_round: Callable[[], None] | None = None
    ) -> None:
        """Rounds every ``period`` seconds until ``stop`` is set; while not the leader, checks
        leadership every ``standby_poll`` seconds so that a new leader starts at once.
        ``on_round`` after each round, a standby's included (liveness)."""
        while not stop.is_set():
            result = await self.run_once()
            if on_round is not None:
                on_round()
            wait = min(standby_poll, self.config.period) if result.skipped else self.config.period
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), wait)
