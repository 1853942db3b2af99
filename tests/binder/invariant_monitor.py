"""DESIGN §4 invariants 1–3 checked on the emulator's objects after every write it commits — "at
every instant on the API objects", not only once a scenario settles. A test attaches a
:class:`Monitor` to an emulator, runs its scenario, and asserts ``not monitor.seen``.

* invariant 1: Σ ``spec.request`` of the quotas whose ``status.nodeName`` is a node ≤ that
  node's allocatable, per resource name;
* invariant 2: a live pod on a node claims a quota bound to that node;
* invariant 3: Σ requests of a quota's live claimants ≤ its ``request`` + ``shadowResource``,
  per declared name.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from extender import wellknown
from extender.cache.convert import pod_request
from extender.emulator import Emulator
from extender.model.resources import Resource

__all__ = ["Monitor", "violations"]

Obj = dict[str, Any]


def _objs(store: Any, group: str, version: str, plural: str) -> list[Obj]:
    rt = store.find_resource(group, version, plural)
    return [] if rt is None else store.objects(rt)


def _alive(p: Obj) -> bool:
    return (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed") and not p["metadata"].get(
        "deletionTimestamp"
    )


def _quota_totals(quotas: dict[str, Obj], nodes: dict[str, Obj]) -> list[str]:
    per_node: defaultdict[str, Resource] = defaultdict(Resource.empty)
    for q in quotas.values():
        node = (q.get("status") or {}).get("nodeName")
        if node:
            per_node[node].iadd(Resource.from_list(q["spec"].get("request") or {}))
    out = []
    for node, total in per_node.items():
        n = nodes.get(node)
        alloc = Resource.from_list(((n or {}).get("status") or {}).get("allocatable") or {})
        if n is not None and not total.less_equal_with_resource_names(alloc):
            out.append(f"inv1 {node}: quotas {total} > allocatable {alloc}")
    return out


def violations(store: Any, *, inv2: bool = True) -> list[str]:
    """Every invariant broken by the store's objects as they are now."""
    quotas = {q["metadata"]["name"]: q for q in _objs(store, wellknown.GROUP, wellknown.VERSION, wellknown.QUOTAS)}
    nodes = {n["metadata"]["name"]: n for n in _objs(store, "", "v1", "nodes")}
    out = _quota_totals(quotas, nodes)
    claims: defaultdict[str, Resource] = defaultdict(Resource.empty)
    for p in _objs(store, "", "v1", "pods"):
        q = (p["metadata"].get("annotations") or {}).get(wellknown.ANNO_QUOTA_NAME)
        if not _alive(p) or not q or q not in quotas:
            continue
        where = (quotas[q].get("status") or {}).get("nodeName") or ""
        on = (p.get("spec") or {}).get("nodeName") or ""
        if inv2 and on and on != where:
            out.append(f"inv2 pod {p['metadata']['name']} on {on!r} but its quota {q} is bound to {where!r}")
        spec = quotas[q]["spec"]
        names = Resource.from_list(spec.get("request") or {}).q.keys() | (spec.get("shadowResource") or {}).keys()
        claims[q].iadd(Resource({k: v for k, v in pod_request(p).q.items() if k in names}))
    for q, total in claims.items():
        spec = quotas[q]["spec"]
        cap = Resource.from_list(spec.get("request") or {}) + Resource.from_list(spec.get("shadowResource") or {})
        if not total.less_equal_with_resource_names(cap):
            out.append(f"inv3 quota {q}: claims {total} > request+shadow {cap}")
    return out


class Monitor:
    """Checks the invariants after every committed write of quotas, pods and nodes; records each
    distinct violation the first time it appears, with the write that caused it."""

    def __init__(self, emulator: Emulator, *, inv2: bool = True) -> None:
        self.store = emulator.store
        self.inv2 = inv2
        self.seen: dict[str, str] = {}
        self.store.commit_hooks.append(self._after)

    def _after(self, rt: Any, type_: str, stored: Obj) -> None:
        if rt.plural not in (wellknown.QUOTAS, "pods", "nodes"):
            return
        what = f"rv{stored['metadata']['resourceVersion']} {type_} {rt.plural}/{stored['metadata']['name']}"
        for v in violations(self.store, inv2=self.inv2):
            self.seen.setdefault(v, what)

    def report(self) -> str:
        return "\n".join(f"{v}  (after {w})" for v, w in self.seen.items())
