"""The chart's objects as the docs show them: each YAML snippet preceded by
``<!-- chart: KIND NAME [DATA-KEY] -->`` must agree with ``helm template`` (default values).

Agreement: every key of the snippet exists in the rendered object with an agreeing value; a list
agrees element by element and has the rendered length (a doc cannot silently drop a webhook
entry); ``<…>`` in the snippet agrees with anything. With ``DATA-KEY`` the snippet is compared
with the YAML document held in that key of the object's ``data`` (a ConfigMap's file).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from tests.deploy.chart import REPO, one, render_variant

_MARKER = re.compile(r"<!-- chart: (\S+) (\S+)(?: (\S+))? -->\n```yaml\n(.*?)```", re.S)
DOCS = [REPO / "docs" / "webhook.md", REPO / "docs" / "extender.md"]


def _snippets() -> list[tuple[str, str, str, str | None, str]]:
    out = []
    for doc in DOCS:
        for m in _MARKER.finditer(doc.read_text(encoding="utf-8")):
            out.append((doc.name, m.group(1), m.group(2), m.group(3), m.group(4)))
    return out


def disagreements(shown: Any, rendered: Any, path: str = "") -> list[str]:
    if isinstance(shown, str) and shown.startswith("<") and shown.endswith(">"):
        return []
    if isinstance(shown, dict):
        if not isinstance(rendered, dict):
            return [f"{path}: the docs show an object, the chart renders {rendered!r}"]
        out = []
        for k, v in shown.items():
            if k not in rendered:
                out.append(f"{path}.{k}: shown in the docs, not rendered")
            else:
                out += disagreements(v, rendered[k], f"{path}.{k}")
        return out
    if isinstance(shown, list):
        if not isinstance(rendered, list) or len(shown) != len(rendered):
            return [f"{path}: the docs show {len(shown)} item(s), the chart renders {rendered!r}"]
        return [
            e for i, (a, b) in enumerate(zip(shown, rendered, strict=True)) for e in disagreements(a, b, f"{path}[{i}]")
        ]
    if shown != rendered:
        return [f"{path}: the docs show {shown!r}, the chart renders {rendered!r}"]
    return []


def test_each_doc_has_its_snippet() -> None:
    assert {s[0] for s in _snippets()} == {d.name for d in DOCS}


@pytest.mark.parametrize(("doc", "kind", "name", "key", "text"), _snippets(), ids=lambda v: str(v)[:40])
def test_documented_snippets_match_the_rendered_chart(
    doc: str, kind: str, name: str, key: str | None, text: str
) -> None:
    obj: Any = one(render_variant("default"), kind, name)
    if key is not None:
        obj = yaml.safe_load(obj["data"][key])
    problems = disagreements(yaml.safe_load(text), obj)
    assert not problems, f"{doc} disagrees with the chart:\n" + "\n".join(problems)


def test_a_disagreement_is_found() -> None:
    assert disagreements({"a": [1, {"b": 2}]}, {"a": [1, {"b": 3}]}) == [
        ".a[1].b: the docs show 2, the chart renders 3"
    ]
    assert disagreements({"a": [1]}, {"a": [1, 2]})
    assert not disagreements({"a": "<anything>", "c": 1}, {"a": [1], "b": 2, "c": 1})
