"""The CustomResourceDefinition around a kind's schema: group, version, names, printer columns, and the
root object schema (apiVersion, kind, metadata, spec, status) every kind shares.
"""

from __future__ import annotations

from collections.abc import Sequence

from crds.openapi import Schema, obj, string

GROUP = "scheduling.infini-ai.com"
VERSION = "v1alpha1"


def root(kind: str, desc: str, spec: Schema, status: Schema, *, spec_required: bool) -> Schema:
    schema = obj(
        desc,
        {
            "apiVersion": string(
                "Versioned schema of this object: scheduling.infini-ai.com/v1alpha1. Servers convert "
                "recognized schemas to the latest internal value and may reject unrecognized values."
            ),
            "kind": string(f"REST resource this object represents: {kind}. Cannot be updated. In CamelCase."),
            "metadata": {"description": "Standard object metadata (name, labels, annotations …).", "type": "object"},
            "spec": spec,
            "status": status,
        },
    )
    if spec_required:
        schema["required"] = ["spec"]
    return schema


def column(name: str, json_path: str, type_: str, desc: str, priority: int = 0) -> Schema:
    col: Schema = {"name": name, "type": type_, "jsonPath": json_path, "description": desc}
    if priority:
        col["priority"] = priority
    return col


AGE = column("AGE", ".metadata.creationTimestamp", "date", "Time since the object was created.")


def crd(
    *,
    kind: str,
    plural: str,
    short_names: Sequence[str],
    scope: str,
    schema: Schema,
    columns: Sequence[Schema],
) -> Schema:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{GROUP}",
            "labels": {"app.kubernetes.io/name": "sky-scheduler", "app.kubernetes.io/part-of": "sky-scheduler"},
        },
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": list(short_names),
                "categories": ["sky"],
            },
            "scope": scope,
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": list(columns),
                }
            ],
        },
    }
