"""The filter reply as the extender built it before the lean reply (commit df71e4a, verbatim but
for names): every failing candidate listed with its reason even when a node passes, the
unresolvable map spliced as bytes from the candidate list. Kept only as the reference the lean
reply is compared with (tests/extender/test_lean_reply.py)."""

from __future__ import annotations

from typing import Any

import orjson

from extender.actions import bind as bind_action
from extender.actions.outcome import FilterOutcome


def unresolvable_parts(
    outcome: FilterOutcome, rest: bind_action.Rest | None, names: list[str]
) -> list[bytes | memoryview]:
    """``FailedAndUnresolvableNodes`` as pieces of JSON: the outcome's own entries plus ``rest``,
    written straight from the candidate list without an N-entry dict. orjson escapes every name,
    so the only ``","`` in the array's bytes are the separators between names."""
    own = orjson.dumps(outcome.unresolvable)
    if rest is None:
        return [own]
    others = names
    i = -1
    if rest.skip:
        i = bind_action.position(names, rest.skip)
        if i >= 0:
            others = names[:i] + names[i + 1 :]
    if not others:
        return [own]
    array = orjson.dumps(others)
    if i >= 0 and orjson.dumps(rest.skip) in array:
        # listed more than once (or a name with an escaped quote looks so): drop every copy
        others = [n for n in others if n != rest.skip]
        if not others:
            return [own]
        array = orjson.dumps(others)
    message = orjson.dumps(rest.message)
    bulk = array.replace(b'","', b'":' + message + b',"')  # ["a":M,"b"]
    # '["a":M,"b"]' → '{"a":M,"b":M' + the own entries + '}'
    tail = b"}" if own == b"{}" else b"," + own[1:]
    return [b"{", memoryview(bulk)[1:-1], b":", message, tail]  # the view: no copy of the bulk


def filter_reply(
    outcome: FilterOutcome,
    rest: bind_action.Rest | None,
    names: list[str],
    node_list: dict[str, Any] | None,
) -> bytes:
    """ExtenderFilterResult in the form of the request: ``NodeNames`` or the ``Nodes`` list."""
    if node_list is not None:
        keep = set(outcome.passed)
        items = [i for i in node_list.get("items") or [] if (i.get("metadata") or {}).get("name") in keep]
        nodes, passed = orjson.dumps({**node_list, "items": items}), b"null"
    else:
        nodes, passed = b"null", orjson.dumps(outcome.passed)
    return b"".join(
        [
            b'{"Nodes":',
            nodes,
            b',"NodeNames":',
            passed,
            b',"FailedNodes":',
            orjson.dumps(outcome.failed),
            b',"FailedAndUnresolvableNodes":',
            *unresolvable_parts(outcome, rest, names),
            b',"Error":""}',
        ]
    )
