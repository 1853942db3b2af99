"""A small subset of CEL, enough for admission webhooks' ``matchConditions``.

kube-apiserver compiles every ``matchConditions[].expression`` when a webhook configuration is
written (a compile error makes the write 422 Invalid) and evaluates it for each request with the
variables ``object``, ``oldObject`` and ``request`` (and ``authorizer``). The emulator accepts the
subset below and refuses, at write time, any expression outside it — never a silently wrong match:

* literals: strings (single or double quotes, ``\\`` escapes), integers, ``true``/``false``/``null``,
  lists ``[a, b]``;
* variables ``object``, ``oldObject``, ``request`` (``authorizer`` is refused);
* field selection ``a.b``, indexing ``a['k']`` / ``a[0]``, ``has(a.b)``;
* ``!``, ``-``, ``&&``, ``||``, ``? :``, ``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``in``;
* ``size(x)`` / ``x.size()``, ``s.startsWith(p)``, ``s.endsWith(p)``, ``s.contains(p)``,
  ``s.matches(re)``, and the macros ``l.exists(v, pred)`` / ``l.all(v, pred)``.

Errors at evaluation (a missing key, a type mismatch) raise :class:`CelError`; the admission chain
then applies the webhook's ``failurePolicy``, as kube-apiserver does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["CelError", "Program", "compile_expression"]

VARIABLES = frozenset({"object", "oldObject", "request"})
_METHODS = frozenset({"startsWith", "endsWith", "contains", "matches", "size", "exists", "all"})
_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+)|(?P<str>\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*')|(?P<id>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op>==|!=|<=|>=|&&|\|\||[-!<>?:.,()\[\]]))"
)


class CelError(Exception):
    """A compile error (unsupported or malformed expression) or an evaluation error."""


@dataclass(frozen=True, slots=True)
class _Node:
    op: str  # lit var sel idx has call method not neg and or cond rel list
    args: tuple[Any, ...]


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise CelError(f"unsupported syntax at {text[pos : pos + 10]!r}")
        out.append(m.group(m.lastgroup or "op"))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0
        self.bound: list[str] = []

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, want: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (want is not None and tok != want):
            raise CelError(f"expected {want or 'more input'}, found {tok or 'the end'}")
        self.i += 1
        return tok

    def parse(self) -> _Node:
        node = self.cond()
        if self.peek() is not None:
            raise CelError(f"unexpected {self.peek()!r}")
        return node

    def cond(self) -> _Node:
        node = self.binary(0)
        if self.peek() == "?":
            self.take()
            yes = self.cond()
            self.take(":")
            return _Node("cond", (node, yes, self.cond()))
        return node

    _LEVELS = (("||",), ("&&",), ("==", "!=", "<", "<=", ">", ">=", "in"))

    def binary(self, level: int) -> _Node:
        if level == len(self._LEVELS):
            return self.unary()
        node = self.binary(level + 1)
        while self.peek() in self._LEVELS[level]:
            op = self.take()
            right = self.binary(level + 1)
            node = _Node("rel", (op, node, right)) if level == 2 else _Node(op, (node, right))
            if level == 2:
                break  # relations do not chain in CEL
        return node

    def unary(self) -> _Node:
        if self.peek() in ("!", "-"):
            op = self.take()
            return _Node("not" if op == "!" else "neg", (self.unary(),))
        return self.member(self.primary())

    def member(self, node: _Node) -> _Node:
        while self.peek() in (".", "["):
            if self.take() == "[":
                key = self.cond()
                self.take("]")
                node = _Node("idx", (node, key))
                continue
            name = self.take()
            if not name.isidentifier():
                raise CelError(f"expected a field name after '.', found {name!r}")
            if self.peek() != "(":
                node = _Node("sel", (node, name))
                continue
            if name not in _METHODS:
                raise CelError(f"unsupported function {name}()")
            self.take("(")
            if name in ("exists", "all"):
                var = self.take()
                if not var.isidentifier():
                    raise CelError(f"{name}() needs a variable name first")
                self.take(",")
                self.bound.append(var)
                pred = self.cond()
                self.bound.pop()
                self.take(")")
                node = _Node("macro", (name, node, var, pred))
            else:
                node = _Node("method", (name, node, tuple(self.args())))
        return node

    def args(self) -> list[_Node]:
        out: list[_Node] = []
        while self.peek() != ")":
            out.append(self.cond())
            if self.peek() != ")":
                self.take(",")
        self.take(")")
        return out

    def primary(self) -> _Node:
        tok = self.take()
        if tok == "(":
            node = self.cond()
            self.take(")")
            return node
        if tok == "[":
            items: list[_Node] = []
            while self.peek() != "]":
                items.append(self.cond())
                if self.peek() != "]":
                    self.take(",")
            self.take("]")
            return _Node("list", tuple(items))
        if tok.isdigit():
            return _Node("lit", (int(tok),))
        if tok[0] in "\"'":
            return _Node("lit", (_unquote(tok),))
        if tok in ("true", "false", "null"):
            return _Node("lit", ({"true": True, "false": False, "null": None}[tok],))
        if not tok.isidentifier():
            raise CelError(f"unexpected {tok!r}")
        if self.peek() == "(":
            self.take()
            if tok == "has":
                arg = self.cond()
                self.take(")")
                if arg.op != "sel":
                    raise CelError("has() needs a field selection, e.g. has(object.metadata.labels)")
                return _Node("has", (arg.args[0], arg.args[1]))
            if tok == "size":
                given = self.args()
                if len(given) != 1:
                    raise CelError("size() needs one argument")
                return _Node("method", ("size", given[0], ()))
            raise CelError(f"unsupported function {tok}()")
        if tok == "authorizer":
            raise CelError("the authorizer variable is not supported by the emulator")
        if tok not in VARIABLES and tok not in self.bound:
            raise CelError(f"undeclared reference to {tok!r}")
        return _Node("var", (tok,))


def _unquote(tok: str) -> str:
    body = tok[1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t", "r": "\r"}.get(m.group(1), m.group(1)), body)


@dataclass(frozen=True, slots=True)
class Program:
    """A compiled expression; :meth:`evaluate` returns its boolean value."""

    source: str
    root: _Node

    def evaluate(self, variables: Mapping[str, Any]) -> bool:
        value = _eval(self.root, dict(variables))
        if not isinstance(value, bool):
            raise CelError(f"expression {self.source!r} did not evaluate to a bool (got {type(value).__name__})")
        return value


def compile_expression(text: str) -> Program:
    """Parse ``text``; raise :class:`CelError` for anything outside the supported subset."""
    if not text.strip():
        raise CelError("the expression is empty")
    return Program(text, _Parser(text).parse())


def _eval(node: _Node, env: dict[str, Any]) -> Any:
    op, a = node.op, node.args
    if op == "lit":
        return a[0]
    if op == "var":
        return env[a[0]]
    if op == "list":
        return [_eval(x, env) for x in a]
    if op in ("sel", "has"):
        base = _eval(a[0], env)
        if not isinstance(base, Mapping):
            if op == "has" and base is None:
                raise CelError(f"has(): no such key: {a[1]}")
            raise CelError(f"no such key: {a[1]}")
        if op == "has":
            return a[1] in base
        if a[1] not in base:
            raise CelError(f"no such key: {a[1]}")
        return base[a[1]]
    if op == "idx":
        base, key = _eval(a[0], env), _eval(a[1], env)
        if isinstance(base, Mapping):
            if key not in base:
                raise CelError(f"no such key: {key}")
            return base[key]
        if isinstance(base, list) and isinstance(key, int) and not isinstance(key, bool):
            if not 0 <= key < len(base):
                raise CelError(f"index out of range: {key}")
            return base[key]
        raise CelError("no matching overload for index")
    if op == "not":
        return not _bool(_eval(a[0], env))
    if op == "neg":
        value = _eval(a[0], env)
        if not isinstance(value, int) or isinstance(value, bool):
            raise CelError("no matching overload for '-'")
        return -value
    if op == "&&":
        return _bool(_eval(a[0], env)) and _bool(_eval(a[1], env))
    if op == "||":
        return _bool(_eval(a[0], env)) or _bool(_eval(a[1], env))
    if op == "cond":
        return _eval(a[1], env) if _bool(_eval(a[0], env)) else _eval(a[2], env)
    if op == "rel":
        return _relation(a[0], _eval(a[1], env), _eval(a[2], env))
    if op == "method":
        return _method(a[0], _eval(a[1], env), [_eval(x, env) for x in a[2]])
    if op == "macro":
        name, target, var, pred = a
        items = _eval(target, env)
        if isinstance(items, Mapping):
            items = list(items)
        if not isinstance(items, list):
            raise CelError(f"no matching overload for {name}()")
        results = (_bool(_eval(pred, {**env, var: item})) for item in items)
        return any(results) if name == "exists" else all(results)
    raise CelError(f"unsupported node {op}")  # pragma: no cover - the parser builds no other


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise CelError(f"no matching overload: expected a bool, got {type(value).__name__}")
    return value


def _relation(op: str, left: Any, right: Any) -> bool:
    if op == "in":
        if isinstance(right, Mapping | list):
            return left in right
        raise CelError("no matching overload for 'in'")
    if op == "==":
        return type(left) is type(right) and left == right
    if op == "!=":
        return not (type(left) is type(right) and left == right)
    if type(left) is not type(right) or not isinstance(left, int | str) or isinstance(left, bool):
        raise CelError(f"no matching overload for '{op}'")
    result: bool = {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[op]
    return result


def _method(name: str, target: Any, args: list[Any]) -> Any:
    if name == "size":
        if args or not isinstance(target, str | list | Mapping):
            raise CelError("no matching overload for size()")
        return len(target)
    if not isinstance(target, str) or len(args) != 1 or not isinstance(args[0], str):
        raise CelError(f"no matching overload for {name}()")
    if name == "startsWith":
        return target.startswith(args[0])
    if name == "endsWith":
        return target.endswith(args[0])
    if name == "contains":
        return args[0] in target
    try:
        return re.search(args[0], target) is not None
    except re.error as exc:
        raise CelError(f"matches(): invalid regular expression: {exc}") from None
