"""What of a gang one plan covers: its kinds (quotas of one shape) and, for a gang whose
``minMember`` is below its size, the most of its unbound quotas that fit. Pure functions: no
session, no I/O.

* A gang is planned over its **kinds** (``mixedplan.py``); its largest quota (its GPUs, then all
  its units; ties: the last name) stands for every quota when it is counted as one size.
* **Too many kinds** (:func:`coarsen`): a gang of more count vectors than the exact planning
  enumerates is planned over fewer, merged kinds: a merged kind asks for the most of every
  resource any of its quotas asks for, goes only where all of them may, and keeps apart from
  what any of them repels (from itself too when two of them repel each other). A placement of
  the merged kinds is one of the gang: never an over-promise (a kind may wait while its quotas,
  counted apart, would fit).
* **minMember.** A gang that does not fit whole still runs when enough of it fits: the planner
  places the most of its unbound quotas that fit, the lowest ranks first, as long as with its
  bound ones (and its finished tasks, counted as the gang gate counts: ``gang.quotas_bound``) they
  reach ``minMember`` — and at least one (:func:`most_that_fit`). The rest
  waits for room, in a later cycle, beside its bound siblings (as a non-topology job's quotas
  do, placed one by one until one does not fit).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from extender.framework.status import Status
from extender.model.quota import QuotaInfo
from extender.plugins.topology.gangplan import Range, Slot, ZoneId, ZoneOffer
from extender.plugins.topology.mixedfrontier import STATE_LIMIT, states
from extender.plugins.topology.mixedorder import Kind

__all__ = [
    "GangPlan",
    "Mix",
    "PlanKey",
    "SpecPlan",
    "coarsen",
    "for_planning",
    "glue",
    "kinds_of",
    "most_that_fit",
    "plan_key",
    "quota_size",
    "together",
]

P = TypeVar("P")
PlanKey = tuple[int, int, int, int, int, int, int, str]


@dataclass(slots=True)
class GangPlan:
    """A gang's plan: each unbound quota's node, the zones taken, and what waits."""

    nodes: dict[str, str]  # unbound quota → node
    zones: list[ZoneId]
    judged: bool = False  # every planned node was judged for its quota's own shape (else: judge each)
    rest: Status | None = None  # why the job's unbound quotas beyond the plan wait (minMember < size)
    _by_name: list[str] | None = field(default=None, repr=False, compare=False)  # its nodes, sorted once

    def others(self, first: str | None) -> list[str]:
        """The plan's nodes but ``first``, by name: where a quota may go when its own refuses it."""
        if self._by_name is None:
            self._by_name = sorted(set(self.nodes.values()))
        return [n for n in self._by_name if n != first]


@dataclass(slots=True)
class SpecPlan:
    """One GPU spec's answer for a gang, ranked among the specs by ``key`` (rule 1): the zones it
    takes; for a gang of one kind its slots (None: made for the winning spec only), for a gang of
    several kinds each unbound quota's node."""

    key: PlanKey
    zones: list[ZoneOffer]
    slots: list[Slot] | None
    nodes: dict[str, str] | None = None

    def tier(self, domains: Mapping[str, str], held: Iterable[str] = ()) -> int:
        """The highest tier the gang spans on this plan (what a hard ``highestTierAllowed``
        judges): 0 when its nodes — ``held``, its bound siblings', and the plan's, where the plan
        names them (a continuity run, a gang of several kinds) — lie in one named NVLink domain
        (``domains``: node → domain); else ``key[0]``."""
        names = [s.node for s in self.slots] if self.slots is not None else list((self.nodes or {}).values())
        found = {domains.get(n, "") for n in (*names, *held)}
        return 0 if names and found != {""} and len(found) == 1 else self.key[0]


@dataclass(slots=True)
class Mix:
    """A gang of several kinds: its unbound quotas (rank order), the largest, its kinds, the
    quotas standing for each kind (a node takes the kind only if it takes every one of them),
    each quota's kind, and the largest quota's kind."""

    unbound: list[QuotaInfo]
    head: QuotaInfo
    kinds: list[Kind]
    reps: list[list[QuotaInfo]]
    order: list[int]
    head_kind: int
    # a quota of ``unbound`` standing for the quotas glued to it (:func:`glue`): they go to its node
    glued: dict[str, list[str]] = field(default_factory=dict)


