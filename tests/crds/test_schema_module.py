"""The OpenAPI-to-JSON-Schema converter and the structural checker do what they claim.

Each check on the real CRDs (test_definitions, test_validation) is only as good as these tools, so
here every rule is shown to fire on a schema or object that breaks it.
"""

from __future__ import annotations

from typing import Any

import pytest

from . import printer_columns, schema, structural

QUANTITY = {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}


def obj(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


def fields(errors: list[schema.FieldError]) -> set[str]:
    return {e.field for e in errors}


# ---- conversion -------------------------------------------------------------------------------


def test_unknown_fields_are_rejected_only_in_strict_mode() -> None:
    s = obj(spec=obj(a={"type": "string"}))
    assert fields(schema.validate({"spec": {"a": "x", "b": 1}}, s)) == {"spec.b"}
    assert schema.validate({"spec": {"a": "x", "b": 1}}, s, strict=False) == []


def test_preserve_unknown_fields_keeps_the_object_open() -> None:
    s = obj(spec={**obj(a={"type": "string"}), "x-kubernetes-preserve-unknown-fields": True})
    assert schema.validate({"spec": {"a": "x", "b": 1}}, s) == []
    assert schema.prune({"spec": {"a": "x", "b": 1}}, s) == {"spec": {"a": "x", "b": 1}}


def test_int_or_string_accepts_both_and_nothing_else() -> None:
    s = obj(q={"x-kubernetes-int-or-string": True})  # anyOf added by the converter
    for ok in (1, "1"):
        assert schema.validate({"q": ok}, s) == []
    bad: object
    for bad in (1.5, True, None, [], {}):
        assert fields(schema.validate({"q": bad}, s)) == {"q"}


def test_nullable_admits_null_and_only_where_declared() -> None:
    s = obj(
        a={"type": "string", "nullable": True},
        b={"type": "string"},
        e={"type": "string", "enum": ["x"], "nullable": True},
    )
    assert schema.validate({"a": None, "e": None}, s) == []
    assert fields(schema.validate({"b": None}, s)) == {"b"}


def test_openapi_boolean_exclusive_minimum_is_honoured() -> None:
    s = obj(n={"type": "integer", "minimum": 0, "exclusiveMinimum": True})
    assert schema.validate({"n": 1}, s) == []
    assert fields(schema.validate({"n": 0}, s)) == {"n"}


def test_dollar_in_a_pattern_means_end_of_text_as_in_go() -> None:
    s = obj(v={"type": "string", "pattern": "^[a-z]+$"})
    assert schema.validate({"v": "abc"}, s) == []
    assert fields(schema.validate({"v": "abc\n"}, s)) == {"v"}
    assert schema.go_pattern(r"^a[$]b\$c$") == r"^a[$]b\$c\Z"


def test_set_and_map_lists_reject_duplicates() -> None:
    s = obj(
        names={"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
        nics={
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name", "port"],
            "items": obj(name={"type": "string"}, port={"type": "integer", "default": 1}),
        },
    )
    assert fields(schema.validate({"names": ["a", "b", "a"]}, s)) == {"names[2]"}
    assert fields(
        schema.validate({"nics": [{"name": "a"}, {"name": "a", "port": 2}, {"name": "a", "port": 1}]}, s)
    ) == {"nics[2]"}


def test_date_time_format_is_checked() -> None:
    s = obj(t={"type": "string", "format": "date-time"})
    for ok in ("2025-11-29T10:00:00Z", "2025-11-29T10:00:00.123456789+08:00", "2025-11-29t10:00:00z"):
        assert schema.validate({"t": ok}, s) == [], ok
    for bad in ("2025-11-29", "2025-11-29T10:00:00", "2025-13-01T00:00:00Z", "now"):
        assert fields(schema.validate({"t": bad}, s)) == {"t"}, bad


def test_error_paths_use_brackets_for_map_keys_and_list_indexes() -> None:
    s = obj(
        spec=obj(
            request={"type": "object", "additionalProperties": {**QUANTITY, "pattern": "^[0-9]+$"}},
            items={"type": "array", "items": obj(name={"type": "string"})},
        )
    )
    errors = schema.validate({"spec": {"request": {"nvidia.com/gpu": "x"}, "items": [{"name": 1}]}}, s)
    assert fields(errors) == {"spec.request[nvidia.com/gpu]", "spec.items[0].name"}


def test_required_errors_name_the_missing_field() -> None:
    s = obj(spec={**obj(a={"type": "string"}, b={"type": "string"}), "required": ["a", "b"]})
    assert fields(schema.validate({"spec": {}}, s)) == {"spec.a", "spec.b"}


def test_anyof_inside_an_object_does_not_close_it() -> None:
    s = obj(
        t={
            **obj(a={"type": "string"}, b={"type": "string"}),
            "anyOf": [{"required": ["a"]}, {"properties": {"b": {"minLength": 1}}, "required": ["b"]}],
        }
    )
    assert schema.validate({"t": {"a": "x", "b": "y"}}, s) == []
    assert fields(schema.validate({"t": {}}, s)) == {"t"}


def test_defaults_apply_top_down() -> None:
    s = obj(spec={**obj(n={"type": "integer", "default": 1}), "default": {}})
    assert schema.apply_defaults({}, s) == {"spec": {"n": 1}}
    assert schema.apply_defaults({"spec": {"n": 5}}, s) == {"spec": {"n": 5}}
    assert schema.apply_defaults({"spec": {"n": None}}, s) == {"spec": {"n": 1}}


def test_prune_drops_undeclared_fields_but_keeps_metadata_and_map_entries() -> None:
    s = obj(spec=obj(m={"type": "object", "additionalProperties": {"type": "string"}}))
    o = {
        "apiVersion": "v",
        "kind": "K",
        "metadata": {"name": "x", "weird": 1},
        "spec": {"m": {"a": "b"}, "zz": 1},
        "junk": 1,
    }
    assert schema.prune(o, s) == {
        "apiVersion": "v",
        "kind": "K",
        "metadata": {"name": "x", "weird": 1},
        "spec": {"m": {"a": "b"}},
    }


# ---- structural rules ---------------------------------------------------------------------------

STRUCTURAL_VIOLATIONS: list[tuple[str, dict[str, Any], str]] = [
    ("missing type", obj(a={"description": "x"}), "type: Required value"),
    ("root not object", {"type": "string"}, "must be object at the root"),
    ("type inside anyOf", obj(a={"type": "string", "anyOf": [{"type": "string"}]}), "anyOf[0].type: Forbidden"),
    ("description inside allOf", obj(a={"type": "string", "allOf": [{"description": "d"}]}), "allOf[0].description"),
    ("default inside not", obj(a={"type": "string", "not": {"default": "x"}}), "not.default"),
    (
        "property only in junctor",
        obj(a={**obj(b={"type": "string"}), "anyOf": [{"properties": {"c": {}}}]}),
        "properties[c]: Required value",
    ),
    ("int-or-string with type", obj(q={**QUANTITY, "type": "string"}), "must be empty with x-kubernetes-int-or-string"),
    (
        "int-or-string other anyOf",
        obj(q={"x-kubernetes-int-or-string": True, "anyOf": [{"type": "string"}]}),
        "int-or-string must use anyOf",
    ),
    (
        "properties and additionalProperties",
        {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}},
        "mutual exclusive",
    ),
    ("additionalProperties false", obj(a={"type": "object", "additionalProperties": False}), "pointless"),
    ("uniqueItems", obj(a={"type": "array", "items": {"type": "string"}, "uniqueItems": True}), "uniqueItems"),
    ("array without items", obj(a={"type": "array"}), "items: Required value"),
    ("list-type on object", obj(a={"type": "object", "x-kubernetes-list-type": "set"}), "only for type array"),
    (
        "bad list-type",
        obj(a={"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "bag"}),
        "Unsupported value",
    ),
    (
        "map list without keys",
        obj(a={"type": "array", "items": obj(k={"type": "string"}), "x-kubernetes-list-type": "map"}),
        "list-map-keys: Required value",
    ),
    (
        "map key not required",
        obj(
            a={
                "type": "array",
                "items": obj(k={"type": "string"}),
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["k"],
            }
        ),
        "must be required or have a default",
    ),
    (
        "map key not a property",
        obj(
            a={
                "type": "array",
                "items": {**obj(k={"type": "string"}), "required": ["k"]},
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["z"],
            }
        ),
        "not a property",
    ),
    (
        "keys without map list",
        obj(a={"type": "array", "items": {"type": "string"}, "x-kubernetes-list-map-keys": ["k"]}),
        "needs x-kubernetes-list-type: map",
    ),
    (
        "set of granular objects",
        obj(a={"type": "array", "items": obj(k={"type": "string"}), "x-kubernetes-list-type": "set"}),
        "must be atomic",
    ),
    (
        "map-type on array",
        obj(a={"type": "array", "items": {"type": "string"}, "x-kubernetes-map-type": "atomic"}),
        "only for type object",
    ),
    ("enum of the wrong type", obj(a={"type": "integer", "enum": ["1"]}), "enum: Invalid value"),
    ("invalid default", obj(a={"type": "integer", "minimum": 1, "default": 0}), "default: Invalid value"),
    (
        "default with pruned field",
        obj(a={**obj(b={"type": "string"}), "default": {"c": "x"}}),
        "default: Invalid value",
    ),
    (
        "metadata restricted",
        obj(metadata={"type": "object", "properties": {"labels": {"type": "object"}}}),
        "only name and generateName",
    ),
    (
        "preserve false",
        obj(a={"type": "object", "x-kubernetes-preserve-unknown-fields": False}),
        "must be true or undefined",
    ),
    ("nullable root", {"type": "object", "nullable": True}, "nullable cannot be true at the root"),
]


@pytest.mark.parametrize(("case", "node", "message"), STRUCTURAL_VIOLATIONS, ids=[c[0] for c in STRUCTURAL_VIOLATIONS])
def test_structural_rule_violation_is_reported(case: str, node: dict[str, Any], message: str) -> None:
    errors = structural.structural_errors(node)
    assert any(message in e for e in errors), errors


def test_the_allowed_patterns_are_structural() -> None:
    node = obj(
        q={**QUANTITY, "pattern": "^[0-9]+$", "description": "d"},
        q2={
            "x-kubernetes-int-or-string": True,
            "allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}, {"pattern": "^[0-9]+$"}],
        },
        t={
            **obj(a={"type": "string"}, b={"type": "string"}),
            "anyOf": [{"required": ["a"]}, {"properties": {"b": {"minLength": 1}}}],
        },
        m={"type": "object", "additionalProperties": {"type": "string"}, "x-kubernetes-map-type": "atomic"},
        l={
            "type": "array",
            "items": {**obj(k={"type": "string"}), "required": ["k"]},
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["k"],
        },
        metadata={"type": "object"},
        d={**obj(n={"type": "integer", "default": 1}), "default": {}},
    )
    assert structural.structural_errors(node) == []


# ---- printer columns ----------------------------------------------------------------------------


def test_column_path_understands_escaped_dots() -> None:
    assert printer_columns.column_path(r".spec.request.nvidia\.com/gpu") == ["spec", "request", "nvidia.com/gpu"]
    for bad in ("spec.x", ".spec..x", ".spec.x[0]", ".spec.*", "."):
        with pytest.raises(ValueError):
            printer_columns.column_path(bad)


def test_column_path_filters_select_list_items_by_a_key() -> None:
    assert printer_columns.column_path(".spec.tiers[?(@.level==2)].name") == [
        "spec",
        "tiers",
        printer_columns.ColumnFilter("level", 2),
        "name",
    ]
    assert printer_columns.column_path('.status.conditions[?(@.type=="Ready")].status') == [
        "status", "conditions", printer_columns.ColumnFilter("type", "Ready"), "status",
    ]  # fmt: skip
    for bad in (".spec.tiers[?(@.level>2)].name", ".spec.tiers[?(@.level==2)]name", ".spec[?(@.a==1)"):
        with pytest.raises(ValueError):
            printer_columns.column_path(bad)


def test_printer_cells_take_the_first_filtered_item_or_none() -> None:
    crd = {
        "spec": {
            "versions": [
                {
                    "name": "v1",
                    "storage": True,
                    "additionalPrinterColumns": [
                        {"name": "SPINE", "type": "string", "jsonPath": ".spec.tiers[?(@.level==2)].name"},
                    ],
                }
            ]
        }
    }
    tiers = [{"level": 1, "name": "leaf-1"}, {"level": 2, "name": "spine-1"}]
    assert printer_columns.printer_cells({"spec": {"tiers": tiers}}, crd) == {"SPINE": "spine-1"}
    assert printer_columns.printer_cells({"spec": {"tiers": tiers[:1]}}, crd) == {"SPINE": None}
    assert printer_columns.printer_cells({"spec": {}}, crd) == {"SPINE": None}
