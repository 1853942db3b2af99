"""Label selectors, node selector terms, taints and tolerations — Kubernetes semantics, pure.

These are parsed once from API JSON (``from_api``) into frozen values and evaluated many times.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "LabelSelector",
    "NodeAffinity",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "SelectorError",
    "Taint",
    "Toleration",
    "map_key",
    "tolerates_all",
    "untolerated_taint",
]


class SelectorError(ValueError):
    """A selector, taint or toleration that Kubernetes would reject."""


_SET_OPS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})


def map_key(d: Mapping[str, object]) -> tuple[tuple[str, object], ...]:
    """A map (node selector, resource list) as a hashable key that ignores its order."""
    return tuple(sorted(d.items())) if d else ()


_NODE_OPS = _SET_OPS | {"Gt", "Lt"}
_LABEL_TOKEN = re.compile(r"\s*(!=|==|=|\(|\)|,|!|>|<|[A-Za-z0-9_./-]+)")


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    @classmethod
    def from_api(cls, raw: Mapping[str, Any], *, node_ops: bool) -> NodeSelectorRequirement:
        key = raw.get("key")
        op = raw.get("operator")
        values = tuple(str(v) for v in (raw.get("values") or ()))
        allowed = _NODE_OPS if node_ops else _SET_OPS
        if not isinstance(key, str) or not key:
            raise SelectorError(f"selector requirement {dict(raw)!r}: key is required")
        if op not in allowed:
            raise SelectorError(f"selector requirement on {key!r}: operator {op!r} not one of {sorted(allowed)}")
        if op in ("In", "NotIn") and not values:
            raise SelectorError(f"selector requirement on {key!r}: operator {op} needs values")
        if op in ("Exists", "DoesNotExist") and values:
            raise SelectorError(f"selector requirement on {key!r}: operator {op} takes no values")
        if op in ("Gt", "Lt"):
            if len(values) != 1:
                raise SelectorError(f"selector requirement on {key!r}: operator {op} needs exactly one value")
            try:
                int(values[0])
            except ValueError:
                raise SelectorError(
                    f"selector requirement on {key!r}: operator {op} needs an integer, got {values[0]!r}"
                ) from None
        return cls(key, op, values)

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == "In":
            return labels.get(self.key) in self.values
        if op == "NotIn":
            return labels.get(self.key) not in self.values
        if op == "Exists":
            return self.key in labels
        if op == "DoesNotExist":
            return self.key not in labels
        have = labels.get(self.key)
        if have is None:
            return False
        try:
            value = int(have)
        except ValueError:
            return False
        limit = int(self.values[0])
        return value > limit if op == "Gt" else value < limit


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """``metav1.LabelSelector``: matchLabels AND every matchExpression. Empty selects everything."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()

    @classmethod
    def from_api(cls, raw: Mapping[str, Any] | None) -> LabelSelector:
        if not raw:
            return cls()
        ml = raw.get("matchLabels") or {}
        if not isinstance(ml, Mapping):
            raise SelectorError("matchLabels must be a map")
        exprs = raw.get("matchExpressions") or ()
        return cls(
            tuple(sorted((str(k), str(v)) for k, v in ml.items())),
            tuple(NodeSelectorRequirement.from_api(e, node_ops=False) for e in exprs),
        )

    @classmethod
    def parse(cls, text: str) -> LabelSelector:
        """Parse the string form used in ``?labelSelector=`` (``a=b,c!=d,e in (x,y),!f,g``)."""
        return _parse_selector_string(text)

    def is_empty(self) -> bool:
        return not self.match_labels and not self.match_expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        for k, v in self.match_labels:
            if labels.get(k) != v:
                return False
        return all(e.matches(labels) for e in self.match_expressions)


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """One term of node affinity: every expression (on labels) and field (on metadata.name) holds."""

    expressions: tuple[NodeSelectorRequirement, ...] = ()
    fields: tuple[NodeSelectorRequirement, ...] = ()

    @classmethod
    def from_api(cls, raw: Mapping[str, Any]) -> NodeSelectorTerm:
        return cls(
            tuple(NodeSelectorRequirement.from_api(e, node_ops=True) for e in raw.get("matchExpressions") or ()),
            tuple(NodeSelectorRequirement.from_api(e, node_ops=True) for e in raw.get("matchFields") or ()),
        )

    def matches(self, node_name: str, labels: Mapping[str, str]) -> bool:
        if not self.expressions and not self.fields:
            return False  # an empty term matches nothing (Kubernetes semantics)
        if not all(e.matches(labels) for e in self.expressions):
            return False
        fields = {"metadata.name": node_name}
        return all(f.matches(fields) for f in self.fields)