def quota_size(quota: QuotaInfo, gpus: Sequence[str]) -> tuple[int, int]:
    """How large a quota is, to find a gang's largest — for its plan (:func:`kinds_of`) and its
    hold (``holds.py``, ``holdroom.py``) alike: its GPUs (``gpus``: the GPU resource names), then
    all its units (so memory in bytes never outweighs a GPU)."""
    return (sum(quota.request.get(g) for g in gpus), sum(quota.request.q.values()))


def kinds_of(unbound: Sequence[QuotaInfo], shape_of: Callable[[QuotaInfo], int | None], gpus: Sequence[str]) -> Mix:
    """The gang's kinds: its quotas of one shape (a quota without one is a kind alone)."""
    sids = [shape_of(q) for q in unbound]
    if sids and sids[0] is not None and sids.count(sids[0]) == len(sids):  # one kind: all ask the same
        at = max(range(len(unbound)), key=lambda i: unbound[i].name)
        head = unbound[at]
        return Mix(list(unbound), head, [Kind(head.request.q, len(unbound))], [[unbound[0]]], [0] * len(sids), 0)
    index: dict[object, int] = {}
    reps: list[QuotaInfo] = []
    counts: list[int] = []
    order: list[int] = []
    for q, sid in zip(unbound, sids, strict=True):
        t = index.setdefault(sid if sid is not None else ("quota", q.name), len(index))
        if t == len(reps):
            reps.append(q)
            counts.append(0)
        counts[t] += 1
        order.append(t)
    apart = _apart(reps)
    kinds = [Kind(rep.request.q, n, apart[t]) for t, (rep, n) in enumerate(zip(reps, counts, strict=True))]
    # the largest quota (ties: the last name); the quotas of one kind ask for the same
    sizes = [quota_size(rep, gpus) for rep in reps]
    top = max(sizes)
    at = max((i for i, t in enumerate(order) if sizes[t] == top), key=lambda i: unbound[i].name)
    return Mix(list(unbound), unbound[at], kinds, [[r] for r in reps], order, order[at])


def _apart(reps: Sequence[QuotaInfo]) -> list[frozenset[int]]:
    """Per kind, the kinds whose quotas may not share a node with its own: quota anti-affinity
    between the gang's own quotas, either way (``quotaaffinity`` checks both). Only a quota
    without a shape has such terms or is repelled by them (``fitmemo``), and such a quota is a
    kind alone, so the pairs of kinds are the pairs of quotas."""
    out: list[set[int]] = [set() for _ in reps]
    terms = [(t, rep) for t, rep in enumerate(reps) if rep.quota_anti_affinity]
    for t, rep in terms:
        for u, other in enumerate(reps):
            if u != t and any(term.matches(other.name, other.labels) for term in rep.quota_anti_affinity):
                out[t].add(u)
                out[u].add(t)
    return [frozenset(a) for a in out]


def coarsen(mix: Mix, limit: int) -> Mix:
    """``mix`` with kinds merged until its count vectors (``mixedfrontier.states``) are at most
    ``limit`` (or one kind is left): first all kinds that ask for the same (the largest such
    group first: nothing of their room is lost), then, pair by pair, the two kinds whose merging
    asks for the least more than their quotas do (per resource, relative to the most any kind
    asks for; ties: the lower positions). See the module docstring for what a merged kind is."""
    groups = [[t] for t in range(len(mix.kinds))]
    kinds = mix.kinds
    while len(groups) > 1 and _states(kinds, groups) > limit:
        alike: dict[tuple[tuple[str, int], ...], list[int]] = {}
        for g, members in enumerate(groups):
            alike.setdefault(_key(_envelope(kinds, members)), []).append(g)
        same = max(alike.values(), key=len)
        pick = same if len(same) > 1 else list(_cheapest_pair(kinds, groups))
        merged = [t for g in pick for t in groups[g]]
        groups = [members for g, members in enumerate(groups) if g not in pick]
        groups.insert(pick[0], sorted(merged))
    if len(groups) == len(kinds):
        return mix
    return _merged(mix, groups)


def _states(kinds: Sequence[Kind], groups: Sequence[Sequence[int]]) -> int:
    return states([Kind({}, sum(kinds[t].count for t in members)) for members in groups])


def _envelope(kinds: Sequence[Kind], members: Sequence[int]) -> dict[str, int]:
    """Per resource, the most any of the kinds ``members`` asks for."""
    out: dict[str, int] = {}
    for t in members:
        for name, v in kinds[t].request.items():
            out[name] = max(out.get(name, 0), v)
    return out


def _key(request: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((n, v) for n, v in request.items() if v))


