"""Property tests: families of valid objects are accepted, and each kind of corruption is caught."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from extender.model.resources import QuantityError, parse_quantity

from . import schema
from .objects import CRDS, QUANTITY_PATTERN
from .strategies import BY_KIND, QUANTITY

KINDS = sorted(CRDS)
SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)

Path = tuple[Any, ...]


def locations(obj: Any, node: Mapping[str, Any], path: Path = ()) -> Iterator[tuple[Path, Any, Mapping[str, Any]]]:
    """(path, value, schema node) for every value in ``obj`` that the schema declares."""
    yield path, obj, node
    if isinstance(obj, dict):
        props = node.get("properties", {})
        extra = node.get("additionalProperties")
        for key, value in obj.items():
            if key in props:
                yield from locations(value, props[key], (*path, key))
            elif isinstance(extra, Mapping):
                yield from locations(value, extra, (*path, key))
    elif isinstance(obj, list):
        for i, item in enumerate(obj):
            yield from locations(item, node.get("items", {}), (*path, i))


def replaced(obj: Any, path: Path, value: Any) -> Any:
    out = copy.deepcopy(obj)
    target = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return out


@pytest.mark.parametrize("kind", KINDS)
@SETTINGS
@given(data=st.data())
def test_every_object_the_contract_allows_is_accepted(kind: str, data: st.DataObject) -> None:
    obj = data.draw(BY_KIND[kind])
    root = schema.openapi_schema(CRDS[kind])
    assert schema.validate(obj, CRDS[kind]) == []
    assert schema.prune(obj, root) == obj  # nothing the schema does not declare
    assert schema.validate(schema.apply_defaults(obj, root), CRDS[kind]) == []


@pytest.mark.parametrize("kind", KINDS)
@SETTINGS
@given(data=st.data())
def test_an_unknown_field_anywhere_is_rejected_naming_it(kind: str, data: st.DataObject) -> None:
    obj = data.draw(BY_KIND[kind])
    root = schema.openapi_schema(CRDS[kind])
    structs = [
        (p, v)
        for p, v, n in locations(obj, root)
        if isinstance(v, dict) and "properties" in n and p[:1] != ("metadata",)
    ]
    path, value = data.draw(st.sampled_from(structs))
    bad = replaced(obj, path, {**value, "zzUnknown": 1}) if path else {**obj, "zzUnknown": 1}
    expected = schema.field_path(root, (*path, "zzUnknown"))
    assert expected in {e.field for e in schema.validate(bad, CRDS[kind])}
    assert schema.validate(bad, CRDS[kind], strict=False) == []


NOT_A_QUANTITY = st.one_of(
    st.text(max_size=8).filter(lambda s: not re.search(schema.go_pattern(QUANTITY_PATTERN), s)),
    st.floats(allow_nan=False).filter(lambda f: not f.is_integer()),
    st.booleans(),
    st.lists(st.integers(), max_size=1),
)


@pytest.mark.parametrize("kind", ["Quota", "PodGroup", "Queue"])
@SETTINGS
@given(data=st.data())
def test_a_malformed_quantity_anywhere_is_rejected_naming_it(kind: str, data: st.DataObject) -> None:
    obj = data.draw(BY_KIND[kind])
    root = schema.openapi_schema(CRDS[kind])
    spots = [p for p, _, n in locations(obj, root) if n.get("x-kubernetes-int-or-string")]
    assume(spots)
    path = data.draw(st.sampled_from(spots))
    bad = replaced(obj, path, data.draw(NOT_A_QUANTITY))
    assert schema.field_path(root, path) in {e.field for e in schema.validate(bad, CRDS[kind])}


@pytest.mark.parametrize("kind", ["Quota", "PodGroup", "Queue", "JobQueue"])  # NodeTopology has no enum
@SETTINGS
@given(data=st.data())
def test_a_value_outside_an_enum_is_rejected_naming_it(kind: str, data: st.DataObject) -> None:
    obj = data.draw(BY_KIND[kind])
    root = schema.openapi_schema(CRDS[kind])
    spots = [(p, n) for p, _, n in locations(obj, root) if "enum" in n]
    assume(spots)
    path, node = data.draw(st.sampled_from(spots))
    wrong = data.draw(st.text(max_size=12).filter(lambda s: s not in node["enum"]))
    bad = replaced(obj, path, wrong)
    assert schema.field_path(root, path) in {e.field for e in schema.validate(bad, CRDS[kind])}


# ---- the CRD's quantity pattern against the scheduler's own quantity parser -----------------

_PATTERN = re.compile(schema.go_pattern(QUANTITY_PATTERN))
_EXPONENT = re.compile(r"[eE]([+-]?[0-9.]*)$")


def _integer_exponent_in_range(text: str) -> bool:
    """parse_quantity (like Kubernetes' ParseQuantity) only takes integer exponents; it caps them at 64."""
    m = _EXPONENT.search(text)
    if m is None:
        return True
    return bool(re.fullmatch(r"[+-]?[0-9]+", m.group(1))) and abs(int(m.group(1))) <= 64


@settings(max_examples=300, deadline=None)
@given(text=st.from_regex(QUANTITY_PATTERN, fullmatch=True))
def test_every_quantity_the_crd_admits_the_scheduler_can_parse(text: str) -> None:
    assume("\n" not in text)
    assume(_integer_exponent_in_range(text))
    parse_quantity(text)  # must not raise


@settings(max_examples=500, deadline=None)
@given(text=st.text(alphabet="0123456789.+-eEkKMGTPinum", max_size=7))
def test_every_string_the_scheduler_parses_the_crd_admits(text: str) -> None:
    try:
        parse_quantity(text)
    except QuantityError:
        return
    assert _PATTERN.search(text), text


@settings(max_examples=100, deadline=None)
@given(value=QUANTITY)
def test_the_quantity_strategy_only_makes_parseable_quantities(value: object) -> None:
    parse_quantity(value)  # type: ignore[arg-type]
