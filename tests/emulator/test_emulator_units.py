"""The emulator's pure parts: JSONPath, patches, selectors, ages, Table negotiation."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.emulator import errors
from extender.emulator.jsonpath import JSONPath, JSONPathError
from extender.emulator.meta import human_duration
from extender.emulator.patch import (
    PatchError,
    apply_json_patch,
    apply_merge_patch,
    apply_strategic_merge_patch,
)
from extender.emulator.resources import BUILTIN_TYPES
from extender.emulator.selection import Selection, parse_field_selector
from extender.emulator.tables import wants_table

PODS = next(rt for rt in BUILTIN_TYPES if rt.plural == "pods")

OBJ: dict[str, Any] = {
    "metadata": {"name": "n", "labels": {"a.b/c": "x", "plain": "y"}},
    "spec": {
        "items": [{"name": "i0"}, {"name": "i1"}],
        "a.b": {"c": 1},
        "tiers": [{"level": 1, "name": "leaf"}, {"level": 2, "name": "spine", "up": {"ok": True}}, {"name": "x"}],
    },
    "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Synced", "status": "False"}]},
}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (".metadata.name", ["n"]),
        ("{.metadata.name}", ["n"]),
        (".metadata.labels['a.b/c']", ["x"]),
        ('.metadata.labels["plain"]', ["y"]),
        (".spec.a\\.b.c", [1]),
        (".spec.items[0].name", ["i0"]),
        (".spec.items[-1].name", ["i1"]),
        (".spec.items[*].name", ["i0", "i1"]),
        (".spec.items[5].name", []),
        (".spec.missing.deeper", []),
        (".metadata.name.oops", []),
        (".spec.tiers[?(@.level==2)].name", ["spine"]),
        ("{.spec.tiers[?(@.level == 1)].name}", ["leaf"]),
        (".spec.tiers[?(@.level==3)].name", []),
        (".spec.tiers[?(@.level!=1)].name", ["spine"]),  # an element without the field never compares
        (".spec.tiers[?(@.up.ok==true)].name", ["spine"]),
        ('.status.conditions[?(@.type=="Ready")].status', ["True"]),
        (".status.conditions[?(@.type=='Synced')].status", ["False"]),
        (".spec.items[?(@.name==1)].name", []),
    ],
)
def test_jsonpath_subset(path: str, expected: list[Any]) -> None:
    assert JSONPath.parse(path).find(OBJ) == expected


@pytest.mark.parametrize(
    "path", ["metadata.name", ".a[?(@.b)]", ".a[?(@.b>1)]", ".a[?(@.b==x)]", "..name", ".a[1:2]", ".a['x'"]
)
def test_jsonpath_outside_the_subset_is_rejected(path: str) -> None:
    with pytest.raises(JSONPathError):
        JSONPath.parse(path)


def test_merge_patch_rfc7386_examples() -> None:
    target = {"title": "Goodbye!", "author": {"givenName": "John", "familyName": "Doe"}, "tags": ["example", "sample"]}
    patch = {"title": "Hello!", "phoneNumber": "+01-123-456-7890", "author": {"familyName": None}, "tags": ["example"]}
    assert apply_merge_patch(target, patch) == {
        "title": "Hello!",
        "author": {"givenName": "John"},
        "tags": ["example"],
        "phoneNumber": "+01-123-456-7890",
    }
    assert target["author"] == {"givenName": "John", "familyName": "Doe"}  # not modified
    assert apply_merge_patch({"a": [{"b": "c"}]}, {"a": [1]}) == {"a": [1]}
    assert apply_merge_patch({"a": "b"}, {"a": None}) == {}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(st.text(max_size=3), json_values, max_size=4),
    st.dictionaries(st.text(max_size=3), json_values, max_size=4),
)
def test_merge_patch_is_idempotent(target: dict[str, Any], patch: dict[str, Any]) -> None:
    once = apply_merge_patch(target, patch)
    assert apply_merge_patch(once, patch) == once


def test_json_patch_rfc6902_examples() -> None:
    assert apply_json_patch({"foo": ["bar", "baz"]}, [{"op": "add", "path": "/foo/1", "value": "qux"}]) == {
        "foo": ["bar", "qux", "baz"]
    }
    assert apply_json_patch({"foo": ["bar"]}, [{"op": "add", "path": "/foo/-", "value": "x"}]) == {"foo": ["bar", "x"]}
    assert apply_json_patch({"/": 1, "~": 2}, [{"op": "remove", "path": "/~1"}, {"op": "remove", "path": "/~0"}]) == {}
    with pytest.raises(PatchError) as err:
        apply_json_patch({"baz": "qux"}, [{"op": "test", "path": "/baz", "value": "bar"}])
    assert err.value.code == 422 and err.value.to_api_error().code == 422
    with pytest.raises(PatchError) as err:
        apply_json_patch({"foo": [1]}, [{"op": "add", "path": "/foo/5", "value": 2}])
    assert err.value.code == 422
    with pytest.raises(PatchError) as err:
        apply_json_patch({}, [{"op": "add", "value": 1}])
    assert err.value.code == 400


def test_strategic_merge_patch_directives() -> None:
    target = {
        "spec": {
            "containers": [
                {"name": "a", "image": "1", "env": [{"name": "X", "value": "1"}]},
                {"name": "b", "image": "1"},
            ],
            "tolerations": [{"key": "k"}],
            "nodeSelector": {"x": "1", "y": "2"},
        },
        "metadata": {"finalizers": ["f1"]},
    }
    patch = {
        "spec": {
            "containers": [{"name": "a", "env": [{"name": "Y", "value": "2"}]}, {"name": "b", "$patch": "delete"}],
            "tolerations": [{"key": "new"}],
            "nodeSelector": {"$patch": "replace", "z": "3"},
        },
        "metadata": {"finalizers": ["f2"], "$deleteFromPrimitiveList/finalizers": ["f1"]},
    }
    out = apply_strategic_merge_patch(target, patch)
    assert out["spec"]["containers"] == [
        {"name": "a", "image": "1", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]}
    ]
    assert out["spec"]["tolerations"] == [{"key": "new"}]  # lists without a merge key are replaced
    assert out["spec"]["nodeSelector"] == {"z": "3"}
    assert out["metadata"]["finalizers"] == ["f2"]


def test_field_selector_parsing() -> None:
    reqs = parse_field_selector(r"spec.nodeName=,status.phase!=Running,metadata.name==a\,b")
    assert [(r.field, r.op, r.value) for r in reqs] == [
        ("spec.nodeName", "=", ""),
        ("status.phase", "!=", "Running"),
        ("metadata.name", "=", "a,b"),
    ]
    with pytest.raises(errors.ApiError):
        parse_field_selector("spec.nodeName")


def test_selection_matches_labels_and_fields() -> None:
    sel = Selection.parse(PODS, "ns", "app in (a,b),!canary", "spec.nodeName!=,spec.schedulerName=s")
    pod: dict[str, Any] = {
        "metadata": {"namespace": "ns", "name": "p", "labels": {"app": "a"}},
        "spec": {"nodeName": "n1", "schedulerName": "s"},
    }
    assert sel.matches(pod, PODS)
    assert not sel.matches({**pod, "spec": {"schedulerName": "s"}}, PODS)
    assert not sel.matches({**pod, "metadata": {**pod["metadata"], "namespace": "other"}}, PODS)
    assert not sel.matches({**pod, "metadata": {**pod["metadata"], "labels": {"app": "a", "canary": ""}}}, PODS)
    with pytest.raises(errors.ApiError) as err:
        Selection.parse(PODS, None, None, "spec.hostname=x")
    assert err.value.code == 400


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (119, "119s"),
        (125, "2m5s"),
        (600, "10m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 60, "3h1m"),
        (30 * 3600, "30h"),
        (50 * 3600, "2d2h"),
        (20 * 86400, "20d"),
        (800 * 86400, "2y70d"),
    ],
)
def test_human_duration_matches_apimachinery(seconds: int, text: str) -> None:
    assert human_duration(seconds) == text


def test_table_negotiation() -> None:
    kubectl = (
        "application/json;as=Table;v=v1;g=meta.k8s.io,"
        "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
    )
    assert wants_table(kubectl) == "v1"
    assert wants_table("application/json;as=Table;v=v1beta1;g=meta.k8s.io") == "v1beta1"
    assert wants_table("application/json") is None
    assert wants_table("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json") is None


def test_a_remembered_schema_check_gives_the_same_answer_every_time() -> None:
    """check_schema remembers its answer by the schema's content: a bad schema stays bad, a
    caller that edits the returned list does not change the next answer, and two schemas that
    differ in one keyword are two answers."""
    from extender.emulator.schema import check_schema

    bad = {"type": "object", "properties": {"n": {"type": "integer", "minimum": "zero"}}}
    first = check_schema(bad)
    assert first and "zero" in first[0]
    first.clear()
    assert check_schema(bad) and check_schema(dict(bad)) == check_schema(bad)
    assert check_schema({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}}) == []
    integer_key = yaml.safe_load("{1: {type: object}, type: object}")  # YAML reads an unquoted 1 as an int
    assert check_schema(integer_key) == []  # not plain JSON: checked uncached
