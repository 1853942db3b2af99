"""Hostile request bodies for the endpoint fuzz tests (hypothesis strategies), and a one-loop runner.

A body is drawn three ways: a valid document with a few of its members (at any depth) replaced
by arbitrary JSON — wrong types, nulls, deep nesting, huge arrays, unicode, odd node names —,
an arbitrary JSON document, or bytes that are not JSON at all (deeper than any parser's limit,
truncated, invalid UTF-8). Every endpoint must answer each of them without a 5xx, with a reply of
its own type.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import orjson
from hypothesis import strategies as st

Obj = dict[str, Any]
T = TypeVar("T")

ODD_NAMES = [
    "",
    " ",
    "a" * 300,
    'gpu-n0","gpu-n1',
    'n\\",\\"x',
    "n\\",
    "ノード-1",
    "\u202enode",
    "\x00",
    "node/../../etc",
    "%2e%2e",
    "🚀",
]

_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(ODD_NAMES),
)
json_values: st.SearchStrategy[Any] = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=8), st.sampled_from(ODD_NAMES)), inner, max_size=4),
    ),
    max_leaves=12,
)
"""Arbitrary JSON (orjson can encode every value: integers within 64 bits)."""


def nested(depth: int) -> Any:
    out: Any = "x"
    for i in range(depth):
        out = [out] if i % 2 else {"k": out}
    return out


hostile_values = st.one_of(
    json_values,
    st.integers(min_value=1, max_value=200).map(nested),  # deep, yet encodable (orjson: 254 levels)
    st.integers(min_value=0, max_value=20_000).map(lambda n: ["gpu-n00"] * n),  # huge arrays
    st.integers(min_value=0, max_value=2_000).map(lambda n: {f"k{i}": i for i in range(n)}),
    st.lists(st.sampled_from(ODD_NAMES), max_size=20),
)


def paths(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every member path of ``doc`` (object keys and array indices), the root excluded."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield (*prefix, k)
            yield from paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield (*prefix, i)
            yield from paths(v, (*prefix, i))


def _has(target: Any, k: Any) -> bool:
    if isinstance(target, dict):
        return k in target
    return isinstance(target, list) and isinstance(k, int) and k < len(target)


def replace(doc: Any, path: tuple[Any, ...], value: Any) -> None:
    """Set ``doc[path]`` when the parents still exist (an earlier replacement may have removed them)."""
    target = doc
    for k in path[:-1]:
        if not _has(target, k):
            return
        target = target[k]
    key = path[-1]
    # a JSON object takes only string keys: an earlier change may have made a list's parent a dict
    if (isinstance(target, dict) and isinstance(key, str)) or (isinstance(target, list) and _has(target, key)):
        target[key] = value


def mutations(valid: Obj) -> st.SearchStrategy[bytes]:
    """``valid`` with one to three members replaced by hostile values, encoded."""
    every = list(paths(valid))

    def build(changes: list[tuple[tuple[Any, ...], Any]], drop: list[tuple[Any, ...]]) -> bytes:
        doc = copy.deepcopy(valid)
        for p, v in changes:
            replace(doc, p, v)
        for p in drop:
            parent: object = doc
            for k in p[:-1]:
                parent = parent.get(k) if isinstance(parent, dict) else None
            if isinstance(parent, dict):
                parent.pop(p[-1], None)
        return orjson.dumps(doc)

    change = st.tuples(st.sampled_from(every), hostile_values)
    droppable = [p for p in every if all(isinstance(k, str) for k in p)]
    return st.builds(build, st.lists(change, min_size=1, max_size=3), st.lists(st.sampled_from(droppable), max_size=2))


raw_bodies = st.one_of(
    st.binary(max_size=64),
    st.integers(min_value=1_000, max_value=5_000).map(lambda n: b"[" * n + b"]" * n),  # past any depth limit
    st.integers(min_value=1, max_value=40).map(lambda n: b'{"apiVersion": 1' + b"," * n),
    st.just(b"\xff\xfe{}"),
    st.just(b'{"n": 1' + b"0" * 400 + b"}"),  # an integer past 64 bits
    st.just(b""),
)


def bodies(valid: Obj) -> st.SearchStrategy[bytes]:
    return st.one_of(mutations(valid), json_values.map(orjson.dumps), raw_bodies)


class LoopRunner:
    """Runs coroutines on one event loop from synchronous (hypothesis) test bodies."""

    def __init__(self) -> None:
        self.runner = asyncio.Runner()

    def __call__(self, coro_fn: Callable[[], Awaitable[T]]) -> T:
        async def wrapped() -> T:
            return await coro_fn()

        return self.runner.run(wrapped())

    def close(self) -> None:
        self.runner.close()
