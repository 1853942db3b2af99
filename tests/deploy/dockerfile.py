"""A small Dockerfile parser for the instruction subset the project's Dockerfile uses, and the
``.dockerignore`` matching rules — enough for tests to check what can be checked without a
Docker engine.

Follows the Dockerfile reference: parser directives (``# syntax=…``) only before the first
instruction; ``#`` comments on their own line; ``\\`` line continuation (comment lines inside a
continued instruction are dropped, as BuildKit does); instructions are case-insensitive;
``--flag=value`` options before the arguments; JSON ("exec") form for ``RUN``/``CMD``/
``ENTRYPOINT``/``COPY``; ``ARG`` before the first ``FROM`` is usable in ``FROM``. An instruction
outside :data:`KNOWN` is an error, so a new one has to be taught here on purpose.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "KNOWN",
    "Dockerfile",
    "DockerfileError",
    "IgnoreRules",
    "Instruction",
    "Stage",
    "dockerignore_excludes",
    "parse",
    "parse_dockerignore",
    "stage_args",
]

KNOWN = frozenset(
    {"FROM", "ARG", "ENV", "LABEL", "WORKDIR", "COPY", "RUN", "USER", "ENTRYPOINT", "CMD", "EXPOSE", "SHELL"}
)
_EXEC_FORM = frozenset({"RUN", "CMD", "ENTRYPOINT", "COPY", "SHELL"})
_FLAG = re.compile(r"^--([a-z][a-z-]*)(?:=(.*))?$")
_DIRECTIVE = re.compile(r"^#\s*([a-zA-Z][a-zA-Z0-9]*)\s*=\s*(.+?)\s*$")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


class DockerfileError(ValueError):
    pass


@dataclass(frozen=True)
class Instruction:
    keyword: str
    flags: dict[str, list[str]]
    raw: str
    """The argument text after the flags (continuations joined by a space)."""
    exec_form: list[str] | None
    """The JSON-array arguments when the instruction uses the exec form."""
    line: int

    def words(self) -> list[str]:
        """The arguments split like a shell would (exec form: the array itself)."""
        return list(self.exec_form) if self.exec_form is not None else shlex.split(self.raw)


@dataclass
class Stage:
    index: int
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def last(self, keyword: str) -> Instruction | None:
        found = self.all(keyword)
        return found[-1] if found else None


@dataclass
class Dockerfile:
    directives: dict[str, str]
    global_args: dict[str, str | None]
    stages: list[Stage]

    @property
    def final(self) -> Stage:
        return self.stages[-1]

    def stage(self, name: str) -> Stage:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(name)


def _logical_lines(text: str) -> tuple[dict[str, str], list[tuple[int, str]]]:
    directives: dict[str, str] = {}
    lines = text.splitlines()
    out: list[tuple[int, str]] = []
    i = 0
    in_header = True
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if in_header:
            m = _DIRECTIVE.match(stripped)
            if m and m.group(1).lower() in {"syntax", "escape", "check"}:
                directives[m.group(1).lower()] = m.group(2)
                i += 1
                continue
            in_header = False
        if not stripped or stripped.startswith("#"):
            i += 1
            continue
        start = i + 1
        parts = []
        while True:
            cur = lines[i].rstrip()
            if cur.endswith("\\"):
                parts.append(cur[:-1].strip())
                i += 1
                # skip comment and empty lines inside a continuation
                while i < len(lines) and (not lines[i].strip() or lines[i].strip().startswith("#")):
                    i += 1
                if i >= len(lines):
                    raise DockerfileError(f"line {start}: the file ends inside a continued instruction")
                continue
            parts.append(cur.strip())
            i += 1
            break
        out.append((start, " ".join(p for p in parts if p)))
    if directives.get("escape", "\\") != "\\":
        raise DockerfileError("only the default escape character is supported")
    return directives, out


def _substitute(text: str, env: dict[str, str | None], line: int) -> str:
    def repl(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(3)
        value = env.get(name)
        if value is None:
            if m.group(2) is not None:
                return m.group(2)
            raise DockerfileError(f"line {line}: ${name} has no value")
        return value

    return _VAR.sub(repl, text)


def _split_flags(rest: str) -> tuple[dict[str, list[str]], str]:
    flags: dict[str, list[str]] = {}
    while rest.startswith("--"):
        word, _, tail = rest.partition(" ")
        m = _FLAG.match(word)
        if not m:
            break
        flags.setdefault(m.group(1), []).append(m.group(2) or "")
        rest = tail.lstrip()
    return flags, rest


def parse(text: str) -> Dockerfile:
    directives, logical = _logical_lines(text)
    global_args: dict[str, str | None] = {}
    stages: list[Stage] = []
    for line, content in logical:
        keyword, _, rest = content.partition(" ")
        keyword = keyword.upper()
        rest = rest.strip()
        if keyword not in KNOWN:
            raise DockerfileError(f"line {line}: unknown or unsupported instruction {keyword}")
        flags, rest = _split_flags(rest)
        exec_form = None
        if keyword in _EXEC_FORM and rest.startswith("["):
            try:
                parsed = json.loads(rest)
            except json.JSONDecodeError as e:
                raise DockerfileError(f"line {line}: {keyword} looks like JSON but is not: {e}") from None
            if not isinstance(parsed, list) or not all(isinstance(x, str) for x in parsed):
                raise DockerfileError(f"line {line}: the exec form is a JSON array of strings")
            exec_form = parsed
        if not rest and keyword not in {"RUN"}:
            raise DockerfileError(f"line {line}: {keyword} needs arguments")
        inst = Instruction(keyword, flags, rest, exec_form, line)
        if keyword == "FROM":
            words = rest.split()
            if len(words) not in (1, 3) or (len(words) == 3 and words[1].upper() != "AS"):
                raise DockerfileError(f"line {line}: FROM IMAGE [AS NAME]")
            base = _substitute(words[0], global_args, line)
            stages.append(Stage(len(stages), base, words[2] if len(words) == 3 else None, [inst]))
            continue
        if keyword == "ARG":
            name, eq, default = rest.partition("=")
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise DockerfileError(f"line {line}: bad ARG name {name!r}")
            if not stages:
                global_args[name] = default if eq else None
                continue
        if not stages:
            raise DockerfileError(f"line {line}: {keyword} before the first FROM")
        stages[-1].instructions.append(inst)
    if not stages:
        raise DockerfileError("no FROM instruction")
    names = [s.name for s in stages if s.name]
    if len(names) != len(set(names)):
        raise DockerfileError("two stages share a name")
    return Dockerfile(directives, global_args, stages)


def stage_args(df: Dockerfile, stage: Stage) -> dict[str, str | None]:
    """ARG defaults visible in a stage (its own ARGs; a global ARG only if re-declared)."""
    out: dict[str, str | None] = {}
    for inst in stage.all("ARG"):
        name, eq, default = inst.raw.partition("=")
        out[name] = default if eq else df.global_args.get(name)
    return out


# --- .dockerignore ------------------------------------------------------------------------------

IgnoreRules = list[tuple[bool, re.Pattern[str]]]


def parse_dockerignore(text: str) -> IgnoreRules:
    """(negated, regex) per pattern, in file order; the last matching pattern decides."""
    rules = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        if negated:
            line = line[1:].strip()
        line = line.strip("/")
        line = re.sub(r"/+", "/", line)
        if line.startswith("./"):
            line = line[2:]
        rules.append((negated, re.compile("^" + _glob_to_regex(line) + "$")))
    return rules


def _glob_to_regex(pattern: str) -> str:
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = pattern.find("]", i)
            if j == -1:
                out.append(re.escape(c))
            else:
                out.append(pattern[i : j + 1])
                i = j
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def dockerignore_excludes(rules: IgnoreRules, path: str) -> bool:
    """Whether ``path`` (relative to the context, ``/``-separated) is left out of the context.

    As in moby's patternmatcher: a pattern matches a path if it matches the path itself or one
    of its parent directories; the last pattern that matches wins.
    """
    parts = Path(path).parts
    candidates = ["/".join(parts[: k + 1]) for k in range(len(parts))]
    excluded = False
    for negated, rx in rules:
        if any(rx.match(c) for c in candidates):
            excluded = not negated
    return excluded
