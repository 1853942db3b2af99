"""The two node ledgers (DESIGN §4, seed 2.8) under random operation sequences.

A hypothesis state machine drives one :class:`NodeInfo` through add/remove/update of quotas and
tasks (every task status, including Releasing and Pipelined, forced and not) and allocatable
changes, next to an independent reference model written with plain dicts. After every step:

* ``NodeInfo.check()`` passes (every derived field recomputes to itself);
* every ledger field equals the reference, and an operation raised ``LedgerError`` exactly when
  the reference says it must, leaving the ledgers unchanged;
* invariant 1 (Σ request of bound quotas ≤ allocatable, per resource name) is never broken by an
  unforced operation, and the pod-ledger analogue (Σ used ≤ allocatable) likewise;
* a clone is independent: mutating it leaves the original exactly as it was, and mutating
  the original leaves the clone so.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from extender.model.node import LedgerError, NodeInfo
from extender.model.resources import Resource
from extender.model.task import ON_NODE, TaskInfo, TaskStatus
from tests.core.props import PROPERTY, plain

GPU = "nvidia.com/gpu"
HCA = "rdma/hca"
NAMES = ["cpu", GPU, HCA, "example.com/fpga"]
S = TaskStatus

amounts = st.dictionaries(st.sampled_from(NAMES), st.integers(0, 8), max_size=3)
allocatables = st.dictionaries(st.sampled_from(NAMES), st.integers(0, 16), max_size=4)
quota_names = st.sampled_from([f"q{i}" for i in range(5)])
task_uids = st.sampled_from([f"t{i}" for i in range(6)])
placed_statuses = st.sampled_from(sorted(ON_NODE | {S.PIPELINED}, key=lambda s: s.value))


def add(a: dict[str, int], b: dict[str, int], sign: int = 1) -> dict[str, int]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + sign * v
    return {k: v for k, v in out.items() if v}


def total(parts: list[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in parts:
        out = add(out, p)
    return out


def fits(request: dict[str, int], alloc: dict[str, int], taken: dict[str, int]) -> bool:
    """Does ``request`` fit ``alloc − taken``? A requested name the node lacks never fits."""
    return all(v <= alloc.get(k, 0) - taken.get(k, 0) for k, v in request.items() if v > 0)


def within(held: dict[str, int], alloc: dict[str, int]) -> bool:
    return all(v <= alloc.get(k, 0) for k, v in held.items() if v > 0)


def make_task(uid: str, status: TaskStatus, request: dict[str, int]) -> TaskInfo:
    return TaskInfo(uid, "ns", f"pod-{uid}", "ns/job", Resource(dict(request)), status=status)


class LedgerMachine(RuleBasedStateMachine):
    node: NodeInfo

    @initialize(alloc=allocatables)
    def start(self, alloc: dict[str, int]) -> None:
        self.node = NodeInfo("n0", Resource(dict(alloc)))
        self.alloc = {k: v for k, v in alloc.items() if v}
        self.quotas: dict[str, dict[str, int]] = {}
        self.tasks: dict[str, tuple[TaskStatus, dict[str, int]]] = {}

    # --- the reference ---------------------------------------------------------------------------
    def used(self) -> dict[str, int]:
        return total([r for s, r in self.tasks.values() if s is not S.PIPELINED])

    def quota_total(self) -> dict[str, int]:
        return total(list(self.quotas.values()))

    def expected(self) -> tuple[object, ...]:
        used = self.used()
        return (
            used,
            add(self.alloc, used, -1),
            total([r for s, r in self.tasks.values() if s is S.RELEASING]),
            total([r for s, r in self.tasks.values() if s is S.PIPELINED]),
            add(self.alloc, self.quota_total(), -1),
            {k: plain(Resource(v)) for k, v in self.quotas.items()},
            {u: (s, plain(Resource(r))) for u, (s, r) in self.tasks.items()},
        )

    def actual(self) -> tuple[object, ...]:
        n = self.node
        return (
            plain(n.used),
            plain(n.idle),
            plain(n.releasing),
            plain(n.pipelined),
            plain(n.quota_idle),
            {k: plain(v) for k, v in n.quota_allocated.items()},
            {u: (rec.status, plain(rec.request)) for u, rec in n.tasks.items()},
        )

    def inv1(self) -> bool:
        n = self.node
        return within(plain(Resource.total(n.quota_allocated.values())), plain(n.allocatable))

    def pod_inv(self) -> bool:
        return within(plain(self.node.used), plain(self.node.allocatable))

    def run(self, op: Callable[[], object], *, ok: bool, forced_quota: bool = False, forced_pod: bool = False) -> None:
        """Run ``op``; it must raise LedgerError iff ``ok`` is False, and then change nothing."""
        before = self.actual()
        inv1_before, pod_before = self.inv1(), self.pod_inv()
        try:
            op()
        except LedgerError:
            assert not ok, "the ledger refused an operation the reference accepts"
            assert self.actual() == before, "a refused operation changed the ledgers"
            return
        assert ok, "the ledger accepted an operation it must refuse"
        if inv1_before and not forced_quota:
            assert self.inv1(), "an unforced operation broke invariant 1 (Σ quota requests ≤ allocatable)"
        if pod_before and not forced_pod:
            assert self.pod_inv(), "an unforced operation overcommitted the pod ledger"

    # --- quota ledger ------------------------------------------------------------------------------
    @rule(name=quota_names, request=amounts, force=st.booleans())
    def add_quota(self, name: str, request: dict[str, int], force: bool) -> None:
        ok = name not in self.quotas and (force or fits(request, self.alloc, self.quota_total()))
        self.run(lambda: self.node.add_quota(name, Resource(dict(request)), force=force), ok=ok, forced_quota=force)
        if ok:
            self.quotas[name] = dict(request)

    @rule(name=quota_names)
    def remove_quota(self, name: str) -> None:
        ok = name in self.quotas
        got: list[Resource] = []
        self.run(lambda: got.append(self.node.remove_quota(name)), ok=ok)
        if ok:
            assert plain(got[0]) == plain(Resource(self.quotas[name])), "remove_quota returns the request"
            del self.quotas[name]

    @rule(name=quota_names, request=amounts, force=st.booleans())
    def update_quota(self, name: str, request: dict[str, int], force: bool) -> None:
        others = total([r for q, r in self.quotas.items() if q != name])
        ok = name in self.quotas and (force or fits(request, self.alloc, others))
        self.run(lambda: self.node.update_quota(name, Resource(dict(request)), force=force), ok=ok, forced_quota=force)
        if ok:
            self.quotas[name] = dict(request)

    # --- pod ledger --------------------------------------------------------------------------------
    @rule(uid=task_uids, status=st.sampled_from(list(S)), request=amounts, force=st.booleans())
    def add_task(self, uid: str, status: TaskStatus, request: dict[str, int], force: bool) -> None:
        if uid in self.tasks:
            ok = False
        elif status is S.PIPELINED:
            ok = True
        elif status in ON_NODE:
            ok = force or fits(request, self.alloc, self.used())
        else:
            ok = False  # Pending, AllocatedToQuota, Succeeded, Failed are not on a node
        task = make_task(uid, status, request)
        self.run(lambda: self.node.add_task(task, force=force), ok=ok, forced_pod=force)
        if ok:
            self.tasks[uid] = (status, dict(request))

    @rule(uid=task_uids)
    def remove_task(self, uid: str) -> None:
        ok = uid in self.tasks
        self.run(lambda: self.node.remove_task(uid), ok=ok)
        if ok:
            del self.tasks[uid]

    @rule(uid=task_uids, status=placed_statuses, request=st.none() | amounts)
    def update_task(self, uid: str, status: TaskStatus, request: dict[str, int] | None) -> None:
        """A status change (Running → Releasing, Pipelined → Allocated, …), forced as the cache does."""
        ok = uid in self.tasks
        new_request = request if request is not None else (self.tasks[uid][1] if ok else {})
        task = make_task(uid, status, new_request)
        self.run(lambda: self.node.update_task(task), ok=ok, forced_pod=True)
        if ok:
            self.tasks[uid] = (status, dict(new_request))
            assert self.node.task_status(uid) is status

    @rule(alloc=allocatables)
    def set_allocatable(self, alloc: dict[str, int]) -> None:
        self.run(lambda: self.node.set_allocatable(Resource(dict(alloc))), ok=True, forced_quota=True, forced_pod=True)
        self.alloc = {k: v for k, v in alloc.items() if v}

    @rule(request=amounts)
    def clone_is_independent(self, request: dict[str, int]) -> None:
        before = self.actual()
        state = self.node.ledger_state()
        c = self.node.clone()
        assert c.ledger_state() == state
        grandchild = c.clone()  # mutating c below must not change its own clone either
        c.add_quota("__clone_only__", Resource(dict(request)), force=True)
        c.add_task(make_task("__clone_only__", S.RUNNING, request), force=True)
        c.add_task(make_task("__clone_only_p__", S.PIPELINED, request))
        for name in list(c.quota_allocated):
            c.remove_quota(name)
        c.check()
        assert self.actual() == before, "mutating a clone changed the original"
        assert self.node.ledger_state() == state
        assert grandchild.ledger_state() == state, "mutating a node changed a clone of it"
        grandchild.check()

    # --- invariants --------------------------------------------------------------------------------
    @invariant()
    def recomputes_exactly(self) -> None:
        self.node.check()

    @invariant()
    def equals_the_reference(self) -> None:
        assert self.actual() == self.expected()

    @invariant()
    def future_idle_is_idle_plus_releasing_minus_pipelined(self) -> None:
        n = self.node
        exp = add(add(plain(n.idle), plain(n.releasing)), plain(n.pipelined), -1)
        assert plain(n.future_idle) == exp


TestLedgers = LedgerMachine.TestCase
TestLedgers.settings = PROPERTY


# --- the seed's worked example and specific cases ------------------------------------------------------


def seed_node() -> NodeInfo:
    return NodeInfo("N0", Resource.from_list({GPU: "8", HCA: "8"}))


def test_seed_example_two_ledgers_move_independently() -> None:
    """Seed 2.8: binding q-train-0 moves quota_idle only; binding worker-0 moves idle only."""
    n = seed_node()
    one = Resource.from_list({GPU: "1", HCA: "1"})
    n.add_quota("q-train-0", one)
    assert n.quota_idle == Resource.from_list({GPU: "7", HCA: "7"})
    assert n.idle == Resource.from_list({GPU: "8", HCA: "8"})
    assert n.quota_allocated == {"q-train-0": one}
    n.add_task(TaskInfo("w0", "default", "worker-0", "default/train", one, status=S.BINDING, quota="q-train-0"))
    assert n.used == one
    assert n.idle == Resource.from_list({GPU: "7", HCA: "7"})
    assert n.quota_idle == Resource.from_list({GPU: "7", HCA: "7"})
    n.check()


def test_quota_refusals_name_the_node_the_quota_and_the_shortfall() -> None:
    n = seed_node()
    n.add_quota("big", Resource.from_list({GPU: "7"}))
    with pytest.raises(LedgerError, match=r"node N0: quota big is already bound here"):
        n.add_quota("big", Resource.from_list({GPU: "1"}))
    with pytest.raises(LedgerError, match=r"node N0: quota q2 does not fit quota_idle: nvidia\.com/gpu 2 > 1"):
        n.add_quota("q2", Resource.from_list({GPU: "2"}))
    with pytest.raises(LedgerError, match=r"example\.com/fpga 1 > none"):
        n.add_quota("q3", Resource.from_list({"example.com/fpga": "1"}))
    with pytest.raises(LedgerError, match="quota nope is not bound here"):
        n.remove_quota("nope")
    n.check()


def test_forced_quota_mirrors_a_drifted_binding_past_quota_idle() -> None:
    n = seed_node()
    n.add_quota("a", Resource.from_list({GPU: "8"}))
    n.add_quota("b", Resource.from_list({GPU: "4"}), force=True)
    assert n.quota_idle.get(GPU) == -4000
    n.check()
    with pytest.raises(LedgerError):
        n.add_quota("c", Resource.from_list({GPU: "0.01"}))


def test_failed_update_quota_keeps_the_old_request() -> None:
    n = seed_node()
    n.add_quota("a", Resource.from_list({GPU: "2"}))
    n.add_quota("b", Resource.from_list({GPU: "4"}))
    with pytest.raises(LedgerError):
        n.update_quota("a", Resource.from_list({GPU: "5"}))
    assert n.quota_allocated["a"] == Resource.from_list({GPU: "2"})
    assert n.quota_idle == Resource.from_list({GPU: "2", HCA: "8"})
    n.update_quota("a", Resource.from_list({GPU: "4"}))
    assert n.quota_idle == Resource.from_list({GPU: "0", HCA: "8"})
    n.check()


def test_releasing_and_pipelined_feed_future_idle() -> None:
    n = seed_node()
    four = Resource.from_list({GPU: "4"})
    n.add_task(make_task("r", S.RUNNING, four.q))
    n.update_task(make_task("r", S.RELEASING, four.q))
    n.add_task(make_task("p", S.PIPELINED, Resource.from_list({GPU: "3"}).q))
    assert n.used.get(GPU) == 4000  # a releasing pod still uses its GPUs
    assert n.releasing.get(GPU) == 4000
    assert n.pipelined.get(GPU) == 3000
    assert n.future_idle.get(GPU) == 8000 - 4000 + 4000 - 3000
    n.remove_task("r")
    n.remove_task("p")
    assert n.ledger_state() == seed_node().ledger_state()


def test_tasks_not_on_a_node_are_refused() -> None:
    n = seed_node()
    for status in (S.PENDING, S.ALLOCATED_TO_QUOTA, S.SUCCEEDED, S.FAILED):
        with pytest.raises(LedgerError, match="is not on a node"):
            n.add_task(make_task("x", status, {GPU: 1000}))
    assert not n.tasks


def test_set_allocatable_rebases_both_ledgers() -> None:
    n = seed_node()
    n.add_quota("q", Resource.from_list({GPU: "2"}))
    n.add_task(make_task("t", S.RUNNING, {GPU: 3000}))
    n.set_allocatable(Resource.from_list({GPU: "4", HCA: "8"}))
    assert n.idle.get(GPU) == 1000
    assert n.quota_idle.get(GPU) == 2000
    n.check()


def test_failed_update_task_leaves_the_task_accounted() -> None:
    """Pipelined → Allocated without force when the releasing pod has not gone yet must refuse and keep the task."""
    n = NodeInfo("n", Resource.of(cpu=1000))
    n.add_task(make_task("running", S.RUNNING, {"cpu": 500}))
    n.add_task(make_task("waiting", S.PIPELINED, {"cpu": 800}))
    before = n.ledger_state()
    with pytest.raises(LedgerError):
        n.update_task(make_task("waiting", S.ALLOCATED, {"cpu": 800}), force=False)
    assert n.ledger_state() == before


def test_the_ci_profile_runs_at_least_500_examples_per_property() -> None:
    from hypothesis import settings

    from tests.core.props import MIN_EXAMPLES, PROFILE, PROPERTY

    assert settings.get_profile("sky-core").max_examples >= MIN_EXAMPLES
    assert settings.get_profile("sky-core").deadline is None
    if PROFILE == "sky-core":
        assert PROPERTY.max_examples >= MIN_EXAMPLES
        assert TestLedgers.settings.max_examples >= MIN_EXAMPLES


def test_a_nodes_own_edits_do_not_reach_a_clone_of_it() -> None:
    """A node (not itself a clone) shares its pod ledger with a clone: its next edit copies it."""
    node = NodeInfo(name="n0", allocatable=Resource({"g": 8}))
    copy = node.clone()
    node.add_task(make_task("t1", S.RUNNING, {"g": 3}))
    node.add_quota("q1", Resource({"g": 2}))
    assert copy.ledger_state() == NodeInfo(name="n0", allocatable=Resource({"g": 8})).ledger_state()
    node.remove_task("t1")
    copy.add_task(make_task("t2", S.PIPELINED, {"g": 1}))
    assert not node.has_task("t2") and copy.has_task("t2") and not copy.has_task("t1")
    node.check()
    copy.check()
