"""``topology.zones.plan_by_spec``: its one-pass answer for "some zone holds the whole gang"
is the answer of planning every spec in full (``plan_zones`` per spec, then the best plan)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from extender.plugins.topology.zones import ZoneView, _plan_by_spec, plan_by_spec
from tests.core.props import PROPERTY


@st.composite
def views(draw: st.DrawFn) -> list[ZoneView]:
    out = []
    for i in range(draw(st.integers(0, 8))):
        spec = draw(st.sampled_from(["A100", "H100", "L40"]))
        size = draw(st.integers(1, 6))
        out.append(
            ZoneView(
                (spec, f"leaf-{i}"),
                size,
                draw(st.integers(0, size)),
                draw(st.integers(0, 48)),
                draw(st.integers(-3, 40)),
                draw(st.integers(0, 3)),
            )
        )
    return out


@PROPERTY
@given(views(), st.integers(-1, 12))
def test_the_one_pass_plan_is_the_full_plan(zones: list[ZoneView], need: int) -> None:
    assert plan_by_spec(zones, need) == _plan_by_spec(zones, need)
    assert plan_by_spec(iter(zones), need) == _plan_by_spec(zones, need)  # any iterable, read once


def test_a_zone_of_another_model_that_is_smaller_wins_over_a_roomier_one() -> None:
    a = ZoneView(("A100", "leaf-0"), 4, 4, 32, 0)
    h = ZoneView(("H100", "leaf-1"), 2, 2, 16, 8)
    assert plan_by_spec([a, h], 2) == [h]  # the smallest zone that holds the gang
    assert plan_by_spec([a, h], 3) == [a]  # only A100's holds three
    assert plan_by_spec([a, h], 5) is None  # no model holds five: specs never mix
