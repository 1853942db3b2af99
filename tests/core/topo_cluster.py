"""Shared pieces of the topology placement properties: small clusters as API objects, the
ledger invariants after a cycle, and the replay of a cycle's bindings in commit order.

Every node is 8 GPUs, 8 ``rdma/hca`` and 96 CPUs (``tests.builders.node``'s defaults), in one
leaf ``s<leaf>``; some hold a bound quota of another job (with its running pod) — the existing
load — and some are NotReady or tainted.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from extender import wellknown
from extender.framework.intents import BindQuota
from extender.framework.session import Session
from extender.model.resources import Resource
from extender.scheduler import CycleResult
from tests import builders as b

NOW = 1_800_000_000.0
NODE_ROOM: Mapping[str, int] = {"gpu": 8, "hca": 8, "cpu": 96}
"""What every node of these clusters offers quotas, in the units the oracles count in."""

Need = dict[str, int]  # "gpu" / "hca" / "cpu" → amount, the oracles' plain view of a request


@dataclass
class NodeSpec:
    name: str
    index: int
    leaf: int
    model: str
    ready: bool
    tainted: bool
    busy: int  # GPUs already held by a bound quota with a running pod
    busy_cpu: int = 0  # CPUs that quota holds
    domain: str = ""  # its NVLink domain (label ``nvidia.com/gpu.clique``; "": none)

    @property
    def usable(self) -> bool:
        return self.ready and not self.tainted

    @property
    def zone(self) -> tuple[str, int]:
        """(GPU model, leaf): the planner's zone."""
        return (self.model, self.leaf)

    def load(self) -> Need:
        return {"gpu": self.busy, "hca": 0, "cpu": self.busy_cpu}


def node_objects(nodes: Sequence[NodeSpec], repel: Mapping[str, list[str]] | None = None) -> list[dict[str, Any]]:
    """The queue ``research``, the nodes with their NodeTopology, and each busy node's bound quota
    and running pod (``repel``: busy node → the quota names its quota's anti-affinity repels)."""
    objs: list[dict[str, Any]] = [b.queue("research")]
    for n in nodes:
        taints = [{"key": "maintenance", "value": "true", "effect": "NoSchedule"}] if n.tainted else None
        labels = {"nvidia.com/gpu.clique": n.domain} if n.domain else None
        objs.append(b.node(n.name, gpu_model=n.model, ready=n.ready, taints=taints, labels=labels))
        objs.append(b.topology(n.name, [f"s{n.leaf}"]))
        if n.busy or n.busy_cpu:
            q = f"busy-{n.name}"
            repelled = (repel or {}).get(n.name)
            affinity = {"quotaAntiAffinity": [{"quotaNames": repelled}]} if repelled else None
            cpu = {"cpu": str(n.busy_cpu)} if n.busy_cpu else None
            gpu = n.busy or None
            status = {"phase": "QuotaBound", "nodeName": n.name}
            objs.append(b.quota(q, gpu=gpu, hca=None, request=cpu, affinity=affinity, status=status))
            objs.append(
                b.pod(
                    q,
                    quota=q,
                    gpu=gpu,
                    hca=None,
                    cpu=str(n.busy_cpu) if n.busy_cpu else "4",
                    node=n.name,
                    phase="Running",
                    annotations={wellknown.ANNO_QUEUE_NAME: "research"},
                )
            )
    return objs


def held_to_nvlink(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``objs`` with every PodGroup held hard to one NVLink domain (``highestTierAllowed: nvlink``,
    ``mode: hard``)."""
    for o in objs:
        if o["kind"] == "PodGroup":
            o["spec"]["topology"] = {"highestTierAllowed": "nvlink", "mode": "hard"}
    return objs


def check_ledgers(ssn: Session) -> None:
    """Invariant 1 on every node (its bound quotas fit its allocatable on every resource, the
    ledgers recompute exactly) and invariant 3 on every quota."""
    for node in ssn.nodes():
        node.check()
        held = Resource.total(node.quota_allocated.values())
        assert all(v <= node.allocatable.get(k) for k, v in held.q.items() if v), f"invariant 1 on {node.name}"
    for q in ssn.quotas():
        assert not q.over_claimed(), f"invariant 3 on {q.name}"


def used_before_each_gang(
    result: CycleResult, start: Mapping[str, Need], need_of: Mapping[str, Need], gang_of: Mapping[str, str]
) -> tuple[dict[str, dict[str, Need]], dict[str, Need]]:
    """Replays the cycle's bindings in commit order: (gang → what each node held just before the
    gang's first binding, what each node holds at the end). ``start``: node → load before the
    cycle; ``need_of``: each gang quota's request; ``gang_of``: gang quota → its gang."""
    used = {n: dict(v) for n, v in start.items()}
    before: dict[str, dict[str, Need]] = {}
    for intent in result.intents:
        if isinstance(intent, BindQuota) and intent.quota in gang_of:
            g = gang_of[intent.quota]
            if g not in before:
                before[g] = {n: dict(v) for n, v in used.items()}
            for k, v in need_of[intent.quota].items():
                used[intent.node][k] = used[intent.node].get(k, 0) + v
    return before, used


def free_room(nodes: Sequence[NodeSpec], used: Mapping[str, Need]) -> dict[str, Need]:
    """Each usable node's room for quotas, given what it holds."""
    return {n.name: {k: cap - used[n.name].get(k, 0) for k, cap in NODE_ROOM.items()} for n in nodes if n.usable}


def exists_in_rank_order(
    todo: Sequence[int],
    bound: Mapping[int, int],
    nodes: Sequence[tuple[int, str]],
    take: Callable[[int, str], bool],
    give: Callable[[int, str], None],
) -> bool:
    """Whether the unbound task indices ``todo`` fit ``nodes`` ((node index, name), index order)
    with node indices that never descend as task indices ascend, the bound ones (task index →
    node index) included — an exhaustive search. ``take(task, node)`` takes the task's room on the
    node if it has any (False: none), ``give`` hands it back."""
    seq = sorted([*todo, *bound])

    def go(at: int, low: int) -> bool:
        if at == len(seq):
            return True
        i = seq[at]
        if i in bound:
            return bound[i] >= low and go(at + 1, bound[i])
        for index, name in nodes:
            if index >= low and take(i, name):
                ok = go(at + 1, index)
                give(i, name)
                if ok:
                    return True
        return False

    return go(0, -1)


def fewest_nodes(slots: Sequence[int], need: int) -> tuple[int, int] | None:
    """``pack_workers``' oracle: the fewest of these nodes (each with room for ``slots`` quotas of
    the gang) that hold ``need`` quotas, and the least room they take among sets of that size —
    found by trying every set; None when all of them do not hold ``need``."""
    for k in range(1, len(slots) + 1):
        sums = [sum(s) for s in itertools.combinations(slots, k) if sum(s) >= need]
        if sums:
            return k, min(sums)
    return None
