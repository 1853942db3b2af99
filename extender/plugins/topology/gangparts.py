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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from extender.framework.status import Status
from extender.model.quota import QuotaInfo
from extender.plugins.topology.gangplan import ZoneOffer
from extender.plugins.topology.mixedplan import Kind, states

__all__ = ["Mix", "PlanKey", "coarsen", "kinds_of", "most_that_fit", "plan_key"]

P = TypeVar("P")
PlanKey = tuple[int, int, int, int, int, int, int, str]


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


def _size(quota: QuotaInfo, gpus: Sequence[str]) -> tuple[int, int]:
    """How large a quota is, to find a gang's largest: its GPUs, then all its units."""
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
    sizes = [_size(rep, gpus) for rep in reps]
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
    """``mix`` with kinds merged until its count vectors (``mixedplan.states``) are at most
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
    return Mix(mix.unbound, mix.head, kinds, reps, order, group_of[mix.head_kind])


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
