"""Console transcripts in the docs: ```console blocks of ``$ command`` lines, each followed by the
output the reader sees, and how an actual output is compared with the one a page shows.

Comparison rules (docs/quickstart.md states them for the reader):

* lines are compared after masking what differs from run to run — ages (``5s``, ``2m3s``, an
  Event's ``3s (x2 over 5s)``), UIDs, RFC 3339 timestamps — and collapsing runs of blanks
  (kubectl pads columns to their widths);
* ``…`` inside a line stands for any text on that line (a port, a path);
* a line that is only ``…`` stands for any number of lines, none included;
* otherwise the shown lines are the output, in order, all of them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Command", "Mismatch", "commands", "match", "shell_blocks"]

ELLIPSIS = "…"
_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)
_UID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
_TIME = re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)")
_AGE = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:ms|s|m|h|d|y)(?:\d+(?:s|m|h))?(?![\w.])")
_REPEATS = re.compile(r"<age> \(x\d+ over <age>\)")  # kubectl describe: an Event seen again
_BLANKS = re.compile(r"\s+")
SHELL_LANGUAGES = frozenset({"sh", "bash", "shell", "zsh", "console", "shell-session"})


@dataclass(frozen=True, slots=True)
class Command:
    """One ``$ `` line of a console block and the output lines shown under it."""

    line: str
    expected: tuple[str, ...]
    lineno: int  # 1-based line of the command in the page

    @property
    def words(self) -> list[str]:
        return self.line.split()


@dataclass(slots=True)
class Mismatch:
    """Why an output does not match what the page shows (``""``: it matches)."""

    reason: str = ""
    details: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.reason)

    def __str__(self) -> str:
        return "\n".join([self.reason, *self.details])


def shell_blocks(text: str) -> list[tuple[str, str, int]]:
    """Every fenced block whose language is a shell's: (language, body, line of the body)."""
    out = []
    for m in _FENCE.finditer(text):
        if m.group(1) in SHELL_LANGUAGES:
            out.append((m.group(1), m.group(2), text.count("\n", 0, m.start(2)) + 1))
    return out


def commands(path: Path) -> list[Command]:
    """The commands of the page's ```console blocks, in page order, with their shown output."""
    found: list[Command] = []
    for language, body, first in shell_blocks(path.read_text(encoding="utf-8")):
        if language != "console":
            raise ValueError(f"{path.name}:{first}: a ```{language} block; commands go in ```console blocks")
        current: tuple[str, int] | None = None
        shown: list[str] = []
        for offset, line in enumerate(body.splitlines()):
            if line.startswith("$ "):
                if current is not None:
                    found.append(Command(current[0], _trimmed(shown), current[1]))
                current, shown = (line[2:].strip(), first + offset), []
            elif current is None:
                raise ValueError(f"{path.name}:{first + offset}: output before any `$ ` command: {line!r}")
            else:
                shown.append(line)
        if current is not None:
            found.append(Command(current[0], _trimmed(shown), current[1]))
    return found


def _trimmed(lines: list[str]) -> tuple[str, ...]:
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return tuple(lines)


def _mask(line: str) -> str:
    line = _UID.sub("<uid>", line)
    line = _TIME.sub("<time>", line)
    line = _REPEATS.sub("<age>", _AGE.sub("<age>", line))
    return _BLANKS.sub(" ", line).strip()


def _pattern(shown: str) -> re.Pattern[str]:
    return re.compile(".*?".join(re.escape(part) for part in _mask(shown).split(ELLIPSIS)))


def _segments(expected: tuple[str, ...]) -> tuple[list[list[re.Pattern[str]]], bool, bool]:
    segments: list[list[re.Pattern[str]]] = [[]]
    for line in expected:
        if line.strip() == ELLIPSIS:
            segments.append([])
        else:
            segments[-1].append(_pattern(line))
    open_start = bool(expected) and expected[0].strip() == ELLIPSIS
    open_end = bool(expected) and expected[-1].strip() == ELLIPSIS
    return [s for s in segments if s], open_start, open_end


def _fits(segment: list[re.Pattern[str]], lines: list[str], at: int) -> bool:
    return at + len(segment) <= len(lines) and all(p.fullmatch(lines[at + k]) for k, p in enumerate(segment))


def match(expected: tuple[str, ...], actual: str, *, open_end: bool = False) -> Mismatch:
    """Whether ``actual`` is the output ``expected`` shows (module rules). ``open_end``: the
    command still runs (a watch, the sandbox), so more output may follow what is shown."""
    lines = [_mask(line) for line in actual.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    segments, open_start, trailing = _segments(expected)
    open_end = open_end or trailing
    if not segments:
        ok = open_start or open_end or not lines
        return Mismatch() if ok else Mismatch("the page shows no output, the command printed some", lines[:20])
    pos = 0
    for k, segment in enumerate(segments):
        last = k == len(segments) - 1
        if k == 0 and not open_start:
            candidates = [0]
        elif last and not open_end:
            candidates = [len(lines) - len(segment)]
        else:
            candidates = list(range(pos, len(lines) - len(segment) + 1))
        at = next((i for i in candidates if i >= pos and _fits(segment, lines, i)), None)
        if at is None:
            return _explain(segment, lines, candidates[0] if len(candidates) == 1 else None, pos)
        pos = at + len(segment)
    if not open_end and pos != len(lines):
        return Mismatch("the command printed more than the page shows", lines[pos:])
    return Mismatch()


def _explain(segment: list[re.Pattern[str]], lines: list[str], anchored: int | None, pos: int) -> Mismatch:
    """Name the first shown line that differs (a segment tied to the start or the end), or the
    segment that is missing (one after a gap)."""
    details = ["actual output (masked):", *lines]
    if anchored is None or anchored < 0:
        return Mismatch(f"shown lines not found after actual line {pos}: {segment[0].pattern!r} …", details)
    for k, p in enumerate(segment):
        got = lines[anchored + k] if anchored + k < len(lines) else "<no more output>"
        if not p.fullmatch(got):
            return Mismatch(f"actual line {anchored + k + 1} differs: shown {p.pattern!r}, printed {got!r}", details)
    return Mismatch("the output differs", details)
