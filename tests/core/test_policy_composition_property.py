"""The QN stages stay the extension points of gang planning (issue 16 item 1), as a property over
random policies: ``qn.select`` / ``qn.predicate`` decide which nodes can take a quota of the gang,
``qn.node_order`` scores them, ``qn.best_n`` (topology) orders ranks; the policy file composes them.

A policy is the default one (``extender/conf/default_policy.yaml``) or an example's
(``examples/scenarios/*.yaml`` with a ``policy:``), with its QN filter stages rewritten to a random
subset of their plugins, in a random order, joined by ``and`` or ``joint`` (the stage's gate
plugins — the quota ledger's ``quotapredicates``, the GPU model's ``specpool`` — kept), and its
score stage to a random subset of its plugins with random weights. On the clusters and gangs of
``test_topology_property`` one cycle must then keep every rule of that property — capacity, one
GPU model, minMember, rank order, the fewest zones, rule 1's best fit, distinct nodes (or, with
``pack_workers``, the fewest nodes), liveness — where "usable" is what the policy's predicates
make it: with ``predicates`` in ``qn.predicate`` a NotReady or tainted node is never chosen;
without it, such a node counts like any other. So removing a plugin changes only what that
plugin decides: a scorer changes no zone and no count of nodes (a lone gang takes the same zones
as under the default policy), a predicate changes only which nodes are candidates.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from extender.conf import default_policy_text, load_policy_text
from extender.framework.policy import Policy
from tests.core.props import PROPERTY
from tests.core.scenarios import quota_node
from tests.core.topo_cluster import NodeSpec
from tests.core.topo_gangs import Cluster, Gang, clusters, run

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "scenarios"
FILTERS = ("qn.select", "qn.predicate")
GATES = frozenset({"quotapredicates", "specpool"})  # the ledger's room and the GPU model: not optional here
SCORES = "qn.node_order"


@cache
def base_policies() -> tuple[tuple[str, str], ...]:
    """(source, YAML text) of the default policy and every example scenario's own policy."""
    out = [("default_policy.yaml", default_policy_text())]
    for path in sorted(EXAMPLES.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        if isinstance(doc, dict) and isinstance(doc.get("policy"), dict):
            out.append((path.name, yaml.safe_dump(doc["policy"])))
    return tuple(out)


def _plugins(expr: str) -> list[str]:
    """The plugin names of a stage expression ``op(a, 2*b, …)``, weights dropped."""
    inner = expr[expr.index("(") + 1 : expr.rindex(")")]
    return [part.split("*")[-1].strip() for part in inner.split(",")]


@st.composite
def policies(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    """A policy document with random QN stages, and its source's name."""
    source, text = draw(st.sampled_from(base_policies()))
    doc = yaml.safe_load(text)
    stages = doc["stages"]
    for stage in FILTERS:
        names = _plugins(stages[stage])
        kept = [n for n in names if n in GATES or draw(st.booleans())]
        kept = draw(st.permutations(kept))
        stages[stage] = f"{draw(st.sampled_from(['and', 'joint']))}({', '.join(kept)})"
    names = _plugins(stages[SCORES])
    scored = [n for n in names if draw(st.booleans())] or names[:1]
    weights = [draw(st.sampled_from([1, 2, 5])) for _ in scored]
    stages[SCORES] = (
        f"sum({', '.join(f'{w}*{n}' for w, n in zip(weights, draw(st.permutations(scored)), strict=True))})"
    )
    doc["plugins"]["topology"]["pack_workers"] = draw(st.booleans())
    return doc, source


def load(doc: dict[str, Any], source: str) -> Policy:
    return _load(yaml.safe_dump(doc), source)


@cache
def _load(text: str, source: str) -> Policy:
    return load_policy_text(text, f"{source} with random QN stages")


def as_seen(c: Cluster, doc: dict[str, Any]) -> Cluster:
    """The cluster as the policy's predicates see it: without ``predicates`` in ``qn.predicate``,
    NotReady and tainted nodes take quotas like the others."""
    if "predicates" in _plugins(doc["stages"]["qn.predicate"]):
        return c
    return Cluster([replace(n, ready=True, tainted=False) for n in c.nodes], c.gangs, c.repel)


@PROPERTY
@given(clusters(), policies())
def test_any_composition_of_the_qn_stages_keeps_every_placement_rule(
    c: Cluster, drawn: tuple[dict[str, Any], str]
) -> None:
    doc, source = drawn
    pack = bool(doc["plugins"]["topology"]["pack_workers"])
    result = run(as_seen(c, doc), liveness=True, policy=load(doc, source), pack=pack)
    ssn = result.session
    if "predicates" in _plugins(doc["stages"]["qn.predicate"]):
        unusable = {n.name for n in c.nodes if not n.usable}
        for g in c.gangs:
            for i, q in enumerate(g.quotas):
                node = quota_node(ssn, q)
                assert i in g.bound or node not in unusable, f"{q} on {node}, which qn.predicate refuses"


def _scored_by_topology_alone() -> tuple[dict[str, Any], str]:
    """The default policy with ``qn.node_order: sum(1*topology)`` (no binpack, no nodeorder)."""
    source, text = base_policies()[0]
    doc = yaml.safe_load(text)
    doc["stages"]["qn.node_order"] = "sum(1*topology)"
    doc["plugins"]["topology"]["pack_workers"] = False
    return doc, source


def _sibling_on_the_middle_node() -> Cluster:
    """4×1 GPU, rank 2 bound on n1 of n0, n1, n2 (half busy): ranks 0 and 1 must sit on n0–n1, so
    one node takes two ranks — n0 under one score, n1 (beside rank 2) under another. Either way
    the gang uses three nodes; its unbound ranks alone use two or three."""
    nodes = [NodeSpec(f"n{i}", i, 1, "A100", True, False, busy) for i, busy in enumerate((0, 0, 4))]
    nodes += [NodeSpec(f"n{i}", i, 2, "A100", True, False, 0) for i in range(3, 6)]
    return Cluster(nodes, [Gang("g0", 4, 1, False, bound={2: "n1"})])


def _packed_scored_by_sylas() -> tuple[dict[str, Any], str]:
    """The default policy with ``pack_workers``, ``qn.node_order: sum(1*sylas)`` and no node
    predicates in the QN stages (what hypothesis drew)."""
    source, text = base_policies()[0]
    doc = yaml.safe_load(text)
    doc["stages"].update({"qn.select": "and(quotapredicates, specpool)", "qn.predicate": "and(quotapredicates)"})
    doc["stages"]["qn.node_order"] = "sum(1*sylas)"
    doc["plugins"]["topology"]["pack_workers"] = True
    return doc, source


def _siblings_in_two_leaves() -> Cluster:
    """3×1 GPU packed, rank 0 bound on n3 (leaf 1), rank 2 on n11 (leaf 3): rank 1 joins a
    sibling's node, n3 or n11 alike by the zone rules (the roomier siblings' leaf first: leaf 1);
    before, the siblings' leaves were one pool ordered by score, so the scores chose the leaf."""
    leaf = [1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 3, 3, 4, 4]
    ready = {3, 4, 8, 9, 11}
    nodes = [NodeSpec(f"n{i}", i, leaf[i], "A100", i in ready, i not in ready, 0) for i in range(14)]
    return Cluster(nodes, [Gang("g0", 3, 1, False, bound={0: "n3", 2: "n11"})])


def _rank_between_two_leaves() -> Cluster:
    """4×1 GPU packed, ranks 0 and 1 bound on n2, n3 (leaf 1), rank 3 on n4 (leaf 2): rank 2's
    range [3, 4] holds a sibling's node in each leaf; the roomier siblings' leaf (leaf 1) takes it."""
    ready = {2, 3, 4}
    nodes = [NodeSpec(f"n{i}", i, 1 if i < 4 else 2, "A100", i in ready, i not in ready, 0) for i in range(6)]
    return Cluster(nodes, [Gang("g0", 4, 1, False, bound={0: "n2", 1: "n3", 3: "n4"})])


@PROPERTY
@given(clusters(max_gangs=1), policies())
@example(c=_sibling_on_the_middle_node(), drawn=_scored_by_topology_alone())
@example(c=_siblings_in_two_leaves(), drawn=_packed_scored_by_sylas())
@example(c=_rank_between_two_leaves(), drawn=_packed_scored_by_sylas())
def test_scores_and_filters_change_no_zone_of_a_lone_gang(c: Cluster, drawn: tuple[dict[str, Any], str]) -> None:
    """A lone gang's unbound quotas take the same zones, and the gang as many nodes, whatever the
    scores (they decide only which nodes of a zone), as under its source policy with the same
    predicates. The gang's nodes count its bound siblings': a rank that must share a node may
    share a sibling's or another rank's, as the scores choose."""
    doc, source = drawn
    seen = as_seen(c, doc)
    got = run(seen, liveness=True, policy=load(doc, source), zone_rules=False).session
    plain = yaml.safe_load(dict(base_policies())[source])
    plain["stages"]["qn.predicate"] = doc["stages"]["qn.predicate"]
    plain["plugins"]["topology"]["pack_workers"] = doc["plugins"]["topology"]["pack_workers"]
    want = run(seen, liveness=True, policy=load(plain, source), zone_rules=False).session
    spec = {n.name: n for n in c.nodes}
    (g,) = c.gangs
    todo = [q for i, q in enumerate(g.quotas) if i not in g.bound]  # a bound sibling's node is no choice
    mine = [quota_node(got, q) for q in todo]
    theirs = [quota_node(want, q) for q in todo]
    assert [bool(n) for n in mine] == [bool(n) for n in theirs], f"{mine} vs {theirs}"
    assert {spec[n].zone for n in mine if n} == {spec[n].zone for n in theirs if n}, f"{mine} vs {theirs}"
    siblings = set(g.bound.values())
    assert len(siblings.union(filter(None, mine))) == len(siblings.union(filter(None, theirs))), f"{mine} vs {theirs}"
