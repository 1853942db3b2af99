"""Recurring Kubernetes types as OpenAPI schemas: Quantity, ResourceList, LabelSelector, NodeSelectorTerm,
NodeAffinity and Toleration, with the value rules the API server applies to the built-in kinds.
"""

from __future__ import annotations

from typing import Any

from crds.openapi import Schema, array, enum, integer, obj, string, string_list, string_map

# The regular expression the Kubernetes API server publishes for resource.Quantity.
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)


def quantity(desc: str) -> Schema:
    """``resource.Quantity``: an integer or a string such as ``500m`` / ``64Gi`` / ``1e3``."""
    return {
        "description": desc,
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": QUANTITY_PATTERN,
        "x-kubernetes-int-or-string": True,
    }


def resource_list(desc: str, **extra: Any) -> Schema:
    """``core/v1 ResourceList``: resource name → quantity."""
    return {
        "description": desc,
        "type": "object",
        "additionalProperties": quantity(
            "Amount of the named resource, as a Kubernetes quantity: an integer, or a string such as "
            '"500m", "64Gi" or "1e3".'
        ),
        **extra,
    }


def label_selector(desc: str) -> Schema:
    """``meta/v1 LabelSelector``, with the value rules the API server applies to built-in kinds."""
    requirement = obj(
        "One requirement on a label: key, operator and values.",
        {
            "key": string("Label key the requirement applies to.", minLength=1),
            "operator": enum(
                "How the label's value is tested: In (value is one of values), NotIn (label absent or "
                "value not in values), Exists (label present), DoesNotExist (label absent).",
                ["In", "NotIn", "Exists", "DoesNotExist"],
            ),
            "values": string_list("Values for In and NotIn (at least one); must be empty for Exists and DoesNotExist."),
        },
        required=["key", "operator"],
        anyOf=[
            {"properties": {"operator": {"enum": ["In", "NotIn"]}, "values": {"minItems": 1}}, "required": ["values"]},
            {"properties": {"operator": {"enum": ["Exists", "DoesNotExist"]}, "values": {"maxItems": 0}}},
        ],
    )
    return obj(
        desc,
        {
            "matchLabels": string_map(
                "Labels that must all be present with exactly these values. ANDed with matchExpressions."
            ),
            "matchExpressions": array("Label requirements that must all hold. ANDed with matchLabels.", requirement),
        },
        **{"x-kubernetes-map-type": "atomic"},
    )


def node_selector_term(desc: str) -> Schema:
    """``core/v1 NodeSelectorTerm``; Gt/Lt take exactly one integer, as in the API server."""

    def requirement(what: str, key_desc: str) -> Schema:
        return obj(
            f"One requirement on {what}: key, operator and values.",
            {
                "key": string(key_desc, minLength=1),
                "operator": enum(
                    "How the value is tested: In, NotIn, Exists, DoesNotExist, Gt (greater than the single "
                    "integer in values) or Lt (less than it).",
                    ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"],
                ),
                "values": string_list(
                    "Values: at least one for In and NotIn, none for Exists and DoesNotExist, exactly one "
                    "integer for Gt and Lt."
                ),
            },
            required=["key", "operator"],
            anyOf=[
                {
                    "properties": {"operator": {"enum": ["In", "NotIn"]}, "values": {"minItems": 1}},
                    "required": ["values"],
                },
                {"properties": {"operator": {"enum": ["Exists", "DoesNotExist"]}, "values": {"maxItems": 0}}},
                {
                    "properties": {
                        "operator": {"enum": ["Gt", "Lt"]},
                        "values": {"minItems": 1, "maxItems": 1, "items": {"pattern": r"^[+-]?[0-9]+$"}},
                    },
                    "required": ["values"],
                },
            ],
        )

    return obj(
        desc,
        {
            "matchExpressions": array(
                "Requirements on node labels; all must hold.",
                requirement("a node label", "Node label key."),
            ),
            "matchFields": array(
                "Requirements on node fields; all must hold. The only supported field is metadata.name.",
                requirement("a node field", "Node field; only metadata.name is supported."),
            ),
        },
        **{"x-kubernetes-map-type": "atomic"},
    )


def node_affinity(desc: str) -> Schema:
    return obj(
        desc,
        {
            "requiredDuringSchedulingIgnoredDuringExecution": obj(
                "Hard constraint: the node must match at least one of nodeSelectorTerms (terms are ORed). "
                "Checked when the quota is placed; a bound quota is not moved if node labels change later.",
                {
                    "nodeSelectorTerms": array(
                        "Node selector terms, ORed. An empty term matches no node.",
                        node_selector_term(
                            "A node selector term: all of its matchExpressions and matchFields must hold."
                        ),
                    ),
                },
                required=["nodeSelectorTerms"],
                **{"x-kubernetes-map-type": "atomic"},
            ),
            "preferredDuringSchedulingIgnoredDuringExecution": array(
                "Soft constraints: among the nodes that fit, those matching a preference get its weight "
                "added to their score.",
                obj(
                    "A weighted preference.",
                    {
                        "weight": integer("Score added when preference matches, 1..100.", minimum=1, maximum=100),
                        "preference": node_selector_term("The node selector term the node should match."),
                    },
                    required=["weight", "preference"],
                ),
            ),
        },
    )


def tolerations(desc: str) -> Schema:
    """``core/v1 Toleration`` list, with the cross-field rules of the API server's ValidateTolerations."""
    toleration = obj(
        "A toleration of a node taint (same fields and rules as core/v1 Toleration).",
        {
            "key": string("Taint key the toleration matches. Empty means every key; then operator must be Exists."),
            "operator": enum(
                "Equal (the taint's value must equal value; the default when omitted) or Exists (any "
                "value; value must then be empty).",
                ["Equal", "Exists"],
            ),
            "value": string("Taint value to match with operator Equal; empty with operator Exists."),
            "effect": enum(
                "Taint effect to match: NoSchedule, PreferNoSchedule or NoExecute. Empty matches every effect.",
                ["NoSchedule", "PreferNoSchedule", "NoExecute", ""],
            ),
            "tolerationSeconds": integer(
                "Only with effect NoExecute, as in core/v1 Toleration. Kept for compatibility; placement "
                "only asks whether the taint is tolerated and does not use the duration.",
                fmt="int64",
            ),
        },
        allOf=[
            # value must be empty when operator is Exists
            {
                "anyOf": [
                    {"not": {"properties": {"operator": {"enum": ["Exists"]}}, "required": ["operator"]}},
                    {"properties": {"value": {"maxLength": 0}}},
                ]
            },
            # operator must be Exists when key is empty
            {
                "anyOf": [
                    {"properties": {"key": {"minLength": 1}}, "required": ["key"]},
                    {"properties": {"operator": {"enum": ["Exists"]}}, "required": ["operator"]},
                ]
            },
            # effect must be NoExecute when tolerationSeconds is set
            {
                "anyOf": [
                    {"not": {"required": ["tolerationSeconds"]}},
                    {"properties": {"effect": {"enum": ["NoExecute"]}}, "required": ["effect"]},
                ]
            },
        ],
    )
    return array(desc, toleration)