def _cheapest_pair(kinds: Sequence[Kind], groups: Sequence[Sequence[int]]) -> tuple[int, int]:
    """The two groups whose merging asks for the least more than their quotas do."""
    scale: dict[str, int] = {}
    for k in kinds:
        for name, v in k.request.items():
            scale[name] = max(scale.get(name, 0), v)

    def excess(members: Sequence[int]) -> float:
        top = _envelope(kinds, members)
        return sum(
            kinds[t].count * (v - kinds[t].request.get(name, 0)) / scale[name]
            for t in members
            for name, v in top.items()
            if v
        )

    pairs = itertools.combinations(range(len(groups)), 2)
    return min(pairs, key=lambda p: (excess([*groups[p[0]], *groups[p[1]]]), p))


def _merged(mix: Mix, groups: Sequence[Sequence[int]]) -> Mix:
    """``mix`` over the kinds ``groups`` (each a list of ``mix``'s kinds)."""
    group_of = {t: g for g, members in enumerate(groups) for t in members}
    kinds = []
    for members in groups:
        apart = frozenset(group_of[u] for t in members for u in mix.kinds[t].apart)
        count = sum(mix.kinds[t].count for t in members)
        kinds.append(Kind(_envelope(mix.kinds, members), count, apart))
    reps = [[q for t in members for q in mix.reps[t]] for members in groups]
    order = [group_of[t] for t in mix.order]
    return Mix(mix.unbound, mix.head, kinds, reps, order, group_of[mix.head_kind], mix.glued)


def for_planning(
    mix: Mix,
    fences: Sequence[Range],
    quotas: Callable[[], Iterable[QuotaInfo]],
    *,
    strict: bool,
    beside_earlier: bool = False,
) -> tuple[Mix, list[Range]]:
    """``mix`` and its quotas' ``fences`` as the exact planner takes them: the quotas that must
    share a node joined (:func:`together`, :func:`glue`; ``beside_earlier``: also those that may
    go beside a bound quota instead), then kinds merged down to ``mixedfrontier.STATE_LIMIT`` count
    vectors (:func:`coarsen`)."""
    pairs = together(mix.unbound, quotas, strict=strict, beside_earlier=beside_earlier)
    mix, kept = glue(mix, pairs, fences)
    return coarsen(mix, STATE_LIMIT), kept


def together(
    unbound: Sequence[QuotaInfo],
    quotas: Callable[[], Iterable[QuotaInfo]],
    *,
    strict: bool,
    beside_earlier: bool = False,
) -> list[tuple[int, int]]:
    """Which of ``unbound`` (positions, rank order) must share a node, for :func:`glue`: a quota
    bound in rank order goes, by a ``quotaAffinity`` term that selects none of the bound quotas
    (of ``quotas()``, the session's; the predicate keeps it to those) but some before it, to the
    node of the last of these; in strict rank order every quota between them goes there too
    (node indices never descend).

    ``beside_earlier``: also by a term that selects bound quotas as well. Such a quota may go to
    a bound one's node (the plan without this) or, once the earlier one is bound, beside it (the
    plan the planner tries when the first fails)."""
    pairs: list[tuple[int, int]] = []
    for i, q in enumerate(unbound):
        for term in q.quota_affinity:
            before = [j for j in range(i) if term.matches(unbound[j].name, unbound[j].labels)]
            if before and (
                beside_earlier
                or not any(o.node_name and o.name != q.name and term.matches(o.name, o.labels) for o in quotas())
            ):
                pairs += [(j, j + 1) for j in range(before[-1], i)] if strict else [(before[-1], i)]
    return pairs


