"""The pure parts on their own: JSON Patch accumulation, review parsing and replies, namespaces."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.webhooks import helpers as h
from webhooks.namespaces import NamespaceLabels, NamespaceLabelStore
from webhooks.patch import Patch, escape_token, pointer
from webhooks.review import ReviewError, build_response, parse_review


# --- patch ------------------------------------------------------------------------------------
def test_tokens_escape_tilde_before_slash() -> None:
    assert escape_token("a/b") == "a~1b"
    assert escape_token("~1") == "~01"
    assert pointer(("metadata", "annotations", "scheduling.infini-ai.com/quota-name")) == (
        "/metadata/annotations/scheduling.infini-ai.com~1quota-name"
    )


def test_setting_a_value_the_object_has_is_no_operation() -> None:
    obj = {"metadata": {"annotations": {"k": "v"}}, "spec": {"schedulerName": "sky"}}
    p = Patch(obj)
    p.set_entry(("metadata", "annotations"), "k", "v")
    p.set(("spec", "schedulerName"), "sky")
    p.remove_entry(("metadata", "annotations"), "absent")
    assert not p and p.ops == []


def test_an_absent_map_is_created_once_before_its_first_member() -> None:
    p = Patch({"metadata": {"name": "x"}})
    p.set_entry(("metadata", "annotations"), "a/b", "1")
    p.set_entry(("metadata", "annotations"), "c~d", "2")
    assert p.ops == [
        {"op": "add", "path": "/metadata/annotations", "value": {}},
        {"op": "add", "path": "/metadata/annotations/a~1b", "value": "1"},
        {"op": "add", "path": "/metadata/annotations/c~0d", "value": "2"},
    ]
    assert p.get(("metadata", "annotations")) == {"a/b": "1", "c~d": "2"}


def test_an_absent_spec_is_created_for_a_scheduler_name() -> None:
    obj: dict[str, Any] = {"metadata": {}}
    p = Patch(obj)
    p.set(("spec", "schedulerName"), "sky")
    assert h.apply_patch(obj, p.ops) == {"metadata": {}, "spec": {"schedulerName": "sky"}}


def test_the_whole_object_cannot_be_replaced() -> None:
    with pytest.raises(ValueError, match="whole object"):
        Patch({}).set((), 1)


_keys = st.sampled_from(["a", "b/c", "d~e", "scheduling.infini-ai.com/quota-name", "~/"])
_values = st.sampled_from(["", "0", "1", "x/y"])
_start = st.one_of(st.none(), st.just("null"), st.dictionaries(_keys, _values, max_size=4))
_steps = st.lists(st.tuples(_keys, st.one_of(st.none(), _values)), max_size=8)


@given(start=_start, steps=_steps)
@settings(max_examples=300, deadline=None)
def test_a_patch_applied_gives_the_intended_map_and_a_second_pass_is_empty(
    start: dict[str, str] | str | None, steps: list[tuple[str, str | None]]
) -> None:
    meta: dict[str, Any] = {"name": "p"}
    if start == "null":
        meta["annotations"] = None
    elif isinstance(start, dict):
        meta["annotations"] = dict(start)
    obj = {"metadata": meta}
    want: dict[str, str] | None = dict(start) if isinstance(start, dict) else None
    p = Patch(obj)
    for key, value in steps:
        if value is None:
            p.remove_entry(("metadata", "annotations"), key)
            if want is not None:
                want.pop(key, None)
        else:
            p.set_entry(("metadata", "annotations"), key, value)
            want = {**(want or {}), key: value}
    out = h.apply_patch(obj, p.ops)
    got = out["metadata"].get("annotations")
    if want is None:
        assert got == meta.get("annotations")
    else:
        assert got == want
    assert p.get(("metadata", "annotations")) == got
    second = Patch(out)
    for key, _ in steps:
        final = (got or {}).get(key)
        if final is None:
            second.remove_entry(("metadata", "annotations"), key)
        else:
            second.set_entry(("metadata", "annotations"), key, final)
    assert second.ops == []


# --- review -----------------------------------------------------------------------------------
def test_a_reply_without_changes_has_no_patch_fields() -> None:
    doc = build_response("u-1")
    assert doc == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "u-1", "allowed": True},
    }


def test_a_reply_with_changes_carries_a_base64_json_patch_and_its_type() -> None:
    ops = [{"op": "add", "path": "/metadata/annotations/a~1b", "value": "1"}]
    doc = build_response("u-1", ops=ops, warnings=["w" * 300], audit_annotations={"quota": "q"})
    resp = doc["response"]
    assert resp["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(resp["patch"])) == ops
    assert resp["auditAnnotations"] == {"quota": "q"}
    assert len(resp["warnings"][0]) == 256


def test_parsing_the_sample_reads_a_generate_name_pod_create() -> None:
    req = parse_review(json.dumps(h.sample_review()).encode())
    assert req.uid == "705ab4f5-6393-11e8-b7cc-42010a800002"
    assert req.is_pod_create and req.name == "" and req.namespace == "ml-research"
    assert req.dry_run is False
    assert req.object is not None and req.object["metadata"]["generateName"] == "llama-sft-worker-"


def test_a_review_error_keeps_the_uid_when_there_is_one() -> None:
    doc = h.review(h.admission_pod("p"), uid="u-9")
    doc["request"]["object"] = None
    with pytest.raises(ReviewError) as err:
        parse_review(json.dumps(doc).encode())
    assert err.value.uid == "u-9"
    with pytest.raises(ReviewError) as err:
        parse_review(b"\xff\xfe")
    assert err.value.uid is None


# --- namespaces -------------------------------------------------------------------------------
def test_the_namespace_store_follows_informer_events() -> None:
    store = NamespaceLabelStore()
    assert isinstance(store, NamespaceLabels)
    assert store.labels("team") is None
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team", "labels": {"a": "1"}}}
    store.on_namespace_add(ns)
    assert store.labels("team") == {"a": "1"}
    store.on_namespace_update(ns, {"metadata": {"name": "team"}})
    assert store.labels("team") == {}
    store.on_namespace_delete(ns)
    assert store.labels("team") is None
    store.on_namespace_add({"metadata": {}})
    assert len(store) == 0
