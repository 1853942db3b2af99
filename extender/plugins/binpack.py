"""``binpack``: prefer nodes that are already full, so that whole nodes stay free for big jobs.

QN scores the quota ledger (how much of the node bound quotas hold, the seed's
``node.QuotaAllocated``) — ``quota_idle`` itself only filters. TN scores the pod ledger. A node
scores ``Σ_r w_r · (held_r + request_r) / allocatable_r / Σ_r w_r`` over the requested resources
with a weight, in [0, 1].
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from pydantic import Field

from extender import wellknown
from extender.framework.plugin import ArgsModel
from extender.framework.session import Session
from extender.model.node import NodeInfo
from extender.model.quota import QuotaInfo
from extender.model.resources import Resource
from extender.model.task import TaskInfo

NAME: Final = "binpack"
GPU_ALIAS: Final = "gpu"
"""The weights' key for every configured GPU resource (``--gpu-resources``), whatever its vendor."""


class BinpackArgs(ArgsModel):
    weights: dict[str, float] = Field(
        default_factory=lambda: {
            GPU_ALIAS: 10.0,
            wellknown.RESOURCE_CPU: 1.0,
            wellknown.RESOURCE_MEMORY: 1.0,
        },
        description=f"per-resource weights; resources not listed do not count; {GPU_ALIAS!r} stands for each "
        "resource of --gpu-resources not listed by name",
    )


Args = BinpackArgs


def packing_score(request: Resource, allocatable: Resource, free: Resource, weights: dict[str, float]) -> float:
    """How full the node would be with ``request`` placed on it, ``free`` being what is left of
    ``allocatable`` now: per weighted resource the request names, ``min(1, (allocatable − free +
    request) / allocatable)``, averaged by weight."""
    total_w = 0.0
    score = 0.0
    cap_of, free_of = allocatable.q, free.q
    for name, req in request.q.items():
        w = weights.get(name, 0.0)
        cap = cap_of.get(name, 0)
        if w <= 0 or cap <= 0 or req <= 0:
            continue
        total_w += w
        score += w * min(1.0, (cap - free_of.get(name, 0) + req) / cap)
    return score / total_w if total_w else 0.0


def resolve_weights(weights: dict[str, float], gpu_resources: tuple[str, ...]) -> dict[str, float]:
    """``weights`` with the ``gpu`` alias replaced by each configured GPU resource not named itself."""
    out = {k: v for k, v in weights.items() if k != GPU_ALIAS}
    if GPU_ALIAS in weights:
        for name in gpu_resources:
            out.setdefault(name, weights[GPU_ALIAS])
    return out


class Plugin:
    NAME: Final = NAME
    Args = BinpackArgs
    STAGES: Final = frozenset({"qn.node_order", "tn.node_order"})

    def __init__(self, args: BinpackArgs) -> None:
        self.args = args

    def open(self, ssn: Session) -> dict[str, Callable[..., Any]]:
        weights = resolve_weights(self.args.weights, ssn.gpu_resources)

        def node_order_qn(quota: QuotaInfo, node: NodeInfo) -> float:
            return packing_score(quota.request, node.allocatable, node.quota_idle, weights)

        def node_order_tn(task: TaskInfo, node: NodeInfo) -> float:
            return packing_score(task.request, node.allocatable, node.idle, weights)

        return {"qn.node_order": node_order_qn, "tn.node_order": node_order_tn}