def glue(mix: Mix, pairs: Sequence[tuple[int, int]], fences: Sequence[Range]) -> tuple[Mix, list[Range]]:
    """``mix`` (and each quota's fence) with the quotas that must share a node planned as one:
    ``pairs`` of positions in ``mix.unbound`` (quota affinity between the gang's own quotas,
    ``planner.py`` says which). Each set of quotas the pairs join is a kind alone asking for the
    sum of their requests, which a node takes only if it takes every one of them, inside the
    fences of all of them, at the place of its first quota in rank order; the others follow it
    (``Mix.glued``), judged without the ``quotaAffinity`` terms the quotas before it in its set
    satisfy (:func:`_beside`). Not when a joined quota repels or is repelled by a kind
    (``Kind.apart``): ``mix`` as it is."""
    parent = list(range(len(mix.order)))

    def root(p: int) -> int:
        while parent[p] != p:
            p = parent[p]
        return p

    for a, b in pairs:
        parent[max(root(a), root(b))] = min(root(a), root(b))
    units: dict[int, list[int]] = {}
    for p in range(len(mix.order)):
        units.setdefault(root(p), []).append(p)
    joined = [ps for ps in units.values() if len(ps) > 1]
    kinds = mix.kinds
    if not joined or any(kinds[mix.order[p]].apart for ps in joined for p in ps):
        return mix, list(fences)
    taken = {p for ps in joined for p in ps}
    left = [kinds[t].count - sum(1 for p in taken if mix.order[p] == t) for t in range(len(kinds))]
    renum = {t: i for i, t in enumerate(t for t in range(len(kinds)) if left[t] > 0)}
    new_kinds = [Kind(kinds[t].request, left[t]) for t in renum]
    reps = [mix.reps[t] for t in renum]
    unit_kind: dict[int, int] = {}
    for ps in joined:
        unit_kind[ps[0]] = len(new_kinds)
        total: dict[str, int] = {}
        for p in ps:
            for name, v in kinds[mix.order[p]].request.items():
                total[name] = total.get(name, 0) + v
        new_kinds.append(Kind(total, 1))
        unit_reps = []
        for k, p in enumerate(ps):
            member, partners = mix.unbound[p], [mix.unbound[m] for m in ps[:k]]
            unit_reps += [_beside(q, partners) if q.name == member.name else q for q in mix.reps[mix.order[p]]]
        reps.append(unit_reps)
    unbound, order, kept, glued = [], [], [], {}
    for p, q in enumerate(mix.unbound):
        if p in unit_kind:
            ps = units[p]
            unbound.append(q)
            order.append(unit_kind[p])
            kept.append(_within_all([fences[m] for m in ps]))
            glued[q.name] = [mix.unbound[m].name for m in ps[1:]]
        elif p not in taken:
            unbound.append(q)
            order.append(renum[mix.order[p]])
            kept.append(fences[p])
    at = next(p for p, q in enumerate(mix.unbound) if q is mix.head)
    head_kind = unit_kind[root(at)] if at in taken else renum[mix.order[at]]
    return Mix(unbound, mix.head, new_kinds, reps, order, head_kind, glued), kept


def _beside(quota: QuotaInfo, partners: Sequence[QuotaInfo]) -> QuotaInfo:
    """``quota`` as the planner judges it on the node of ``partners`` (the quotas glued before it,
    bound there first): without the ``quotaAffinity`` terms that select one of them, which that
    node satisfies whatever node it is."""
    kept = tuple(t for t in quota.quota_affinity if not any(t.matches(o.name, o.labels) for o in partners))
    if len(kept) == len(quota.quota_affinity):
        return quota
    out = quota.clone()
    out.quota_affinity = kept
    return out


def _within_all(ranges: Sequence[Range]) -> Range:
    """The node-index range inside all of ``ranges``."""
    los = [lo for lo, _ in ranges if lo is not None]
    his = [hi for _, hi in ranges if hi is not None]
    return (max(los) if los else None, min(his) if his else None)


def most_that_fit(plan: Callable[[int], P | Status], low: int, high: int) -> P | None:
    """The plan ``plan(k)`` for the largest ``k`` in ``[low, high]`` that has one (None: none has).
    By bisection: the first ``k`` ranks of a plan for ``k + 1`` quotas are a plan for ``k``, so
    whether a plan exists can only fall as ``k`` grows."""
    best: P | None = None
    while low <= high:
        k = (low + high) // 2
        got = plan(k)
        if isinstance(got, Status):
            high = k - 1
        else:
            best, low = got, k + 1
    return best


def plan_key(chosen: Sequence[ZoneOffer], spec: str, span: int) -> PlanKey:
    """What ranks the plans of specs (rule 1; the least is best): the tier ``span`` spanned, the
    zones, more affinity, then costs (the capacity of untouched zones broken, the capacity and
    the nodes taken, the lowest index). One zone is best fit whatever its spec (as
    ``gangplan.single_zone_key`` orders the zones of one spec): it breaks nothing."""
    affinity = broken = capacity = size = 0
    first = min((z.first_index for z in chosen), default=0)
    for z in chosen:
        affinity += z.affinity
        capacity += z.capacity
        size += z.size
        if z.untouched and len(chosen) > 1:
            broken += z.capacity
    return (span, len(chosen), -affinity, broken, capacity, size, first, spec)