@dataclass(frozen=True, slots=True)
class NodeAffinity:
    """Required terms (ORed) and preferred terms (weight, term)."""

    required: tuple[NodeSelectorTerm, ...] = ()
    preferred: tuple[tuple[int, NodeSelectorTerm], ...] = ()

    @classmethod
    def from_api(cls, raw: Mapping[str, Any] | None) -> NodeAffinity | None:
        if not raw:
            return None
        req = raw.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
        terms = tuple(NodeSelectorTerm.from_api(t) for t in req.get("nodeSelectorTerms") or ())
        pref = tuple(
            (int(p.get("weight", 0)), NodeSelectorTerm.from_api(p.get("preference") or {}))
            for p in raw.get("preferredDuringSchedulingIgnoredDuringExecution") or ()
        )
        if not terms and not pref:
            return None
        return cls(terms, pref)

    def required_matches(self, node_name: str, labels: Mapping[str, str]) -> bool:
        if not self.required:
            return True
        return any(t.matches(node_name, labels) for t in self.required)

    def preferred_score(self, node_name: str, labels: Mapping[str, str]) -> int:
        return sum(w for w, t in self.preferred if t.matches(node_name, labels))


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str  # NoSchedule | PreferNoSchedule | NoExecute

    @classmethod
    def from_api(cls, raw: Mapping[str, Any]) -> Taint:
        return cls(str(raw.get("key", "")), str(raw.get("value") or ""), str(raw.get("effect", "")))

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # empty tolerates every effect

    @classmethod
    def from_api(cls, raw: Mapping[str, Any]) -> Toleration:
        op = str(raw.get("operator") or "Equal")
        if op not in ("Equal", "Exists"):
            raise SelectorError(f"toleration operator {op!r} not one of ['Equal', 'Exists']")
        return cls(str(raw.get("key") or ""), op, str(raw.get("value") or ""), str(raw.get("effect") or ""))

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if not self.key and self.operator != "Exists":
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


def untolerated_taint(
    taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...], effects: frozenset[str]
) -> Taint | None:
    """The first taint with an effect in ``effects`` that no toleration tolerates, else None."""
    for taint in taints:
        if taint.effect not in effects:
            continue
        if not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


def tolerates_all(taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...]) -> bool:
    return untolerated_taint(taints, tolerations, frozenset({"NoSchedule", "NoExecute"})) is None


def _tokenize(text: str) -> list[str]:
    tokens: list[str] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _LABEL_TOKEN.match(text, pos)
        if m is None:
            raise SelectorError(f"label selector {text!r}: unexpected character at position {pos}: {text[pos]!r}")
        tokens.append(m.group(1))
        pos = m.end()
    return tokens


def _parse_selector_string(text: str) -> LabelSelector:
    """``labels.Parse`` of apimachinery: ``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``, ``a notin (x)``,
    ``a``, ``!a``, ``a>1``, ``a<1``, joined by commas."""
    tokens = _tokenize(text)
    reqs: list[NodeSelectorRequirement] = []
    i = 0

    def need(what: str) -> str:
        nonlocal i
        if i >= len(tokens):
            raise SelectorError(f"label selector {text!r}: expected {what} at end of input")
        tok = tokens[i]
        i += 1
        return tok

    def is_word(tok: str) -> bool:
        return tok not in ("!=", "==", "=", "(", ")", ",", "!", ">", "<")

    while i < len(tokens):
        tok = need("a requirement")
        if tok == "!":
            key = need("a key after '!'")
            if not is_word(key):
                raise SelectorError(f"label selector {text!r}: expected a key after '!', got {key!r}")
            reqs.append(NodeSelectorRequirement(key, "DoesNotExist"))
        elif is_word(tok):
            key = tok
            nxt = tokens[i] if i < len(tokens) else ","
            if nxt == ",":
                reqs.append(NodeSelectorRequirement(key, "Exists"))
            elif nxt in ("=", "==", "!="):
                i += 1
                value = tokens[i] if i < len(tokens) and is_word(tokens[i]) else ""
                if value:
                    i += 1
                reqs.append(NodeSelectorRequirement(key, "NotIn" if nxt == "!=" else "In", (value,)))
            elif nxt in (">", "<"):
                i += 1
                value = need("a number")
                try:
                    int(value)
                except ValueError:
                    raise SelectorError(
                        f"label selector {text!r}: {key}{nxt} needs an integer, got {value!r}"
                    ) from None
                reqs.append(NodeSelectorRequirement(key, "Gt" if nxt == ">" else "Lt", (value,)))
            elif nxt in ("in", "notin"):
                i += 1
                if need("'('") != "(":
                    raise SelectorError(f"label selector {text!r}: expected '(' after {nxt!r}")
                values: list[str] = []
                while True:  # value (',' value)* ')'
                    v = need("a value")
                    if not is_word(v):
                        raise SelectorError(f"label selector {text!r}: expected a value but found {v!r}")
                    values.append(v)
                    sep = need("',' or ')'")
                    if sep == ")":
                        break
                    if sep != ",":
                        raise SelectorError(f"label selector {text!r}: expected ',' or ')' but found {sep!r}")
                reqs.append(NodeSelectorRequirement(key, "In" if nxt == "in" else "NotIn", tuple(values)))
            else:
                raise SelectorError(f"label selector {text!r}: unexpected {nxt!r} after key {key!r}")
        else:
            raise SelectorError(f"label selector {text!r}: unexpected {tok!r}")
        if i < len(tokens):
            if tokens[i] != ",":
                raise SelectorError(f"label selector {text!r}: expected ',' but found {tokens[i]!r}")
            i += 1
            if i == len(tokens):
                raise SelectorError(f"label selector {text!r}: expected a requirement after ','")
    return LabelSelector((), tuple(reqs))
