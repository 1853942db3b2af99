"""Quota bindings in flight (``extender/cache/bindings.py``) through any sequence of assumptions,
deliveries of the quota's object, forgets, deletes and expiries.

The oracle is the rule as the module states it: a quota counts on the node of its binding in
flight while its object shows no node, on its object's node otherwise; a delivery that shows a
node, or is another object (re-created), ends the binding; a forget or an expiry makes the
quota as its object says again. Checked after every step: each quota's ``node_name`` and phase,
and every node ledger's set of quotas, against that oracle.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.cache.cache import ClusterCache
from extender.model.node import LedgerError
from extender.model.quota import QuotaPhase
from tests import builders as b

NODES = ["n0", "n1"]
QUOTAS = ["q-a", "q-b", "q-c"]
TTL = 60.0


class World:
    """A cache of two 8-GPU nodes and the oracle's view of its quotas."""

    def __init__(self) -> None:
        self.now = 1_000_000.0
        self.cache = ClusterCache(clock=lambda: self.now, assume_ttl=TTL)
        b.feed(self.cache, [b.node(n) for n in NODES])
        self.rv = 10
        self.objects: dict[str, dict[str, Any]] = {}  # quota → the object last delivered
        self.flight: dict[str, tuple[str, str, float]] = {}  # quota → (node, uid, expires)
        self.uids: dict[str, int] = {}

    def deliver(self, name: str, node: str, *, recreate: bool = False) -> None:
        self.rv += 1
        if recreate or name not in self.uids:
            self.uids[name] = self.uids.get(name, 0) + 1
        status = {"phase": "QuotaBound", "nodeName": node} if node else None
        obj = b.quota(name, gpu=2, hca=None, status=status)
        obj["metadata"].update(resourceVersion=str(self.rv), uid=f"{name}-{self.uids[name]}")
        self.cache.on_quota_add(obj)
        self.objects[name] = obj
        held = self.flight.get(name)
        if held is not None and (node or held[1] != obj["metadata"]["uid"]):
            del self.flight[name]

    def node_of(self, name: str) -> str:
        """The oracle: where the quota counts."""
        if name in self.flight:
            return self.flight[name][0]
        return str((self.objects[name].get("status") or {}).get("nodeName") or "")

    def check(self) -> None:
        for name in self.objects:
            q = self.cache.quotas[name]
            want = self.node_of(name)
            assert q.node_name == want, (name, q.node_name, want)
            assert q.phase is (QuotaPhase.BOUND if want else QuotaPhase.EMPTY)
            assert q.in_flight == (name in self.flight)  # hop ③ waits for the API while it is
        for n in NODES:
            on = {name for name in self.objects if self.node_of(name) == n}
            assert {name for name in QUOTAS if self.cache.nodes[n].has_quota(name)} == on, n
        assert set(self.cache.bindings) == set(self.flight)


steps = st.lists(
    st.tuples(
        st.sampled_from(["assume", "forget", "deliver", "deliver-bound", "recreate", "delete", "later"]),
        st.sampled_from(QUOTAS),
        st.sampled_from(NODES),
    ),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(steps)
def test_a_quota_counts_where_its_binding_in_flight_or_its_object_says(ops: list[tuple[str, str, str]]) -> None:
    w = World()
    for name in QUOTAS:
        w.deliver(name, "")
    for op, name, node in ops:
        if op == "assume":
            if name in w.objects and not w.node_of(name):
                w.cache.assume_binding(name, node, force=True)
                w.flight[name] = (node, w.objects[name]["metadata"]["uid"], w.now + TTL)
        elif op == "forget":
            w.cache.forget_binding(name)
            w.flight.pop(name, None)
        elif op in ("deliver", "deliver-bound", "recreate") and (name in w.objects or op == "recreate"):
            w.deliver(name, node if op == "deliver-bound" else "", recreate=op == "recreate")
        elif op == "delete" and name in w.objects:
            w.cache.on_quota_delete(w.objects.pop(name))
            w.flight.pop(name, None)
        elif op == "later":
            w.now += TTL / 2
            w.cache.expire_assumed()
            w.flight = {k: v for k, v in w.flight.items() if v[2] > w.now}
        w.check()


def test_a_binding_that_does_not_fit_is_refused_and_counts_nowhere() -> None:
    w = World()
    w.deliver("q-a", "n0")
    big = b.quota("q-big", gpu=8, hca=None)
    w.cache.on_quota_add(big)
    with pytest.raises(LedgerError):
        w.cache.assume_binding("q-big", "n0")  # n0 has 6 GPUs of quota room left
    assert not w.cache.bindings
    assert not w.cache.nodes["n0"].has_quota("q-big")
    assert w.cache.quotas["q-big"].node_name == ""
