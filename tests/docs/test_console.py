"""The transcript rules of :mod:`tests.docs.console`: a changed value, a missing or an extra line
fails; what differs from run to run (ages, padding, what ``…`` stands for) does not."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.console import Command, commands, match


def _sample(lines: str) -> tuple[str, ...]:
    return tuple(lines.splitlines())


@pytest.mark.parametrize(
    ("shown", "actual", "ok"),
    [
        ("NAME   AGE\nq0     5s", "NAME AGE\nq0   2m3s", True),  # ages and column padding differ
        ("Warning  NoQuota  0s    x", "Warning NoQuota 3s (x2 over 5s) x", True),  # an Event seen again
        ("NAME   NODE\nq0     n0", "NAME NODE\nq0   n1", False),  # a changed value
        ("a\nb", "a\nb\nc", False),  # more output than shown
        ("a\n…\nc", "a\nb\nb2\nc", True),  # an elided middle
        ("a\n…\nc", "a\nb", False),  # the line after the gap is missing
        ("url http://127.0.0.1:…/x", "url http://127.0.0.1:4242/x", True),  # a wildcard inside a line
        ("url http://127.0.0.1:…/x", "url http://127.0.0.1:4242/y", False),
        ("…\nlast", "first\nlast", True),
        ("", "something", False),
    ],
)
def test_the_comparison_fails_on_what_differs_and_only_on_that(shown: str, actual: str, ok: bool) -> None:
    assert (not match(_sample(shown), actual)) is ok


def test_a_page_with_commands_outside_console_blocks_is_refused(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```sh\nkubectl get pods\n```\n")
    with pytest.raises(ValueError, match="console"):
        commands(page)


def _iter_commands(text: str, tmp_path: Path) -> Iterator[Command]:
    page = tmp_path / "p.md"
    page.write_text(text)
    yield from commands(page)


def test_commands_keep_page_order_and_their_own_output(tmp_path: Path) -> None:
    got = list(_iter_commands("```console\n$ one\nout 1\n\n$ two\n```\ntext\n```console\n$ three\n```\n", tmp_path))
    assert [(c.line, c.expected) for c in got] == [("one", ("out 1",)), ("two", ()), ("three", ())]
    assert [c.lineno for c in got] == [2, 5, 9]
