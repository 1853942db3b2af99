"""Kubernetes quantities in exact integers, resource vectors and their comparisons (DESIGN §4).

Units: CPU and extended resources in milli-units, byte resources in bytes; values finer than the
unit round *up*, as ``Quantity.MilliValue()`` / ``Value()`` do.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from extender.model.resources import (
    QuantityError,
    Resource,
    Shortfall,
    format_quantity,
    is_byte_resource,
    parse_quantity,
    to_units,
)
from tests.core.props import PROPERTY

GPU = "nvidia.com/gpu"
HCA = "rdma/hca"

# --- parsing: the table ------------------------------------------------------------------------

VALID = [
    # (resource, text, integer units)
    ("cpu", "500m", 500),
    ("cpu", "1", 1000),
    ("cpu", "1.5", 1500),
    ("cpu", "0.1", 100),
    ("cpu", "96", 96_000),
    ("cpu", "1e3", 1_000_000),
    ("cpu", "1E3", 1_000_000),  # exponent with a capital E (apimachinery accepts it)
    ("cpu", "1k", 1_000_000),
    ("cpu", "2e-3", 2),
    ("cpu", "5n", 1),  # 5e-9 CPU is less than a millicore: rounds up to 1
    ("cpu", "1u", 1),
    ("cpu", "+2", 2000),
    ("memory", "8Gi", 8 * 2**30),
    ("memory", "1.5Gi", 1_610_612_736),
    ("memory", "100Ki", 102_400),
    ("memory", "1Mi", 2**20),
    ("memory", "1Ti", 2**40),
    ("memory", "1Ei", 2**60),
    ("memory", "1e3", 1000),
    ("memory", "1k", 1000),
    ("memory", "1M", 10**6),
    ("memory", "1G", 10**9),
    ("memory", "1.5", 2),  # 1.5 bytes rounds up to 2
    ("memory", "500m", 1),  # half a byte rounds up to 1
    ("memory", "0", 0),
    ("ephemeral-storage", "10Gi", 10 * 2**30),
    ("hugepages-2Mi", "4Mi", 4 * 2**20),
    (GPU, "1", 1000),
    (GPU, "8", 8000),
    (GPU, "0.01", 10),  # exact: 0.01 GPU is 10 milli-GPU, not 9.999…
    (GPU, "0.5", 500),
    (GPU, "0.0001", 1),  # finer than a milli-GPU: rounds up to 1
    (GPU, "0.0015", 2),
    (GPU, "10m", 10),
    (HCA, "1", 1000),
    ("pods", "110", 110_000),
]


@pytest.mark.parametrize(("name", "text", "units"), VALID, ids=[f"{n}={t}" for n, t, _ in VALID])
def test_valid_quantities_parse_to_exact_integer_units(name: str, text: str, units: int) -> None:
    got = to_units(name, text)
    assert type(got) is int
    assert got == units


@pytest.mark.parametrize(
    ("value", "units"),
    [(1, 1000), (8, 8000), (1.5, 1500), (0.01, 10), (0.1, 100), (0.3, 300), (2.5e-3, 3)],
)
def test_yaml_numbers_are_taken_as_written(value: float, units: int) -> None:
    """YAML turns ``0.01`` into a float; it must still be exactly 10 milli-GPU (no binary float error)."""
    assert to_units(GPU, value) == units


def test_parse_quantity_is_an_exact_rational() -> None:
    assert parse_quantity("500m") == Fraction(1, 2)
    assert parse_quantity("0.01") == Fraction(1, 100)
    assert parse_quantity("1.5Gi") == Fraction(3 * 2**29)
    assert parse_quantity("-1") == -1


INVALID = [
    "",
    "abc",
    "1.5.3",
    "1Kb",
    "1ki",  # binary suffixes are case-sensitive
    "1K",  # there is no decimal "K"
    "1 Gi",
    "Gi",
    "0x10",
    "1e",
    "e3",
    "--1",
    "1e3Gi",
    "1m5",
    "1KiB",
    "∞",
    "1e999",  # exponent out of range
]


@pytest.mark.parametrize("text", INVALID)
def test_bad_quantity_raises_an_error_naming_the_bad_string(text: str) -> None:
    with pytest.raises(QuantityError) as err:
        to_units("cpu", text)
    assert repr(text) in str(err.value)


@pytest.mark.parametrize("value", [True, None, [1], {"a": 1}, float("nan"), float("inf")])
def test_non_quantity_values_are_rejected(value: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(value)  # type: ignore[arg-type]


def test_resource_list_error_names_the_resource_and_the_bad_string() -> None:
    with pytest.raises(QuantityError) as err:
        Resource.from_list({"cpu": "4", GPU: "eight"}, what="Pod default/w0: container main")
    msg = str(err.value)
    assert "Pod default/w0: container main" in msg
    assert GPU in msg
    assert "'eight'" in msg


def test_resource_list_rejects_negative_and_non_scalar_values() -> None:
    with pytest.raises(QuantityError, match="must not be negative"):
        Resource.from_list({"cpu": "-1"})
    with pytest.raises(QuantityError, match=r"memory: quantity \[1\]"):
        Resource.from_list({"memory": [1]})
    with pytest.raises(QuantityError, match=r"nvidia\.com/gpu"):
        Resource.from_list({GPU: True})


def test_resource_list_units_per_resource_name() -> None:
    r = Resource.from_list({"cpu": "500m", "memory": "1.5Gi", GPU: "0.01", HCA: 1, "pods": "110"})
    assert r.q == {"cpu": 500, "memory": 1_610_612_736, GPU: 10, HCA: 1000, "pods": 110_000}


@pytest.mark.parametrize(
    ("name", "byte"),
    [
        ("memory", True),
        ("ephemeral-storage", True),
        ("storage", True),
        ("hugepages-1Gi", True),
        ("cpu", False),
        ("pods", False),
        (GPU, False),
        (HCA, False),
        ("example.com/memory", False),
    ],
)
def test_byte_resources(name: str, byte: bool) -> None:
    assert is_byte_resource(name) is byte


# --- parsing: properties -------------------------------------------------------------------------

_BIN = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
_DEC = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
}
NAMES = st.sampled_from(["cpu", "memory", GPU, HCA, "hugepages-2Mi", "pods", "ephemeral-storage"])


@st.composite
def quantity_texts(draw: st.DrawFn) -> tuple[str, Fraction]:
    """A quantity spelled the Kubernetes way, with its exact value computed independently."""
    whole = draw(st.integers(0, 10**6))
    frac_digits = draw(st.text("0123456789", max_size=4))
    text = str(whole) + ("." + frac_digits if frac_digits else "")
    value = Fraction(whole) + (Fraction(int(frac_digits), 10 ** len(frac_digits)) if frac_digits else 0)
    kind = draw(st.sampled_from(["bin", "dec", "exp"]))
    if kind == "bin":
        suffix = draw(st.sampled_from(sorted(_BIN)))
        return text + suffix, value * _BIN[suffix]
    if kind == "dec":
        suffix = draw(st.sampled_from(sorted(_DEC)))
        return text + suffix, value * _DEC[suffix]
    exp = draw(st.integers(-9, 9))
    e = draw(st.sampled_from(["e", "E"]))
    return f"{text}{e}{exp}", value * Fraction(10) ** exp


@PROPERTY
@given(NAMES, quantity_texts())
def test_every_spelling_parses_to_the_ceiling_of_its_exact_value(name: str, q: tuple[str, Fraction]) -> None:
    text, value = q
    scale = 1 if name in ("memory", "ephemeral-storage", "hugepages-2Mi") else 1000
    assert to_units(name, text) == math.ceil(value * scale)


@PROPERTY
@given(NAMES, st.integers(0, 2**62))
def test_format_then_parse_round_trips(name: str, units: int) -> None:
    text = format_quantity(name, units)
    assert to_units(name, text) == units
    assert Resource.from_list(Resource({name: units}).to_list()).q == {name: units}


@pytest.mark.parametrize(
    ("name", "units", "text"),
    [
        ("cpu", 500, "500m"),
        ("cpu", 2000, "2"),
        (GPU, 10, "10m"),
        (GPU, 8000, "8"),
        ("memory", 8 * 2**30, "8Gi"),
        ("memory", 1536, "1536"),
        ("memory", 3 * 2**19, "1536Ki"),
        ("memory", 0, "0"),
    ],
)
def test_format_quantity_canonical_spelling(name: str, units: int, text: str) -> None:
    assert format_quantity(name, units) == text


# --- Resource arithmetic ---------------------------------------------------------------------------


def test_add_and_sub_are_per_name_and_do_not_mutate_operands() -> None:
    a = Resource({"cpu": 1000, GPU: 2000})
    b = Resource({"cpu": 500, HCA: 1000})
    s = a + b
    d = a - b
    assert s.q == {"cpu": 1500, GPU: 2000, HCA: 1000}
    assert d.q == {"cpu": 500, GPU: 2000, HCA: -1000}
    assert a.q == {"cpu": 1000, GPU: 2000}
    assert b.q == {"cpu": 500, HCA: 1000}
    assert d.any_negative()
    assert not s.any_negative()


def test_in_place_arithmetic_changes_only_the_receiver() -> None:
    a = Resource({"cpu": 1000})
    b = Resource({"cpu": 300, GPU: 10})
    a.iadd(b)
    assert a.q == {"cpu": 1300, GPU: 10}
    a.isub(b)
    assert a == Resource({"cpu": 1000})
    assert b.q == {"cpu": 300, GPU: 10}


def test_clone_is_independent() -> None:
    a = Resource({"cpu": 1})
    c = a.clone()
    c.iadd(Resource({"cpu": 5}))
    assert a.q == {"cpu": 1}


def test_equality_and_hash_ignore_zero_entries() -> None:
    a = Resource({"cpu": 1000, GPU: 0})
    b = Resource({"cpu": 1000})
    assert a == b
    assert hash(a) == hash(b)
    assert Resource({"cpu": 1000}) != Resource({"cpu": 1001})
    assert Resource.empty().is_empty()
    assert Resource({GPU: 0}).is_empty()
    assert not Resource({GPU: 1}).is_empty()


def test_scaled_maximum_total() -> None:
    a = Resource({"cpu": 2, GPU: 3})
    assert a.scaled(3).q == {"cpu": 6, GPU: 9}
    assert a.maximum(Resource({"cpu": 5, HCA: 1})).q == {"cpu": 5, GPU: 3, HCA: 1}
    assert Resource.total([a, a, Resource({HCA: 7})]).q == {"cpu": 4, GPU: 6, HCA: 7}
    assert Resource.total([]).is_empty()


def test_of_spells_slashes_and_dots() -> None:
    assert Resource.of(cpu=1, rdma_hca=2, nvidia__com_gpu=3).q == {"cpu": 1, "rdma/hca": 2, "nvidia.com/gpu": 3}


def test_truthiness_is_refused() -> None:
    with pytest.raises(TypeError):
        bool(Resource.empty())


RESOURCES = st.dictionaries(st.sampled_from(["cpu", "memory", GPU, HCA]), st.integers(0, 10**6), max_size=4).map(
    Resource
)


@PROPERTY
@given(RESOURCES, RESOURCES, RESOURCES)
def test_arithmetic_laws(a: Resource, b: Resource, c: Resource) -> None:
    assert a + b == b + a
    assert (a + b) + c == a + (b + c)
    assert (a + b) - b == a
    assert a - a == Resource.empty()
    assert a.less_equal(a + b)
    # less_equal is the per-name order with missing names as 0
    expected = all(v <= b.get(k) for k, v in a.q.items())
    assert a.less_equal(b) is expected


# --- comparisons -----------------------------------------------------------------------------------


def test_less_equal_treats_a_missing_name_as_zero() -> None:
    assert Resource({GPU: 0}).less_equal(Resource({"cpu": 1}))
    assert not Resource({GPU: 1}).less_equal(Resource({"cpu": 1}))


def test_less_equal_with_resource_names_fails_when_a_requested_name_is_missing() -> None:
    node = Resource({"cpu": 96_000, GPU: 8000})
    assert Resource({GPU: 8000}).less_equal_with_resource_names(node)
    assert not Resource({GPU: 8001}).less_equal_with_resource_names(node)
    # a name the node does not advertise at all never fits ...
    assert not Resource({HCA: 1}).less_equal_with_resource_names(node)
    # ... while plain less_equal compares it with 0 and also fails; a 0 request passes both
    assert Resource({HCA: 0}).less_equal_with_resource_names(node)
    assert Resource({HCA: 0}).less_equal(node)


def test_a_name_advertised_as_zero_is_present_but_too_small() -> None:
    node = Resource({GPU: 0})
    assert not Resource({GPU: 1}).less_equal_with_resource_names(node)
    (s,) = Resource({GPU: 1}).shortfalls(node)
    assert s == Shortfall(GPU, 1, 0, False)


def test_hundredth_of_a_gpu_is_exact() -> None:
    """0.01 GPU is exact: 100 × 0.01 GPU fits exactly 1 GPU, 101 do not."""
    one = Resource.from_list({GPU: "1"})
    hundredth = Resource.from_list({GPU: "0.01"})
    assert hundredth.scaled(100) == one
    assert hundredth.scaled(100).less_equal_with_resource_names(one)
    assert not hundredth.scaled(101).less_equal_with_resource_names(one)
    assert (one - hundredth.scaled(100)).is_empty()


@PROPERTY
@given(RESOURCES, RESOURCES)
def test_with_names_is_less_equal_plus_presence(a: Resource, b: Resource) -> None:
    expected = all(v == 0 or (k in b.q and v <= b.q[k]) for k, v in a.q.items())
    assert a.less_equal_with_resource_names(b) is expected
    assert (not a.shortfalls(b)) is expected
    if expected:
        assert a.less_equal(b)


def test_shortfall_messages_name_the_resource_and_both_amounts() -> None:
    node = Resource.from_list({GPU: "7", "memory": "8Gi", "cpu": "500m"})
    want = Resource.from_list({GPU: "8", "memory": "16Gi", "cpu": "1.5", HCA: "1"})
    shorts = want.shortfalls(node)
    assert [s.name for s in shorts] == sorted([GPU, "memory", "cpu", HCA])
    texts = {s.name: str(s) for s in shorts}
    assert texts[GPU] == "nvidia.com/gpu 8 > 7"
    assert texts["memory"] == "memory 16Gi > 8Gi"
    assert texts["cpu"] == "cpu 1.5 > 0.5"
    assert texts[HCA] == "rdma/hca 1 > none"
    assert next(s for s in shorts if s.name == HCA).missing


def test_fractional_gpu_shortfall_message() -> None:
    (s,) = Resource.from_list({GPU: "0.25"}).shortfalls(Resource.from_list({GPU: "0.01"}))
    assert str(s) == "nvidia.com/gpu 0.25 > 0.01"


def test_str_and_repr_use_kubernetes_spellings() -> None:
    r = Resource.from_list({"memory": "8Gi", GPU: "0.5", "cpu": "0"})
    assert str(r) == "memory:8Gi,nvidia.com/gpu:500m"
    assert "memory=8Gi" in repr(r)
    assert str(Resource.empty()) == "0"
