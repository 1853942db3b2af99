"""Reference documentation generated from the code, so that it cannot drift:

* ``docs/configuration.md`` — every flag of ``serve``, ``discover roce`` and ``discover ib`` with
  its default and environment variable, read from the argument parsers themselves (and, for
  ``serve``, from :class:`~extender.settings.ServeSettings`);
* the values table of ``charts/sky-scheduler/README.md`` — every key of ``values.yaml`` with its
  default and the ``# --`` comment above it as its description.

``python -m extender.docgen`` rewrites both; ``python -m extender.docgen --check`` exits 1 when
either is stale (the test suite runs it). Defaults that depend on where the process runs (the
host name, ``$POD_NAME`` …) are rendered as the rule, not as this machine's value.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import socket
import sys
from collections.abc import Iterator
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any
from unittest import mock

import yaml

from extender.settings import ServeSettings, add_serve_arguments, flag_default

__all__ = ["chart_readme", "configuration_md", "main"]

ROOT = Path(__file__).resolve().parents[1]
CONFIGURATION = ROOT / "docs" / "configuration.md"
CHART = ROOT / "charts" / "sky-scheduler"
BEGIN, END = "<!-- BEGIN GENERATED: values -->", "<!-- END GENERATED -->"
_HOST = "<host name>"
_PLACE_ENV = ("NODE_NAME", "POD_NAME", "POD_NAMESPACE", "KUBECONFIG")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


@contextlib.contextmanager
def _placeless() -> Iterator[None]:
    """Build parsers as if on no machine in particular: no downward-API variables, no host name."""
    env = {k: v for k, v in os.environ.items() if k not in _PLACE_ENV}
    with mock.patch.dict(os.environ, env, clear=True), mock.patch.object(socket, "gethostname", lambda: _HOST):
        yield


def _shown(value: Any) -> str:
    if value is None or value == "":
        return "—"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, Path):
        return f"`{value}`"
    return f"`{value}`"


def _serve_rows() -> list[str]:
    parser = argparse.ArgumentParser(add_help=False)
    add_serve_arguments(parser)
    by_dest = {a.dest: a for a in parser._actions}
    rows = []
    for f in fields(ServeSettings):
        action = by_dest[f.name]
        flags = " / ".join(f"`{o}`" for o in action.option_strings)
        env = f"`SKY_{f.name.upper()}`"
        default = flag_default(f) if "default_doc" in f.metadata else f"`{flag_default(f)}`"
        if f.default is MISSING and "default_doc" not in f.metadata:  # pragma: no cover - every factory is documented
            raise ValueError(f"ServeSettings.{f.name}: a default_factory needs metadata default_doc")
        rows.append(f"| {flags} | {_cell(default)} | {env} | {_cell(str(f.metadata.get('help', '')))} |")
    return rows


def _parser_rows(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        flags = " / ".join(f"`{o}`" for o in action.option_strings)
        if action.metavar and action.nargs != 0:
            flags += f" {action.metavar}"
        help_text = _help_without_default(action.help or "") % {"default": action.default}
        help_text = re.sub(r"^default \w+$", "", help_text.strip())
        env = ", ".join(f"`${v}`" for v in sorted(set(re.findall(r"\$([A-Z_]+)", action.help or ""))))
        default = "`false`" if action.nargs == 0 and action.default is False else _shown(action.default)
        if action.choices:
            help_text = f"{help_text} One of {', '.join(f'`{c}`' for c in action.choices)}.".strip()
        rows.append(f"| {flags} | {_cell(default)} | {env or '—'} | {_cell(help_text)} |")
    return rows


_DEFAULT_NOTE = re.compile(r"\s*\(default(?:[^()]|%\(default\)[rs])*\)")


def _help_without_default(text: str) -> str:
    """The help without its "(default …)" note when the default column says it all; a note that
    states a rule (``$VAR``, "else …") is kept."""

    def drop(m: re.Match[str]) -> str:
        note = m.group(0)
        return note if "$" in note or "else" in note else ""

    return _DEFAULT_NOTE.sub(drop, text)


def _discover_parsers() -> dict[str, argparse.ArgumentParser]:
    from discovery import cli  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog="sky-scheduler discover")
    cli.add_arguments(parser)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


_HEAD = "| flag | default | environment | meaning |\n|---|---|---|---|"


def configuration_md() -> str:
    """The text of docs/configuration.md."""
    with _placeless():
        serve = _serve_rows()
        discover = {kind: _parser_rows(p) for kind, p in _discover_parsers().items()}
    parts = [
        "# Configuration reference",
        "",
        "<!-- Generated by `python -m extender.docgen` from the argument parsers; do not edit by hand"
        " (`python -m extender.docgen --check` is part of the test suite). -->",
        "",
        "Every flag of the long-running commands, with its default and environment variable. The",
        "Helm chart sets them as container arguments ([charts/sky-scheduler/README.md]"
        "(../charts/sky-scheduler/README.md) lists its values); `sky-scheduler <command> --help` prints",
        "the same. Defaults written as a rule (`$POD_NAMESPACE`, the host name) are evaluated where",
        "the process runs.",
        "",
        "## `sky-scheduler serve`",
        "",
        "Each setting is one flag and one environment variable `SKY_<NAME>`; the flag wins over the",
        "variable, which wins over the default. Booleans take `--x` / `--no-x`, or `true`/`false`",
        "(`1`/`0`, `yes`/`no`) in the variable. Invalid values stop the process with a message",
        "naming the flag.",
        "",
        _HEAD,
        *serve,
    ]
    for kind, rows in discover.items():
        parts += ["", f"## `sky-scheduler discover {kind}`", ""]
        parts.append(
            "Flags only (no `SKY_*` variables); the environment column names variables a default is read from."
        )
        parts += ["", _HEAD, *rows]
    return "\n".join(parts) + "\n"


# --- chart values ---------------------------------------------------------------------------------
_KEY = re.compile(r"^(\s*)([A-Za-z0-9_.-]+):(\s|$)")


def _described_keys(text: str) -> list[tuple[tuple[str, ...], str]]:
    """(key path, description) of every mapping key of values.yaml, in file order. A description
    is a comment block starting ``# --`` right above the key (continuation lines: more ``#``)."""
    out: list[tuple[tuple[str, ...], str]] = []
    stack: list[tuple[int, str]] = []
    comment: list[str] | None = None
    list_indent: int | None = None
    for line in text.splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if not stripped:
            comment = None
            continue
        if stripped.startswith("#"):
            body = stripped[1:].strip()
            if body.startswith("--") and not body.startswith("---"):
                comment = [body[2:].strip()]
            elif comment is not None and not body.startswith("-"):
                comment.append(body)
            elif body.startswith("-"):
                comment = None if body.startswith("---") else comment
            continue
        if list_indent is not None and indent > list_indent:
            continue
        list_indent = None
        if stripped.startswith("- "):
            list_indent = indent
            comment = None
            continue
        m = _KEY.match(line)
        if m is None:
            comment = None
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, m.group(2)))
        out.append((tuple(k for _, k in stack), " ".join(comment or [])))
        comment = None
    return out


