"""The clusters and gangs of the mixed-gang property (``test_mixed_gang_property.py``): gangs whose
quotas differ in size on small random clusters, some of their quotas bound in an earlier cycle,
and the oracle's answer for such a gang: whether the first of its unbound quotas could be bound
around its bound ones by the rules (one GPU model, capacity on every resource, usable nodes, rank
order for a strict gang) — exhaustive, beside ``mixed_oracle.py``'s bin-packing.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml
from hypothesis import strategies as st

from extender import wellknown
from extender.conf import default_policy, default_policy_text, load_policy_text
from extender.framework.policy import Policy
from tests import builders as b
from tests.core.mixed_oracle import charge, fewest_zones, fits, packs
from tests.core.topo_cluster import NODE_ROOM, Need, NodeSpec, exists_in_rank_order, node_objects

POLICY = default_policy()


def _packing_policy() -> Policy:
    doc = yaml.safe_load(default_policy_text())
    doc["plugins"]["topology"]["pack_workers"] = True
    return load_policy_text(yaml.safe_dump(doc), "default_policy.yaml + pack_workers")


PACKING = _packing_policy()
STRICT = {wellknown.ANNO_ENABLE_TOPOLOGY: "true"}


@dataclass(frozen=True)
class Member:
    gpu: int
    cpu: int

    def need(self) -> Need:
        return {"gpu": self.gpu, "hca": 1, "cpu": self.cpu}


@dataclass
class MixedGang:
    name: str
    members: list[Member]  # in task-index order
    strict: bool = False
    quotas: list[str] = field(default_factory=list)
    min_member: int = 0  # 0: every quota
    bound: dict[int, str] = field(default_factory=dict)  # task index → its quota's node, bound in an earlier cycle

    @property
    def least(self) -> int:
        """How many of its quotas must be bound for the gang to run (its PodGroup's minMember)."""
        return self.min_member or len(self.members)

    @property
    def unbound(self) -> list[int]:
        return [i for i in range(len(self.members)) if i not in self.bound]


@dataclass
class MixedCluster:
    nodes: list[NodeSpec]
    gangs: list[MixedGang]
    pack: bool = False  # the policy sets pack_workers

    def objects(self) -> list[dict[str, Any]]:
        objs = node_objects(self.nodes)
        for g in self.gangs:
            objs.append(b.podgroup(g.name, min_member=g.least))
            g.quotas = []
            for i, m in enumerate(g.members):
                q = f"q-{g.name}-{i}"
                g.quotas.append(q)
                gpu = m.gpu or None
                status = {"phase": "QuotaBound", "nodeName": g.bound[i]} if i in g.bound else None
                objs.append(b.quota(q, gpu=gpu, hca=1, request={"cpu": str(m.cpu)}, status=status))
                objs.append(
                    b.pod(
                        f"{g.name}-{i}",
                        group=g.name,
                        quota=q,
                        gpu=gpu,
                        hca=1,
                        cpu=str(m.cpu),
                        index=i,
                        annotations=STRICT if g.strict else None,
                    )
                )
        return objs

    def start(self) -> dict[str, Need]:
        """What each node's quotas hold before the cycle: its busy quota's, the gangs' bound ones'."""
        used = {n.name: n.load() for n in self.nodes}
        for g in self.gangs:
            for i, node in g.bound.items():
                charge(used[node], g.members[i].need(), -1)
        return used


members = st.builds(Member, st.sampled_from([0, 1, 2, 4, 8]), st.sampled_from([1, 2, 8, 16, 32, 48]))


NODE_STATES = st.tuples(
    st.integers(0, 9).map(lambda r: r > 0),  # Ready, 9 in 10
    st.integers(0, 9).map(lambda r: r == 0),  # tainted, 1 in 10
    st.sampled_from([0, 0, 0, 2, 4, 6, 8]),  # GPUs held by another job
    st.sampled_from([0, 0, 32, 64, 90]),  # CPUs it holds
)


@st.composite
def mixed_clusters(draw: st.DrawFn, max_gangs: int = 3) -> MixedCluster:
    models = draw(st.sampled_from([["A100"], ["A100", "H100"]]))
    mixed_leaves = draw(st.booleans())
    nodes: list[NodeSpec] = []
    for leaf in range(1, draw(st.integers(1, 3)) + 1):
        if len(nodes) == 8:
            break
        leaf_model = draw(st.sampled_from(models))
        for _ in range(draw(st.integers(1, min(4, 8 - len(nodes))))):
            ready, tainted, busy, busy_cpu = draw(NODE_STATES)
            model = draw(st.sampled_from(models)) if mixed_leaves else leaf_model
            k = len(nodes)
            nodes.append(NodeSpec(f"n{k}", k, leaf, model, ready, tainted, busy, busy_cpu))
    used = {n.name: n.load() for n in nodes}
    gangs = []
    for j in range(draw(st.integers(1, max_gangs))):
        g = MixedGang(f"g{j}", draw(st.lists(members, min_size=1, max_size=5)), draw(st.booleans()))
        size = len(g.members)
        if size > 1 and draw(st.integers(0, 3)) == 0:  # an elastic gang: minMember below its size
            g.min_member = draw(st.integers(1, size - 1))
        if size > 1 and draw(st.integers(0, 2)) == 0:
            draw_bound(draw, g, nodes, used)
        gangs.append(g)
    return MixedCluster(nodes, gangs, draw(st.booleans()))


def draw_bound(draw: st.DrawFn, g: MixedGang, nodes: list[NodeSpec], used: dict[str, Need]) -> None:
    """Some quotas of ``g`` bound in an earlier cycle (their pods still pending), on usable nodes of
    one GPU model with room; a strict gang's in rank order (each on a node index ≥ the one before)."""
    tasks = sorted(draw(st.sets(st.integers(0, len(g.members) - 1), min_size=1, max_size=len(g.members) - 1)))
    model, low = "", -1
    for i in tasks:
        need = g.members[i].need()
        fits = [
            n
            for n in nodes
            if n.usable
            and model in ("", n.model)
            and (not g.strict or n.index >= low)
            and all(used[n.name][k] + v <= NODE_ROOM[k] for k, v in need.items())
        ]
        if not fits:
            continue
        node = draw(st.sampled_from(fits))
        model, low = node.model, node.index
        g.bound[i] = node.name
        charge(used[node.name], need, -1)


# --- the oracle of a gang with bound quotas (beside mixed_oracle.py) -----------------------------
def fits_around(
    g: MixedGang, count: int, nodes: Sequence[NodeSpec], room: Mapping[str, Need], *, ordered: bool
) -> bool:
    """Whether the first ``count`` unbound quotas of ``g``, which has bound ones, fit the usable
    nodes (``room``) of its bound quotas' GPU model, in any zones; ``ordered``: with node indices
    that never descend as task indices ascend, its bound quotas' included (exhaustive)."""
    spec = {n.name: n for n in nodes}
    model = spec[next(iter(g.bound.values()))].model
    mine = sorted((n for n in nodes if n.name in room and n.model == model), key=lambda n: n.index)
    todo = g.unbound[:count]
    if not ordered:
        return packs([g.members[i].need() for i in todo], [room[n.name] for n in mine], ordered=False)
    left = {n.name: dict(room[n.name]) for n in mine}

    def take(i: int, node: str) -> bool:
        need = g.members[i].need()
        if not fits(need, left[node]):
            return False
        charge(left[node], need, 1)
        return True

    def give(i: int, node: str) -> None:
        charge(left[node], g.members[i].need(), -1)

    bound = {i: spec[n].index for i, n in g.bound.items()}
    return exists_in_rank_order(todo, bound, [(n.index, n.name) for n in mine], take, give)


def fits_first(g: MixedGang, count: int, nodes: Sequence[NodeSpec], room: Mapping[str, Need]) -> bool:
    """Whether the first ``count`` unbound quotas of ``g`` could be bound on ``room``, by the rules
    (one GPU model, in rank order around the bound ones for a strict gang)."""
    if g.bound:
        return fits_around(g, count, nodes, room, ordered=g.strict)
    needs = [g.members[i].need() for i in g.unbound[:count]]
    return fewest_zones(nodes, room, needs, ordered=g.strict) is not None


def node(i: int, leaf: int, busy: int = 0, cpu: int = 0) -> NodeSpec:
    return NodeSpec(f"n{i}", i, leaf, "A100", True, False, busy, cpu)


OPEN_END = 1 << 30  # no bound quota above: the range is open


def fence(g: MixedGang, i: int, index: Mapping[str, int]) -> tuple[int, int]:
    """Task ``i``'s node-index range between ``g``'s bound quotas (``index``: node → its index): the
    seed's ``[preNode, lastNode]``."""
    below = [index[n] for j, n in g.bound.items() if j < i]
    above = [index[n] for j, n in g.bound.items() if j > i]
    return max(below, default=-1), min(above, default=OPEN_END)


def order_due(
    g: MixedGang,
    count: int,
    nodes: Sequence[NodeSpec],
    room: Mapping[str, Need],
    *,
    outside: Collection[str] = (),
    budget: int | None = None,
) -> str:
    """The order a placement of ``g``'s first ``count`` unbound quotas (it has bound ones) keeps on
    the usable ``nodes`` (``room``) by ``mixedorder.order_kept``: ``"fences"`` (rank order around
    the bound quotas: each new quota inside its :func:`fence`, none below the new one before; the
    seed's ``[preNode, lastNode]``, even where the bound quotas themselves are out of order) when
    they allow it, else ``"plain"`` (among the new quotas), else ``"none"``. With a ``budget`` (a
    gang without strict order keeps to its siblings' zones first, docs/placement.md), an order is
    due only when it allows at most ``budget`` of those quotas on nodes of ``outside`` (beyond the
    siblings' zones): order never costs locality."""
    ranked = sorted((n for n in nodes if n.name in room), key=lambda n: n.index)
    index = {n.name: n.index for n in nodes}
    for order in ("fences", "plain"):
        if _fits_ordered(g, count, ranked, room, order, index, outside=outside, budget=budget):
            return order
    return "none"


def order_due_for(
    c: MixedCluster, g: MixedGang, new: Sequence[str], nodes: Sequence[NodeSpec], room: Mapping[str, Need]
) -> str:
    """:func:`order_due` for a placement made (``new``: the nodes its unbound quotas took, in task
    order, on the usable ``nodes``): without strict order a partly bound gang keeps to its
    siblings' zones first (docs/placement.md), so an order is due only where it puts no more of
    those quotas outside the siblings' zones than the placement did."""
    zone = {n.name: n.zone for n in c.nodes}
    home = {zone[n] for n in g.bound.values()}
    outside = {n.name for n in nodes if n.zone not in home}
    budget = None if g.strict or not home else sum(1 for n in new if n in outside)
    return order_due(g, len(new), nodes, room, outside=outside, budget=budget)


def _fits_ordered(
    g: MixedGang,
    count: int,
    ranked: Sequence[NodeSpec],
    room: Mapping[str, Need],
    order: str,
    index: Mapping[str, int],
    *,
    outside: Collection[str] = (),
    budget: int | None = None,
) -> bool:
    """Whether ``g``'s first ``count`` unbound quotas fit ``ranked`` (index order; nodes may take
    several) with node indices that never descend among them, each inside its fence for
    ``"fences"``, and (given a ``budget``) at most ``budget`` of them on nodes of ``outside`` —
    exhaustive."""
    todo = g.unbound[:count]
    left = {n.name: dict(room[n.name]) for n in ranked}

    def go(at: int, low: int, spent: int) -> bool:
        if at == len(todo):
            return True
        i = todo[at]
        need = g.members[i].need()
        lo, hi = fence(g, i, index) if order == "fences" else (-1, OPEN_END)
        for n in ranked:
            if n.index < low or not lo <= n.index <= hi or not fits(need, left[n.name]):
                continue
            cost = spent + (n.name in outside)
            if budget is not None and cost > budget:
                continue
            charge(left[n.name], need, 1)
            ok = go(at + 1, n.index, cost)
            charge(left[n.name], need, -1)
            if ok:
                return True
        return False

    return go(0, -1, 0)


def distinct_exists(
    g: MixedGang, count: int, free: Sequence[NodeSpec], room: Mapping[str, Need], order: str, index: Mapping[str, int]
) -> bool:
    """Whether ``g``'s first ``count`` unbound quotas fit the nodes ``free`` one a node, in
    ``order`` (:func:`order_due`; ``index``: every node's index, for the fences) — exhaustive."""
    todo = g.unbound[:count]
    ranked = sorted(free, key=lambda n: n.index)

    def go(at: int, low: int, used: frozenset[str]) -> bool:
        if at == len(todo):
            return True
        i = todo[at]
        lo, hi = fence(g, i, index) if order == "fences" else (-1, OPEN_END)
        for n in ranked:
            ascending = order == "none" or n.index > low
            if n.name in used or not ascending or not lo <= n.index <= hi:
                continue
            if fits(g.members[i].need(), room[n.name]) and go(at + 1, n.index, used | {n.name}):
                return True
        return False

    return go(0, -1, frozenset())
