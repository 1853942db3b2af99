"""The expression language that says how a stage combines its plugins (seed 四 ②).

Grammar::

    expr   := call | term
    call   := OP "(" expr ("," expr)* ")"
    term   := [NUMBER "*"] PLUGIN          (a weight is allowed in score stages only)
    OP     := and | or | joint | sum | intersect | min | first_not_pass

Semantics depend on what the stage produces (its :class:`Kind`):

========  =================  ===============================================================
kind      operators          meaning
========  =================  ===============================================================
STATUS    ``and``            short-circuit conjunction: the first non-passing status is the
                             result (a plugin that abstains with SKIP passes)
          ``joint``          full conjunction: every participant runs; fails if any fails and
                             the result carries *all* failures (what /diagnose wants)
          ``or``             disjunction: passes if any participant passes; all abstaining
                             passes; otherwise the joint failure
          ``first_not_pass`` the first participant that does not abstain decides
SCORE     ``sum``            weighted sum (``sum(100*topology, binpack)``)
          ``min``            minimum of the weighted participants
SCORES    ``sum`` ``min``    the same, per target, over ``{target: score}`` maps
CHOICE    ``or``             the first participant that makes a choice (not None) decides
          ``first_not_pass`` same as ``or`` for choices
SET       ``intersect``      intersection of the participants that do not abstain (None),
                             in the order of the first one (candidates may be ordered); a
                             participant answering a failing Status ends it with that Status
          ``or``             union of the participants that do not abstain, in order
ORDER     ``first_not_pass`` lexicographic: the first participant whose keys differ decides
========  =================  ===============================================================

Expressions are parsed and checked once, when the policy loads; errors point at the token.
Compiled expressions are closures; binding the plugins' per-session functions is cheap.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from extender.framework.status import SUCCESS, Code, Status
from extender.model.enums import Enum

__all__ = ["Call", "ExprError", "Kind", "Ref", "compile_expr", "parse", "plugins_of"]


class Kind(Enum):
    STATUS = "status"
    SCORE = "score"
    SCORES = "scores"  # a score per target, from one call over all targets
    CHOICE = "choice"
    SET = "set"
    ORDER = "order"


OPERATORS: dict[Kind, frozenset[str]] = {
    Kind.STATUS: frozenset({"and", "joint", "or", "first_not_pass"}),
    Kind.SCORE: frozenset({"sum", "min"}),
    Kind.SCORES: frozenset({"sum", "min"}),
    Kind.CHOICE: frozenset({"or", "first_not_pass"}),
    Kind.SET: frozenset({"intersect", "or"}),
    Kind.ORDER: frozenset({"first_not_pass"}),
}
ALL_OPERATORS = frozenset().union(*OPERATORS.values())

DEFAULT_OPERATOR: dict[Kind, str] = {
    Kind.STATUS: "joint",
    Kind.SCORE: "sum",
    Kind.SCORES: "sum",
    Kind.CHOICE: "or",
    Kind.SET: "intersect",
    Kind.ORDER: "first_not_pass",
}


class ExprError(ValueError):
    """A malformed or ill-typed expression; the message shows where."""

    def __init__(self, text: str, pos: int, message: str) -> None:
        self.text = text
        self.pos = pos
        self.detail = message
        super().__init__(f"{message} at position {pos}:\n  {text}\n  {' ' * pos}^")


@dataclass(frozen=True, slots=True)
class Ref:
    plugin: str
    weight: float
    pos: int
    weighted: bool = field(default=False, compare=False)  # a weight was written ("1*binpack" counts)


@dataclass(frozen=True, slots=True)
class Call:
    op: str
    args: tuple[Node, ...]
    pos: int


Node = Ref | Call

_TOKEN = re.compile(r"\s*(?:(?P<num>\d+(?:\.\d+)?)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<punct>[(),*]))")


def _tokens(text: str) -> list[tuple[str, str, int]]:
    out: list[tuple[str, str, int]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None:
            bad = pos + (len(text[pos:]) - len(text[pos:].lstrip()))
            raise ExprError(text, bad, f"unexpected character {text[bad]!r}")
        kind = m.lastgroup or ""
        start = m.start(kind)
        out.append((kind, m.group(kind), start))
        pos = m.end()
    return out


def parse(text: str) -> Node:
    """Parse an expression into a tree (no type checks; see :func:`compile_expr`)."""
    toks = _tokens(text)
    i = 0

    def peek() -> tuple[str, str, int] | None:
        return toks[i] if i < len(toks) else None

    def take(what: str, literal: str | None = None) -> tuple[str, str, int]:
        """Consume the next token; ``literal`` demands that exact punctuation."""
        nonlocal i
        tok = peek()
        if tok is None:
            raise ExprError(text, len(text), f"expected {what} but the expression ended")
        if literal is not None and tok[1] != literal:
            raise ExprError(text, tok[2], f"expected {what} but found {tok[1]!r}")
        i += 1
        return tok

    def expr() -> Node:
        kind, value, pos = take("an operator or a plugin name")
        if kind == "num":
            weight = float(value)
            take("'*'", "*")
            nk, nv, np_ = take("a plugin name")
            if nk != "name":
                raise ExprError(text, np_, f"expected a plugin name after '{value}*' but found {nv!r}")
            if (nxt := peek()) is not None and nxt[1] == "(":
                raise ExprError(text, np_, "a weight applies to a plugin, not to an operator")
            return Ref(nv, weight, pos, True)
        if kind != "name":
            raise ExprError(text, pos, f"expected an operator or a plugin name but found {value!r}")
        nxt = peek()
        if nxt is not None and nxt[1] == "(":
            if value not in ALL_OPERATORS:
                raise ExprError(text, pos, f"unknown operator {value!r} (known: {', '.join(sorted(ALL_OPERATORS))})")
            take("'('", "(")
            args = [expr()]
            while (nxt := peek()) is not None and nxt[1] == ",":
                take("','", ",")
                args.append(expr())
            take("',' or ')'", ")")
            return Call(value, tuple(args), pos)
        if value in ALL_OPERATORS:
            raise ExprError(text, pos, f"operator {value!r} needs arguments in parentheses")
        return Ref(value, 1.0, pos)

    if not toks:
        raise ExprError(text, 0, "empty expression")
    node = expr()
    if i != len(toks):
        raise ExprError(text, toks[i][2], f"unexpected {toks[i][1]!r} after the end of the expression")
    return node


def plugins_of(node: Node) -> list[str]:
    """Plugin names in the order they appear."""
    if isinstance(node, Ref):
        return [node.plugin]
    out: list[str] = []
    for a in node.args:
        out.extend(plugins_of(a))
    return out


def _refs(node: Node) -> list[Ref]:
    if isinstance(node, Ref):
        return [node]
    return [r for a in node.args for r in _refs(a)]


def check(text: str, node: Node, kind: Kind, available: Mapping[str, bool]) -> None:
    """Type-check ``node`` for a stage of ``kind``. ``available`` maps each plugin that is
    enabled in the policy to whether it implements this stage."""
    if isinstance(node, Ref):
        if node.plugin not in available:
            raise ExprError(text, node.pos, f"plugin {node.plugin!r} is not enabled in this policy")
        if not available[node.plugin]:
            raise ExprError(text, node.pos, f"plugin {node.plugin!r} does not implement this stage")
        if node.weighted and kind not in (Kind.SCORE, Kind.SCORES):
            raise ExprError(text, node.pos, "weights are only allowed in score stages")
        return
    if node.op not in OPERATORS[kind]:
        allowed = ", ".join(sorted(OPERATORS[kind]))
        raise ExprError(text, node.pos, f"operator {node.op!r} cannot combine {kind.value} results (use {allowed})")
    seen: set[str] = set()
    for a in node.args:
        check(text, a, kind, available)
        for ref in _refs(a):
            if ref.plugin in seen:
                raise ExprError(text, ref.pos, f"plugin {ref.plugin!r} appears twice")
            seen.add(ref.plugin)


# --- compilation -----------------------------------------------------------------------------
Fn = Callable[..., Any]
Compiled = Callable[[Mapping[str, Fn]], Fn]


def _status_of(fn: Fn, plugin: str) -> Fn:
    """Stamp the plugin's name on its failures (the hot path: successes pass straight through)."""

    def run(*args: Any) -> Status:
        s: Status = fn(*args)
        return s if s.ok else s.with_plugin(plugin)

    return run