def _lookup(values: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        values = values[key]
    return values


def values_table(values_text: str) -> str:
    """One row per key of values.yaml: every leaf, and every map its comment describes (a map
    written on one line, ``{cpu: 100m}``, is a leaf)."""
    values = yaml.safe_load(values_text)
    keys = _described_keys(values_text)
    parents = {path[:i] for path, _ in keys for i in range(1, len(path))}
    rows = ["| key | default | description |", "|---|---|---|"]
    for path, description in keys:
        value = _lookup(values, path)
        grouping = path in parents
        if grouping and not description:
            continue  # a plain grouping key: its keys have their rows
        shown = "(the keys below)" if grouping else f"`{json.dumps(value, ensure_ascii=False)}`"
        rows.append(f"| `{'.'.join(path)}` | {_cell(shown)} | {_cell(description)} |")
    return "\n".join(rows)


def chart_readme(readme: str, values_text: str) -> str:
    """``readme`` with its values table (between the markers) regenerated; appended if absent."""
    block = f"{BEGIN}\n{values_table(values_text)}\n{END}"
    if BEGIN in readme and END in readme:
        head, rest = readme.split(BEGIN, 1)
        return head + block + rest.split(END, 1)[1]
    section = (
        "\n## Values\n\nGenerated from `values.yaml` (its `# --` comments) by `python -m extender.docgen`; "
        "a test fails when it is stale.\n\n"
    )
    return readme.rstrip("\n") + "\n" + section + block + "\n"


def _targets() -> dict[Path, str]:
    readme = CHART / "README.md"
    return {
        CONFIGURATION: configuration_md(),
        readme: chart_readme(readme.read_text(encoding="utf-8"), (CHART / "values.yaml").read_text(encoding="utf-8")),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m extender.docgen", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a generated document is stale")
    args = parser.parse_args(argv)
    stale = []
    for path, text in _targets().items():
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if current == text:
            continue
        if args.check:
            stale.append(str(path.relative_to(ROOT)))
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
    if stale:
        print(f"stale: {', '.join(stale)} (run: python -m extender.docgen)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
