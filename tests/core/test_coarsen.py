"""``gangparts.coarsen``: a gang of too many count vectors is planned over merged kinds, and a
placement of those is one of the gang (never an over-promise). A property over random kinds
(requests, counts, quota anti-affinity between them) and limits:

* the merged gang has at most ``limit`` count vectors, or one kind;
* every quota's merged kind asks for at least what its own kind asks for, on every resource;
* two quotas whose kinds repel each other are in kinds that repel each other (the same kind
  then repels itself: one of it a node);
* every quota keeps its place: the merged kinds' counts add up, the order maps through, and
  every quota that stood for a kind still stands for its merged kind (its predicates still count);
* within the limit nothing is merged, and kinds that ask for the same are merged before any
  others.
"""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from extender.model.quota import QuotaInfo
from extender.model.resources import Resource
from extender.plugins.topology.gangparts import Mix, coarsen
from extender.plugins.topology.mixedfrontier import states
from extender.plugins.topology.mixedorder import Kind
from tests.core.props import PROPERTY

REQUESTS = st.fixed_dictionaries({"gpu": st.sampled_from([0, 1, 4, 8]), "cpu": st.sampled_from([1, 8, 32, 90])})


@st.composite
def mixes(draw: st.DrawFn) -> Mix:
    n = draw(st.integers(1, 7))
    requests = [draw(REQUESTS) for _ in range(n)]
    counts = [draw(st.integers(1, 5)) for _ in range(n)]
    apart: list[set[int]] = [set() for _ in range(n)]
    for t in range(n):
        for u in range(t + 1, n):
            if draw(st.integers(0, 3)) == 0:
                apart[t].add(u)
                apart[u].add(t)
    kinds = [Kind(r, c, frozenset(a)) for r, c, a in zip(requests, counts, apart, strict=True)]
    order = draw(st.permutations([t for t in range(n) for _ in range(counts[t])]))
    unbound = [QuotaInfo(f"q{i}", "research", Resource(requests[t])) for i, t in enumerate(order)]
    reps = [[next(q for q, k in zip(unbound, order, strict=True) if k == t)] for t in range(n)]
    head = draw(st.integers(0, len(order) - 1))
    return Mix(unbound, unbound[head], kinds, reps, list(order), order[head])


@PROPERTY
@given(mixes(), st.sampled_from([0, 1, 4, 16, 64, 4096]))
def test_merged_kinds_hold_no_quota_in_less_than_it_asks_for(mix: Mix, limit: int) -> None:
    out = coarsen(mix, limit)
    assert states(out.kinds) <= limit or len(out.kinds) == 1
    if states(mix.kinds) <= limit:
        assert out is mix
        return
    assert out.head is mix.head and out.unbound is mix.unbound
    assert sum(k.count for k in out.kinds) == len(mix.order)
    assert [out.order.count(g) for g in range(len(out.kinds))] == [k.count for k in out.kinds]
    group = {t: out.order[i] for i, t in enumerate(mix.order)}  # old kind → merged kind
    assert out.head_kind == group[mix.head_kind]
    for t, kind in enumerate(mix.kinds):
        merged = out.kinds[group[t]]
        assert all(merged.request.get(name, 0) >= v for name, v in kind.request.items()), (kind, merged)
        assert all(group[u] in merged.apart for u in kind.apart), (t, kind.apart, merged.apart)
        assert all(q in out.reps[group[t]] for q in mix.reps[t])
    mixed = any(len({_key(mix.kinds[t]) for t in group if group[t] == g}) > 1 for g in range(len(out.kinds)))
    if mixed:  # kinds asking for the same were merged before any others
        for t, u in itertools.combinations(range(len(mix.kinds)), 2):
            if _key(mix.kinds[t]) == _key(mix.kinds[u]):
                assert group[t] == group[u], f"kinds {t} and {u} ask for the same but were left apart: {out.kinds}"


def _key(kind: Kind) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((n, v) for n, v in kind.request.items() if v))