def compile_expr(node: Node, kind: Kind) -> Compiled:
    """Turn a checked tree into a binder: ``binder(fns)`` returns the stage callable."""
    if isinstance(node, Ref):
        name, weight = node.plugin, node.weight
        if kind is Kind.STATUS:
            return lambda fns: _status_of(fns[name], name)
        if kind is Kind.SCORE and weight != 1.0:

            def bind_weighted(fns: Mapping[str, Fn]) -> Fn:
                f = fns[name]
                return lambda *a: weight * f(*a)

            return bind_weighted
        if kind is Kind.SCORES and weight != 1.0:

            def bind_weighted_map(fns: Mapping[str, Fn]) -> Fn:
                f = fns[name]
                return lambda *a: {k: weight * v for k, v in f(*a).items()}

            return bind_weighted_map
        return lambda fns: fns[name]
    subs = [compile_expr(a, kind) for a in node.args]
    op = node.op
    if kind is Kind.STATUS and op in ("and", "joint"):
        # The hot path (QN/TN predicates, once per quota and node): plugins are called directly
        # and only a failure pays for the plugin-name stamp; nested expressions stay as they are.
        direct = [a.plugin if isinstance(a, Ref) else None for a in node.args]

        def bind_status(fns: Mapping[str, Fn]) -> Fn:
            parts = [(fns[d], d) if d is not None else (s(fns), None) for s, d in zip(subs, direct, strict=True)]
            return _and(parts) if op == "and" else _joint(parts)

        return bind_status

    def bind(fns: Mapping[str, Fn]) -> Fn:
        parts = [s(fns) for s in subs]
        return _combine(kind, op, parts)

    return bind


