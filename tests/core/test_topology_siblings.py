"""``topology.siblings.BoundSiblings`` against the plain reading it replaces.

For every quota placed, the topology plugin asks for the nearest bound siblings in rank order
(largest node index among smaller quota indices, smallest among larger ones) and for the nodes the
job takes. The structure answers in O(log n); these properties hold it to the O(n) pass over the
job's bound quotas that it replaced, for any order of binds, repeated and missing quota indices,
and negative node indices (a ``node-index`` annotation may say so) — both with its trees (many
bound quotas) and with its plain pass (few), and across the switch from one to the other.
"""

from __future__ import annotations

from unittest import mock

from hypothesis import given
from hypothesis import strategies as st

from extender.plugins.topology import siblings as module
from extender.plugins.topology.siblings import BoundSiblings
from tests.core.props import PROPERTY


def naive(bound: dict[str, tuple[int | None, int, str]], me: int) -> tuple[int | None, int | None]:
    low = max((ni for idx, ni, _ in bound.values() if idx is not None and idx < me), default=None)
    high = min((ni for idx, ni, _ in bound.values() if idx is not None and idx > me), default=None)
    return low, high


@st.composite
def jobs(draw: st.DrawFn) -> tuple[list[tuple[str, int | None]], list[tuple[str, int, str]]]:
    """(the job's quotas with their indices, binds in the order they happen)."""
    n = draw(st.integers(0, 12))
    indices = draw(st.lists(st.one_of(st.none(), st.integers(-2, 8)), min_size=n, max_size=n))
    members = [(f"q{i}", indices[i]) for i in range(n)]
    order = draw(st.permutations(range(n)))
    k = draw(st.integers(0, n))
    binds = []
    for i in order[:k]:
        node_index = draw(st.integers(-5, 30))
        binds.append((f"q{i}", node_index, f"n{draw(st.integers(0, 4))}"))
    return members, binds


@PROPERTY
@given(jobs())
def test_neighbours_and_taken_nodes_match_a_pass_over_the_bound_quotas(
    job: tuple[list[tuple[str, int | None]], list[tuple[str, int, str]]],
) -> None:
    members, binds = job
    index = dict(members)
    for small in (0, 3, module.SMALL):  # trees from the first bind, after three, the default
        with mock.patch.object(module, "SMALL", small):
            siblings = BoundSiblings(members)
            bound: dict[str, tuple[int | None, int, str]] = {}
            for name, node_index, node in binds:
                assert siblings.add(name, index[name], node_index, node)
                bound[name] = (index[name], node_index, node)
                for me in range(-3, 10):
                    assert siblings.neighbours(me) == naive(bound, me)
                assert set(siblings.taken) == {node for _, _, node in bound.values()}
                assert sum(siblings.taken.values()) == len(bound)
                assert siblings.quotas == bound


def test_what_it_cannot_account_for_is_refused_and_changes_nothing() -> None:
    siblings = BoundSiblings([("q0", 0), ("q1", 1)])
    assert siblings.add("q0", 0, 10, "n10")
    before = (dict(siblings.quotas), dict(siblings.taken), siblings.neighbours(1))
    assert not siblings.add("q0", 0, 11, "n11")  # already counted
    assert not siblings.add("q9", 1, 12, "n12")  # not one of the job's quotas
    assert not siblings.add("q1", 5, 12, "n12")  # an index it was not built with
    assert (dict(siblings.quotas), dict(siblings.taken), siblings.neighbours(1)) == before
    assert siblings.neighbours(1) == (10, None)
    assert siblings.neighbours(-1) == (None, 10)
