"""How a hold reads where an operator looks (issue 16 item 4: "/diagnose of the held gang
(``HoldingNodes n4–n7 for default/big``)"): the held set in a compact form that never claims a node
the hold does not cover (``holds.describe_nodes``).
"""

from __future__ import annotations

import re
from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from extender.plugins.topology.holds import describe_nodes
from tests.core.props import PROPERTY

RUN = re.compile(r"n(\d+)(?:–n(\d+))?")


def _index(name: str) -> int:
    return int(name.removeprefix("n"))


def _read(text: str) -> tuple[list[tuple[int, int]], bool, int]:
    """The runs ``describe_nodes`` printed (first, last index), whether it cut the list short, and
    the node count it states (1 when it states none)."""
    listed, _, count = text.partition(" (")
    parts = listed.split(", ")
    cut = parts[-1] == "…"
    runs = []
    for part in parts[:-1] if cut else parts:
        m = RUN.fullmatch(part)
        assert m is not None, text
        first = int(m[1])
        runs.append((first, int(m[2]) if m[2] else first))
    return runs, cut, int(count.removesuffix(" nodes)")) if count else 1


@PROPERTY
@given(st.sets(st.integers(0, 40), min_size=1, max_size=20))
def test_the_held_set_reads_as_runs_of_consecutive_nodes_it_holds(indices: set[int]) -> None:
    """Every printed run is nodes the hold covers, runs are maximal (a gap between any two), in
    node-index order, and the count is the set's size; unless cut short (``…``) they are all of it."""
    nodes = [f"n{i}" for i in sorted(indices)]
    text = describe_nodes(nodes, _index)
    runs, cut, count = _read(text)
    assert count == len(nodes), text
    covered = [i for first, last in runs for i in range(first, last + 1)]
    assert set(covered) <= indices and covered == sorted(covered), text
    assert all(b[0] > a[1] + 1 for a, b in pairwise(runs)), text
    assert cut or set(covered) == indices, text


def test_a_hold_with_gaps_names_them() -> None:
    assert describe_nodes(["n1", "n4", "n5", "n6"], _index) == "n1, n4–n6 (4 nodes)"
    assert describe_nodes(["n4", "n5", "n6", "n7"], _index) == "n4–n7 (4 nodes)"
    assert describe_nodes(["n3"], _index) == "n3"
