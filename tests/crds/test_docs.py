"""docs/api.md documents every kind, every field, every example and every well-known key."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import yaml

from extender import wellknown

from . import schema
from .objects import CRDS, DOCS, EXAMPLES_DIR

TEXT = DOCS.read_text(encoding="utf-8")
KINDS = sorted(CRDS)


def field_paths(node: Mapping[str, Any], path: str = "") -> Iterator[str]:
    for name, child in node.get("properties", {}).items():
        here = f"{path}.{name}" if path else name
        yield here
        inner, suffix = child, ""
        while inner.get("type") == "array":
            inner, suffix = inner["items"], suffix + "[]"
        yield from field_paths(inner, here + suffix)


def section(kind: str) -> str:
    m = re.search(rf"^## {kind}\n(.*?)(?=^## )", TEXT, re.S | re.M)
    assert m, f"docs/api.md has no '## {kind}' section"
    return m.group(1)


@pytest.mark.parametrize("kind", KINDS)
def test_every_field_of_the_kind_is_documented_in_its_section(kind: str) -> None:
    root = schema.openapi_schema(CRDS[kind])
    text = section(kind)
    missing = [p for p in field_paths(root) if p.split(".")[0] in ("spec", "status") and f"`{p}`" not in text]
    assert missing == []


@pytest.mark.parametrize("kind", KINDS)
def test_the_kind_section_says_who_writes_spec_and_status(kind: str) -> None:
    text = section(kind)
    assert re.search(r"writes?\b", text)
    assert "status" in text


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES_DIR.glob("*.yaml")))
def test_every_example_is_shown_verbatim(name: str) -> None:
    assert (EXAMPLES_DIR / name).read_text(encoding="utf-8").rstrip("\n") in TEXT


def _wellknown_keys() -> list[str]:
    keys = [
        value
        for name, value in vars(wellknown).items()
        if name.startswith(("ANNO_", "LABEL_")) and name != "LABEL_INJECT_ENABLED"
    ]
    keys += list(wellknown.TASK_INDEX_LABELS) + list(wellknown.DEFAULT_GPU_SPEC_LABELS)
    keys += [wellknown.STORAGE_CONDITION_PREFIX, wellknown.LABEL_INJECT_ENABLED]
    keys += [wellknown.RESOURCE_GPU, wellknown.RESOURCE_RDMA_HCA, wellknown.RESOURCE_RDMA_ROCE]
    keys += [wellknown.RESOURCE_SPOT_GPU, wellknown.RDMA_RESOURCE_PREFIX]
    return sorted(set(keys))


@pytest.mark.parametrize("key", _wellknown_keys())
def test_every_well_known_key_is_explained(key: str) -> None:
    assert f"`{key}" in TEXT, f"{key} (extender/wellknown.py) is not in docs/api.md"


def test_the_well_known_key_list_is_not_empty() -> None:
    assert len(_wellknown_keys()) > 20


def _yaml_blocks(text: str) -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", text, re.S)


@pytest.mark.parametrize("kind", KINDS)
def test_yaml_snippets_in_the_docs_are_valid(kind: str) -> None:
    for block in _yaml_blocks(section(kind)):
        doc = yaml.safe_load(block)
        if "apiVersion" in doc:
            assert schema.validate(doc, CRDS[doc["kind"]]) == []
        else:  # a status excerpt of this kind
            assert set(doc) == {"status"}
            status_schema = schema.openapi_schema(CRDS[kind])["properties"]["status"]
            assert schema.validate(doc["status"], status_schema) == [], block


def test_printer_columns_shown_in_the_kubectl_transcript_are_the_real_ones() -> None:
    header = re.search(r"^\$ kubectl get quota\n(NAME.*)$", TEXT, re.M)
    assert header
    columns = [
        c["name"] for c in schema.storage_version(CRDS["Quota"])["additionalPrinterColumns"] if not c.get("priority")
    ]
    assert header.group(1).split() == ["NAME", *columns]
