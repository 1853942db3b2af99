"""Reference docs generated from the code cannot drift (issue 21): docs/configuration.md lists
every serve / discover flag with its default and environment variable, the chart README every
key of values.yaml; ``serve --help`` shows the defaults."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from extender import docgen
from extender.settings import ServeSettings
from tests.cli_process import run_cli

ROOT = Path(__file__).resolve().parents[2]


def _leaves(values: Any, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    if isinstance(values, dict) and values:
        return {p for k, v in values.items() for p in _leaves(v, (*prefix, str(k)))}
    return {prefix}


def test_generated_documents_are_current() -> None:
    assert docgen.main(["--check"]) == 0, "run: python -m extender.docgen"


def test_configuration_lists_every_serve_setting_with_default_and_env() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text()
    serve = text.split("## `sky-scheduler serve`", 1)[1].split("\n## ", 1)[0]
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `(--[a-z-]+)`.*$", serve, re.M)}
    for name in ServeSettings.__dataclass_fields__:
        flag = "--" + name.replace("_", "-")
        assert flag in rows, flag
        assert f"`SKY_{name.upper()}`" in rows[flag]
    assert "| `--extender-port` | `8888` |" in serve
    assert "| `--leader-elect` / `--no-leader-elect` | `true` |" in serve
    assert "<host name>" not in serve and "the host name" in rows["--identity"]


def test_configuration_lists_every_discover_flag() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text()
    for kind in ("roce", "ib"):
        r = run_cli("discover", kind, "--help", timeout=60, cwd=ROOT)
        assert r.returncode == 0, r.stderr
        flags = set(re.findall(r"^\s+(--[a-z-]+)", r.stdout, re.M)) - {"--help"}
        section = text.split(f"## `sky-scheduler discover {kind}`", 1)[1].split("\n## ", 1)[0]
        documented = set(re.findall(r"^\| `(--[a-z-]+)`", section, re.M))
        assert flags == documented, (kind, flags ^ documented)
    # a default that depends on the machine is written as the rule, not as this host's name
    assert "| `--node-name` | `<host name>` | `$NODE_NAME` |" in text


def test_serve_help_shows_every_default() -> None:
    import argparse

    from extender.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    serve = sub.choices["serve"]
    formatter = serve._get_formatter()
    helps = {a.dest: formatter._expand_help(a) for a in serve._actions if a.dest != "help"}
    assert set(helps) == set(ServeSettings.__dataclass_fields__)
    for dest, text in helps.items():
        assert "(default: " in text and f"; env SKY_{dest.upper()})" in text, text
    assert helps["binder_period"].endswith("(default: 1.0; env SKY_BINDER_PERIOD)")
    assert "(default: true;" in helps["leader_elect"]


def test_chart_readme_has_every_value_key() -> None:
    values = yaml.safe_load((ROOT / "charts" / "sky-scheduler" / "values.yaml").read_text())
    readme = (ROOT / "charts" / "sky-scheduler" / "README.md").read_text()
    table = readme.split(docgen.BEGIN, 1)[1].split(docgen.END, 1)[0]
    documented = {tuple(m.split(".")) for m in re.findall(r"^\| `([^`]+)`", table, re.M)}
    for leaf in _leaves(values):
        assert any(leaf[:i] in documented for i in range(1, len(leaf) + 1)), ".".join(leaf)
    assert '| `webhook.failurePolicy` | `"Ignore"` | Ignore: admission never fails' in table


def test_values_table_takes_descriptions_from_dash_dash_comments() -> None:
    text = (
        "# a file comment\n\n"
        "# -- The first key,\n# on two lines.\nfirst: 1\n"
        "group:\n  # -- Inner.\n  inner: [a, b]\n  plain: {x: 1}\n"
        "# --------\n# a section header, not a description\n# --------\nsection: x\n"
        "items:\n  - name: a\n    value: b\n"
    )
    table = docgen.values_table(text)
    assert "| `first` | `1` | The first key, on two lines. |" in table
    assert '| `group.inner` | `["a", "b"]` | Inner. |' in table
    assert '| `group.plain` | `{"x": 1}` |  |' in table
    assert '| `section` | `"x"` |  |' in table
    assert "`items.name`" not in table and "`items`" in table
    assert "| `group` |" not in table  # a grouping key without a description has no row of its own
