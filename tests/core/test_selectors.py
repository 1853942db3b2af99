"""Label selectors, node selector terms, node affinity, taints and tolerations — Kubernetes rules."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from extender.model.selectors import (
    LabelSelector,
    NodeAffinity,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    SelectorError,
    Taint,
    Toleration,
    tolerates_all,
    untolerated_taint,
)
from tests.core.props import PROPERTY

# --- the string form (labels.Parse) ----------------------------------------------------------------


def req(key: str, op: str, *values: str) -> NodeSelectorRequirement:
    return NodeSelectorRequirement(key, op, tuple(values))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a=b", [req("a", "In", "b")]),
        ("a==b", [req("a", "In", "b")]),
        ("a!=b", [req("a", "NotIn", "b")]),
        ("a=", [req("a", "In", "")]),
        ("a in (x,y)", [req("a", "In", "x", "y")]),
        ("a in (x, y)", [req("a", "In", "x", "y")]),
        ("a notin (x)", [req("a", "NotIn", "x")]),
        ("a", [req("a", "Exists")]),
        ("!a", [req("a", "DoesNotExist")]),
        ("a>1", [req("a", "Gt", "1")]),
        ("a<10", [req("a", "Lt", "10")]),
        ("", []),
        (
            "env=prod, tier in (fe,be),!canary,zone,team!=x",
            [
                req("env", "In", "prod"),
                req("tier", "In", "fe", "be"),
                req("canary", "DoesNotExist"),
                req("zone", "Exists"),
                req("team", "NotIn", "x"),
            ],
        ),
        ("kubernetes.io/hostname=n-1.example", [req("kubernetes.io/hostname", "In", "n-1.example")]),
    ],
)
def test_selector_string_parses(text: str, expected: list[NodeSelectorRequirement]) -> None:
    sel = LabelSelector.parse(text)
    assert list(sel.match_expressions) == expected
    assert sel.match_labels == ()


@pytest.mark.parametrize(
    "text",
    [
        "a in ()",
        "a in x",
        "!",
        "a!",
        ",a",
        "a=b c",
        "a=b,,c",
        "a<x",
        "a>",
        "x=(",
        "a in (x",
        "a in (=)",
        "a=b=c",
        "a ~ b",
    ],
)
def test_malformed_selector_strings_are_rejected_with_the_text(text: str) -> None:
    with pytest.raises(SelectorError) as err:
        LabelSelector.parse(text)
    assert repr(text) in str(err.value)


@pytest.mark.parametrize("text", ["a=b,", "a in (x y)"])
def test_selector_strings_kubernetes_rejects_are_rejected(text: str) -> None:
    """``labels.Parse`` wants an identifier after every ',' and a ',' or ')' after every value."""
    with pytest.raises(SelectorError):
        LabelSelector.parse(text)


@pytest.mark.parametrize(
    ("text", "labels", "matches"),
    [
        ("a=b", {"a": "b"}, True),
        ("a=b", {"a": "c"}, False),
        ("a=b", {}, False),
        ("a!=b", {}, True),  # != matches objects without the label (Kubernetes)
        ("a!=b", {"a": "b"}, False),
        ("a!=b", {"a": "c"}, True),
        ("a in (x,y)", {"a": "y"}, True),
        ("a in (x,y)", {"a": "z"}, False),
        ("a notin (x,y)", {}, True),
        ("a notin (x,y)", {"a": "x"}, False),
        ("a", {"a": ""}, True),
        ("a", {"b": "1"}, False),
        ("!a", {"b": "1"}, True),
        ("!a", {"a": ""}, False),
        ("a>5", {"a": "6"}, True),
        ("a>5", {"a": "5"}, False),
        ("a>5", {"a": "six"}, False),  # not an integer: no match
        ("a>5", {}, False),
        ("a<5", {"a": "-1"}, True),
        ("a=b,c=d", {"a": "b"}, False),  # requirements are ANDed
        ("a=b,c=d", {"a": "b", "c": "d"}, True),
        ("", {"anything": "x"}, True),  # empty selector selects everything
    ],
)
def test_selector_semantics(text: str, labels: dict[str, str], matches: bool) -> None:
    assert LabelSelector.parse(text).matches(labels) is matches


LABELS = st.dictionaries(st.sampled_from(["a", "b", "c"]), st.sampled_from(["x", "y", "1", "7"]), max_size=3)


@PROPERTY
@given(st.sampled_from(["a", "b"]), st.lists(st.sampled_from(["x", "y", "1"]), min_size=1, max_size=3), LABELS)
def test_in_and_notin_are_complements(key: str, values: list[str], labels: dict[str, str]) -> None:
    inside = LabelSelector.parse(f"{key} in ({','.join(values)})")
    outside = LabelSelector.parse(f"{key} notin ({','.join(values)})")
    assert inside.matches(labels) is not outside.matches(labels)
    assert LabelSelector.parse(key).matches(labels) is not LabelSelector.parse("!" + key).matches(labels)
    assert inside.matches(labels) is (labels.get(key) in values)


# --- LabelSelector from the API ------------------------------------------------------------------


def test_label_selector_from_api_ands_match_labels_and_expressions() -> None:
    sel = LabelSelector.from_api(
        {"matchLabels": {"team": "ml"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold"]}]}
    )
    assert sel.matches({"team": "ml", "tier": "gold"})
    assert not sel.matches({"team": "ml", "tier": "silver"})
    assert not sel.matches({"tier": "gold"})


def test_empty_label_selector_selects_everything() -> None:
    assert LabelSelector.from_api({}).matches({"x": "y"})
    assert LabelSelector.from_api(None).is_empty()


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ({"key": "a", "operator": "Gt", "values": ["1"]}, "operator 'Gt'"),  # not for label selectors
        ({"key": "a", "operator": "Has"}, "operator 'Has'"),
        ({"key": "a", "operator": "In"}, "needs values"),
        ({"key": "a", "operator": "Exists", "values": ["x"]}, "takes no values"),
        ({"operator": "Exists"}, "key is required"),
    ],
)
def test_label_selector_requirement_validation(raw: dict[str, object], fragment: str) -> None:
    with pytest.raises(SelectorError, match=fragment):
        LabelSelector.from_api({"matchExpressions": [raw]})


def test_match_labels_must_be_a_map() -> None:
    with pytest.raises(SelectorError):
        LabelSelector.from_api({"matchLabels": ["a"]})


# --- node selector terms and node affinity ------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ({"key": "a", "operator": "Gt", "values": ["1", "2"]}, "exactly one value"),
        ({"key": "a", "operator": "Lt", "values": ["x"]}, "needs an integer"),
        ({"key": "a", "operator": "NotIn", "values": []}, "needs values"),
    ],
)
def test_node_selector_requirement_validation(raw: dict[str, object], fragment: str) -> None:
    with pytest.raises(SelectorError, match=fragment):
        NodeSelectorTerm.from_api({"matchExpressions": [raw]})


def test_empty_node_selector_term_matches_nothing() -> None:
    assert not NodeSelectorTerm().matches("n0", {})
    assert not NodeSelectorTerm.from_api({}).matches("n0", {"a": "b"})


def test_node_selector_term_ands_expressions_and_fields() -> None:
    term = NodeSelectorTerm.from_api(
        {
            "matchExpressions": [
                {"key": "gpu", "operator": "Exists"},
                {"key": "rack", "operator": "Gt", "values": ["3"]},
            ],
            "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n4", "n5"]}],
        }
    )
    assert term.matches("n4", {"gpu": "a100", "rack": "4"})
    assert not term.matches("n6", {"gpu": "a100", "rack": "4"})  # field fails
    assert not term.matches("n4", {"gpu": "a100", "rack": "3"})  # Gt is strict
    assert not term.matches("n4", {"rack": "9"})


def test_match_fields_alone() -> None:
    term = NodeSelectorTerm.from_api(
        {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["bad"]}]}
    )
    assert term.matches("good", {})
    assert not term.matches("bad", {})


def test_required_node_affinity_ors_its_terms() -> None:
    aff = NodeAffinity.from_api(
        {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "spec", "operator": "In", "values": ["a100"]}]},
                    {"matchExpressions": [{"key": "spec", "operator": "In", "values": ["h100"]}]},
                ]
            }
        }
    )
    assert aff is not None
    assert aff.required_matches("n", {"spec": "a100"})
    assert aff.required_matches("n", {"spec": "h100"})
    assert not aff.required_matches("n", {"spec": "v100"})
    assert not aff.required_matches("n", {})


def test_required_affinity_with_only_an_empty_term_matches_nothing() -> None:
    aff = NodeAffinity.from_api({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}})
    assert aff is not None
    assert not aff.required_matches("n0", {"a": "b"})


def test_preferred_affinity_sums_matching_weights() -> None:
    aff = NodeAffinity.from_api(
        {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "preference": {"matchExpressions": [{"key": "ssd", "operator": "Exists"}]}},
                {"weight": 5, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}},
                {"weight": 7, "preference": {}},  # an empty preference matches nothing
            ]
        }
    )
    assert aff is not None
    assert aff.required_matches("n", {})  # no required terms: everything passes
    assert aff.preferred_score("n", {"ssd": "1", "zone": "a"}) == 15
    assert aff.preferred_score("n", {"ssd": "1"}) == 10
    assert aff.preferred_score("n", {}) == 0


def test_node_affinity_without_terms_is_none() -> None:
    assert NodeAffinity.from_api({}) is None
    assert NodeAffinity.from_api(None) is None
    assert NodeAffinity.from_api({"requiredDuringSchedulingIgnoredDuringExecution": {}}) is None


# --- taints and tolerations ---------------------------------------------------------------------

NO_SCHED = Taint("gpu", "broken", "NoSchedule")


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerated"),
    [
        (Toleration("gpu", "Equal", "broken", "NoSchedule"), NO_SCHED, True),
        (Toleration("gpu", "Equal", "broken", ""), NO_SCHED, True),  # empty effect: every effect
        (Toleration("gpu", "Equal", "fine", "NoSchedule"), NO_SCHED, False),  # value differs
        (Toleration("gpu", "Exists", "", "NoSchedule"), NO_SCHED, True),  # Exists ignores the value
        (Toleration("gpu", "Exists", "", "NoExecute"), NO_SCHED, False),  # effect differs
        (Toleration("cpu", "Exists", "", ""), NO_SCHED, False),  # key differs
        (Toleration("", "Exists", "", ""), NO_SCHED, True),  # empty key + Exists: tolerates everything
        (Toleration("", "Exists", "", ""), Taint("x", "", "NoExecute"), True),
        (Toleration("", "Exists", "", "NoExecute"), NO_SCHED, False),  # … restricted to its effect
        (Toleration("", "Equal", "broken", ""), NO_SCHED, False),  # empty key needs Exists
        (Toleration("gpu", "Equal", "", ""), Taint("gpu", "", "NoSchedule"), True),  # empty values are equal
    ],
)
def test_toleration_semantics(toleration: Toleration, taint: Taint, tolerated: bool) -> None:
    assert toleration.tolerates(taint) is tolerated


def test_toleration_from_api_defaults_and_validation() -> None:
    t = Toleration.from_api({"key": "gpu", "value": "broken"})
    assert t == Toleration("gpu", "Equal", "broken", "")
    assert Toleration.from_api({"operator": "Exists"}).tolerates(Taint("anything", "v", "NoSchedule"))
    with pytest.raises(SelectorError, match="'Has'"):
        Toleration.from_api({"key": "gpu", "operator": "Has"})


def test_untolerated_taint_considers_only_the_given_effects() -> None:
    taints = (Taint("soft", "", "PreferNoSchedule"), NO_SCHED, Taint("evict", "now", "NoExecute"))
    tol_gpu = (Toleration("gpu", "Exists"),)
    assert untolerated_taint(taints, tol_gpu, frozenset({"NoSchedule"})) is None
    assert untolerated_taint(taints, tol_gpu, frozenset({"NoSchedule", "NoExecute"})) == taints[2]
    assert untolerated_taint(taints, (), frozenset({"PreferNoSchedule"})) == taints[0]
    # tolerates_all looks at the blocking effects only: PreferNoSchedule never blocks
    assert not tolerates_all(taints, tol_gpu)
    assert tolerates_all(taints, (*tol_gpu, Toleration("evict", "Equal", "now", "NoExecute")))
    assert tolerates_all((Taint("soft", "", "PreferNoSchedule"),), ())
    assert tolerates_all((), ())


def test_taint_from_api_and_str() -> None:
    t = Taint.from_api({"key": "gpu", "value": "broken", "effect": "NoSchedule"})
    assert t == NO_SCHED
    assert str(t) == "gpu=broken:NoSchedule"
    assert str(Taint.from_api({"key": "maint", "effect": "NoExecute"})) == "maint:NoExecute"