def _and(parts: Sequence[tuple[Fn, str | None]]) -> Fn:
    """``and``: the first failure, stamped with its plugin; SUCCESS when none fails."""

    def and_(*a: Any) -> Status:
        for p, plugin in parts:
            s: Status = p(*a)
            if not s.ok:
                return s.with_plugin(plugin) if plugin is not None else s
        return SUCCESS

    return and_


def _joint(parts: Sequence[tuple[Fn, str | None]]) -> Fn:
    """``joint``: every plugin runs; all failures, merged (one alone is returned as is)."""

    def joint(*a: Any) -> Status:
        bad: list[Status] | None = None
        for p, plugin in parts:
            s: Status = p(*a)
            if not s.ok:
                if plugin is not None:
                    s = s.with_plugin(plugin)
                if bad is None:
                    bad = [s]
                else:
                    bad.append(s)
        if bad is None:
            return SUCCESS
        return bad[0] if len(bad) == 1 else Status.merge(bad)

    return joint


def _combine(kind: Kind, op: str, parts: Sequence[Fn]) -> Fn:
    """The stage callable of ``op`` over ``parts`` for a stage of ``kind`` (chosen at bind time:
    the callable returned calls the parts directly)."""
    return _COMBINERS[kind](op, parts)


def _combine_status(op: str, parts: Sequence[Fn]) -> Fn:
    """STATUS ``or`` and ``first_not_pass`` (``and`` and ``joint`` are :func:`_and`, :func:`_joint`)."""
    if op == "or":

        def or_(*a: Any) -> Status:
            bad = []
            for p in parts:
                s = p(*a)
                if s.code == Code.SUCCESS:
                    return SUCCESS
                if not s.ok:
                    bad.append(s)
            return Status.merge(bad) if bad else SUCCESS

        return or_

    def first_not_pass(*a: Any) -> Status:
        for p in parts:
            s: Status = p(*a)
            if s.code != Code.SKIP:
                return s
        return SUCCESS

    return first_not_pass


def _combine_score(op: str, parts: Sequence[Fn]) -> Fn:
    """SCORE ``sum`` and ``min`` (the weights are in the parts)."""
    if op == "sum":

        def sum_(*a: Any) -> float:  # a loop, not sum() over a generator: once per node scored
            total = 0.0
            for p in parts:
                total += p(*a)
            return total

        return sum_
    return lambda *a: min(p(*a) for p in parts)


def _combine_scores(op: str, parts: Sequence[Fn]) -> Fn:
    """SCORES ``sum`` and ``min``, per target over every target any part scores (a missing one: 0)."""

    def merge_maps(*a: Any) -> dict[Any, float]:
        maps = [p(*a) for p in parts]
        keys: set[Any] = set()
        for m in maps:
            keys.update(m)
        if op == "sum":
            return {k: sum(m.get(k, 0.0) for m in maps) for k in keys}
        return {k: min(m.get(k, 0.0) for m in maps) for k in keys}

    return merge_maps


def _combine_choice(op: str, parts: Sequence[Fn]) -> Fn:
    """CHOICE ``or`` and ``first_not_pass``: the first choice that is not None."""

    def choose(*a: Any) -> Any:
        for p in parts:
            c = p(*a)
            if c is not None:
                return c
        return None

    return choose


def _combine_set(op: str, parts: Sequence[Fn]) -> Fn:
    """SET ``intersect`` and ``or`` (union).

    Sets may come as ordered sequences (candidate nodes in preferred order): the result keeps the
    order of the first participant that answers. A participant may also answer a failing Status,
    meaning "none, and here is why": intersect stops there; union ignores it unless every
    participant fails."""
    if op == "intersect":

        def intersect(*a: Any) -> Any:
            out: list[Any] | None = None
            for p in parts:
                s = p(*a)
                if s is None:
                    continue
                if isinstance(s, Status):
                    return s
                if out is None:
                    out = list(dict.fromkeys(s))
                else:
                    keep = set(s)
                    out = [x for x in out if x in keep]
            return None if out is None else tuple(out)

        return intersect

    def union(*a: Any) -> Any:
        out: dict[Any, None] | None = None
        failures: list[Status] = []
        for p in parts:
            s = p(*a)
            if s is None:
                continue
            if isinstance(s, Status):
                failures.append(s)
                continue
            out = dict.fromkeys(s) if out is None else {**out, **dict.fromkeys(s)}
        if out is None and failures:
            return Status.merge(failures)
        return None if out is None else tuple(out)

    return union


def _combine_order(op: str, parts: Sequence[Fn]) -> Fn:
    """ORDER ``first_not_pass``: the lexicographic key of the parts' keys."""

    def order(*a: Any) -> tuple[Any, ...]:
        return tuple([p(*a) for p in parts])

    return order


_COMBINERS: dict[Kind, Callable[[str, Sequence[Fn]], Fn]] = {
    Kind.STATUS: _combine_status,
    Kind.SCORE: _combine_score,
    Kind.SCORES: _combine_scores,
    Kind.CHOICE: _combine_choice,
    Kind.SET: _combine_set,
    Kind.ORDER: _combine_order,
}
