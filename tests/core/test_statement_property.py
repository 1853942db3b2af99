"""Statement transactions over a real session (DESIGN §5, invariant 4), as hypothesis properties.

Random small clusters are built as API objects (``tests/builders.py``) and fed through the real
conversion into a ``ClusterCache``; a session over its snapshot then runs random statements of
random operations (claim, unclaim, bind quota, release quota, allocate, evict — operations that
raise are fine). Checked:

* an operation that raises changes nothing;
* ``discard()`` leaves the session exactly as before the statement: every node's
  ``ledger_state()``, every quota's ``state()``, every task's status/quota/node — and what the
  event-following plugins answer (DRF order, JobQueue admission);
* ``commit()`` returns one write intent per successful operation, in order, and performs no
  write itself (it only returns values); the state it leaves is the state the operations made;
* the cache's own objects are never mutated by a session (copy-on-write), whatever it commits;
* invariant 3 — Σ claims ≤ request + shadow per declared name — holds after any sequence of
  successful claim operations on quotas that satisfied it to begin with;
* every node ledger still recomputes exactly (``NodeInfo.check()``), every quota's ``allocated``
  equals the sum of its claims.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from extender import wellknown
from extender.cache.cache import ClusterCache
from extender.conf import default_policy
from extender.framework.intents import BindQuota, BindTask, ClaimQuota, EvictTask, Intent, ReleaseClaim, ReleaseQuota
from extender.framework.session import Session
from extender.framework.statement import Event, EventKind, Statement, StatementError
from extender.model.node import LedgerError
from extender.model.quota import ClaimError
from extender.model.resources import Resource
from extender.model.task import IllegalTransition, TaskStatus
from tests import builders as b
from tests.core.props import PROPERTY, cache_state, plugin_state, session_state
from tests.core.scenarios import quota_node

NOW = 1_800_000_000.0
POLICY = default_policy()
QUEUE_ANNO = {wellknown.ANNO_QUEUE_NAME: "research"}
EXPECTED_ERRORS = (StatementError, LedgerError, ClaimError, IllegalTransition)

# --- random clusters ----------------------------------------------------------------------------------


@st.composite
def clusters(draw: st.DrawFn, *, jobqueue: bool = False, affinity: bool = False) -> list[dict[str, Any]]:
    """1–3 nodes, 1–4 quotas, 1–3 jobs in every state; with ``jobqueue`` a JobQueue admitting one
    or two jobs, with ``affinity`` jobs that may name a ``topology-affinity-key``."""
    n_nodes = draw(st.integers(1, 3))
    nodes = [f"n{i}" for i in range(n_nodes)]
    objs: list[dict[str, Any]] = [b.queue("research")]
    for name in nodes:
        objs.append(b.node(name, gpu=draw(st.sampled_from([1, 2, 4, 8])), hca=draw(st.sampled_from([0, 2, 8]))))
    n_quotas = draw(st.integers(1, 4))
    quotas = [f"q{i}" for i in range(n_quotas)]
    for name in quotas:
        status = None
        if draw(st.booleans()):
            status = {"phase": "QuotaBound", "nodeName": draw(st.sampled_from(nodes))}
        shadow = draw(st.sampled_from([None, {wellknown.RESOURCE_GPU: "1"}]))
        quota = b.quota(
            name,
            gpu=draw(st.sampled_from([1, 2, 4])),
            hca=draw(st.sampled_from([None, 1])),
            status=status,
        )
        if shadow is not None:
            quota["spec"]["shadowResource"] = shadow  # the oversell grant (status reports it)
        objs.append(quota)
    if jobqueue:  # a JobQueue that admits one job at a time makes `enqueueable` state-dependent
        objs.append(b.jobqueue("one-at-a-time", selector={}, max_running=draw(st.integers(1, 2))))
    for j in range(draw(st.integers(1, 3))):
        grouped = draw(st.booleans())
        job = f"job{j}"
        size = draw(st.integers(1, 3)) if grouped else 1
        key = draw(st.sampled_from(["", "k1", "k2"])) if affinity else ""
        annotations = {**QUEUE_ANNO, wellknown.ANNO_TOPOLOGY_AFFINITY_KEY: key} if key else QUEUE_ANNO
        if grouped:
            objs.append(b.podgroup(job, min_member=draw(st.integers(1, size))))
        for i in range(size):
            kind = draw(st.sampled_from(["pending", "claiming", "running", "releasing"]))
            claim = draw(st.sampled_from([None, *quotas])) if kind != "pending" else None
            node = draw(st.sampled_from(nodes)) if kind in ("running", "releasing") else None
            pod = b.pod(
                f"{job}-w{i}" if grouped else job,
                group=job if grouped else None,
                quota=claim,
                gpu=draw(st.sampled_from([0, 1, 2])),
                hca=draw(st.sampled_from([None, 1])),
                cpu="1",
                memory="1Gi",
                node=node,
                phase="Running" if node else "Pending",
                index=i,
                annotations=annotations,
                priority=draw(st.sampled_from([0, 10])),
            )
            if kind == "releasing":
                pod["metadata"]["deletionTimestamp"] = b.TS
            objs.append(pod)
    return objs


OPS = st.sampled_from(["claim", "unclaim", "bind_quota", "force_bind_quota", "release_quota", "allocate", "evict"])
op_lists = st.lists(st.tuples(OPS, st.integers(0, 50), st.integers(0, 50)), max_size=12)
statements = st.lists(st.tuples(op_lists, st.sampled_from(["commit", "discard"])), min_size=1, max_size=3)


def build(objs: list[dict[str, Any]]) -> ClusterCache:
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, objs)
    cache.check()
    return cache


# --- running operations -------------------------------------------------------------------------------


@dataclass
class Op:
    call: Callable[[], None]
    intent: Callable[[], Intent]  # evaluated after a successful call


def resolve(ssn: Session, stmt: Statement, kind: str, a: int, c: int) -> Op:
    # by name, not uid: the builders' uids differ between runs of the same example
    tasks = [t.uid for t in sorted((t for j in ssn.jobs() for t in j.tasks.values()), key=lambda t: t.key)]
    quotas = sorted(q.name for q in ssn.quotas())
    nodes = [n.name for n in ssn.nodes()] + ["ghost"]  # "ghost" does not exist
    uid = tasks[a % len(tasks)]
    quota = quotas[a % len(quotas)]
    node = nodes[c % len(nodes)]
    target_quota = quotas[c % len(quotas)]

    def task_id() -> tuple[str, str, str]:
        t = ssn.task(uid)
        assert t is not None
        return t.uid, t.namespace, t.name

    if kind == "claim":
        return Op(lambda: stmt.allocate_task_to_quota(uid, target_quota), lambda: ClaimQuota(*task_id(), target_quota))
    if kind == "unclaim":
        held = ssn.task(uid).quota  # type: ignore[union-attr]
        return Op(lambda: stmt.unclaim(uid, "lost a race"), lambda: ReleaseClaim(*task_id(), held, "lost a race"))
    if kind in ("bind_quota", "force_bind_quota"):
        force = kind == "force_bind_quota"
        return Op(lambda: stmt.allocate_quota_to_node(quota, node, force=force), lambda: BindQuota(quota, node))
    if kind == "release_quota":
        held_node = quota_node(ssn, quota)
        return Op(lambda: stmt.release_quota(quota, "idle"), lambda: ReleaseQuota(quota, held_node, "idle"))
    if kind == "allocate":
        # the BindTask names the quota the task holds when the statement commits
        return Op(lambda: stmt.allocate(uid, node), lambda: BindTask(*task_id(), node, "\0commit-time"))
    assert kind == "evict"
    on = ssn.task(uid).node  # type: ignore[union-attr]
    return Op(lambda: stmt.evict(uid, "preempted"), lambda: EvictTask(*task_id(), on, "preempted"))


def at_commit(ssn: Session, intent: Intent) -> Intent:
    """A BindTask names the quota its task holds when the statement commits."""
    if not isinstance(intent, BindTask):
        return intent
    t = ssn.task(intent.task)
    assert t is not None
    return BindTask(intent.task, intent.namespace, intent.name, intent.node, t.quota)


def check_consistent(ssn: Session, within_capacity: set[str]) -> None:
    for n in ssn.nodes():
        n.check()
    for q in ssn.quotas():
        assert q.allocated == Resource.total(c.request for c in q.claims.values())
        if q.name in within_capacity:
            assert not q.over_claimed(), f"invariant 3 broken on {q.name}: {q.over_claimed()}"
        for uid in q.claims:
            t = ssn.task(uid)
            assert t is not None and t.quota == q.name


def run_statements(cache: ClusterCache, plan: list[tuple[list[tuple[str, int, int]], str]]) -> Session:
    cache_before = cache_state(cache)
    ssn = Session(cache.snapshot(NOW), POLICY)
    within_capacity = {q.name for q in ssn.quotas() if not q.over_claimed()}
    committed: list[Intent] = []
    for ops, end in plan:
        stmt = ssn.statement()
        start, start_plugins = session_state(ssn), plugin_state(ssn)
        expected: list[Intent] = []
        for kind, a, c in ops:
            op = resolve(ssn, stmt, kind, a, c)
            before = session_state(ssn)
            try:
                op.call()
            except EXPECTED_ERRORS:
                assert session_state(ssn) == before, f"a refused {kind} changed the session"
                continue
            expected.append(op.intent())
            check_consistent(ssn, within_capacity)
        after_ops = session_state(ssn)
        if end == "discard":
            stmt.discard()
            assert session_state(ssn) == start, "discard() did not restore the session exactly"
            assert plugin_state(ssn) == start_plugins, "discard() did not restore the plugins' view"
        else:
            out = stmt.commit()
            resolved = [at_commit(ssn, i) for i in expected]
            assert out == resolved, "commit() intents do not match the operations"
            committed.extend(out)
            assert ssn.intents == committed
            assert session_state(ssn) == after_ops, "commit() changed the session"
        with pytest.raises(StatementError):
            stmt.allocate_quota_to_node("q0", "n0")
        with pytest.raises(StatementError):
            stmt.commit()
        with pytest.raises(StatementError):
            stmt.discard()
    assert cache_state(cache) == cache_before, "a session mutated the cache's objects (copy-on-write broken)"
    cache.check()
    return ssn


@PROPERTY
@given(clusters(), statements)
def test_statements_discard_exactly_commit_intents_and_never_touch_the_cache(
    objs: list[dict[str, Any]], plan: list[tuple[list[tuple[str, int, int]], str]]
) -> None:
    run_statements(build(objs), plan)


@PROPERTY
@given(clusters(jobqueue=True), statements)
@example(  # a counterexample once found: always tried
    objs=[
        b.queue("research"),
        b.node("n0"),
        b.quota("q0", gpu=1, hca=None),
        b.jobqueue("one-at-a-time", selector={}, max_running=1),
        b.podgroup("job0", min_member=1),
        b.pod("job0-w0", group="job0", gpu=1, hca=None, index=0, annotations=QUEUE_ANNO),
        b.pod("job0-w1", group="job0", gpu=1, hca=None, index=1, annotations=QUEUE_ANNO),
    ],
    plan=[([("allocate", 0, 0), ("claim", 1, 0)], "discard")],
)
def test_statements_discard_exactly_with_a_limited_jobqueue(
    objs: list[dict[str, Any]], plan: list[tuple[list[tuple[str, int, int]], str]]
) -> None:
    """The same property with a JobQueue of ``maxRunningJobs`` 1–2: its admission count must survive discard()."""
    run_statements(build(objs), plan)


def test_discard_restores_jobqueue_admission() -> None:
    """Two tasks of one job: allocate the first (no quota), claim for the second, discard.
    Undoing the claim still sees the first task on its node; undoing the allocation sends no
    event the plugin listens to — the job stays counted and blocks every other job."""
    cache, ssn = seed_session(
        [
            b.jobqueue("one", selector={}, max_running=1),
            b.podgroup("job", min_member=1),
            b.pod("job-w0", group="job", gpu=1, hca=None, index=0),
            b.pod("job-w1", group="job", gpu=1, hca=None, index=1),
        ]
    )
    before = plugin_state(ssn)
    assert set(before["enqueueable"].values()) == {"Success"}
    stmt = ssn.statement()
    stmt.allocate(uid_of(cache, "job-w0"), "n0")
    stmt.allocate_task_to_quota(uid_of(cache, "job-w1"), "qa")
    stmt.discard()
    assert plugin_state(ssn) == before


# --- deterministic cases ------------------------------------------------------------------------------


def seed_session(extra: list[dict[str, Any]] | None = None) -> tuple[ClusterCache, Session]:
    cache = build(
        b.seed_cluster(leaves=1, per_leaf=2)
        + [b.queue("research"), b.quota("qa", gpu=1, hca=None), b.quota("qb", gpu=8, hca=None)]
        + [b.pod("solo", gpu=1, hca=None, annotations=QUEUE_ANNO)]
        + (extra or [])
    )
    return cache, Session(cache.snapshot(NOW), POLICY)


def uid_of(cache: ClusterCache, name: str) -> str:
    return next(t.uid for j in cache.jobs.values() for t in j.tasks.values() if t.name == name)


def test_full_hop_sequence_then_discard_restores_everything() -> None:
    cache, ssn = seed_session()
    uid = uid_of(cache, "solo")
    start, cache_before = session_state(ssn), cache_state(cache)
    stmt = ssn.statement()
    stmt.allocate_task_to_quota(uid, "qa")
    stmt.allocate_quota_to_node("qa", "n1")
    stmt.allocate(uid, "n1")
    t = ssn.task(uid)
    assert t is not None
    assert (t.status, t.quota, t.node) == (TaskStatus.ALLOCATED, "qa", "n1")
    n1 = ssn.node("n1")
    assert n1 is not None
    assert n1.quota_idle.get(wellknown.RESOURCE_GPU) == 7000
    assert n1.idle.get(wellknown.RESOURCE_GPU) == 7000
    assert cache.nodes["n1"].quota_idle.get(wellknown.RESOURCE_GPU) == 8000  # the cache is untouched
    stmt.discard()
    assert session_state(ssn) == start
    assert cache_state(cache) == cache_before


def test_commit_returns_intents_in_operation_order() -> None:
    cache, ssn = seed_session()
    uid = uid_of(cache, "solo")
    stmt = ssn.statement()
    stmt.allocate_task_to_quota(uid, "qa")
    stmt.allocate_quota_to_node("qa", "n0")
    stmt.allocate(uid, "n0")
    out = stmt.commit()
    assert out == [
        ClaimQuota(uid, "default", "solo", "qa"),
        BindQuota("qa", "n0"),
        BindTask(uid, "default", "solo", "n0", "qa"),
    ]
    assert ssn.intents == out


def test_a_claim_that_does_not_fit_is_refused_without_a_trace() -> None:
    cache, ssn = seed_session([b.pod("big", gpu=2, hca=None, annotations=QUEUE_ANNO)])
    uid = uid_of(cache, "big")
    before = session_state(ssn)
    stmt = ssn.statement()
    with pytest.raises(ClaimError, match=r"nvidia\.com/gpu 2 > 1"):
        stmt.allocate_task_to_quota(uid, "qa")
    assert session_state(ssn) == before
    assert stmt.commit() == []


def test_a_quota_that_does_not_fit_the_node_is_refused() -> None:
    _cache, ssn = seed_session()
    stmt = ssn.statement()
    stmt.allocate_quota_to_node("qb", "n0")
    before = session_state(ssn)
    with pytest.raises(LedgerError, match=r"nvidia\.com/gpu 1 > 0"):
        stmt.allocate_quota_to_node("qa", "n0")
    assert session_state(ssn) == before
    with pytest.raises(StatementError, match="already bound"):
        stmt.allocate_quota_to_node("qb", "n1")


def test_allocating_a_placed_task_again_is_refused() -> None:
    cache, ssn = seed_session()
    uid = uid_of(cache, "solo")
    stmt = ssn.statement()
    stmt.allocate(uid, "n0")
    before = session_state(ssn)
    with pytest.raises((StatementError, IllegalTransition)):
        stmt.allocate(uid, "n1")
    assert session_state(ssn) == before
    holders = [n.name for n in ssn.nodes() if n.has_task(uid)]
    assert holders == ["n0"]


def test_a_task_on_a_node_cannot_claim_a_quota() -> None:
    cache, ssn = seed_session()
    uid = uid_of(cache, "solo")
    stmt = ssn.statement()
    stmt.allocate(uid, "n0")
    with pytest.raises((StatementError, IllegalTransition)):
        stmt.allocate_task_to_quota(uid, "qa")
    t = ssn.task(uid)
    node = ssn.node("n0")
    assert t is not None and node is not None
    assert node.task_status(uid) is t.status


def test_a_refused_evict_changes_nothing() -> None:
    """A pod still Running on a node that was deleted from the cache: evict refuses and changes nothing."""
    cache, ssn = seed_session([b.pod("orphan", gpu=1, hca=None, node="n9", phase="Running", annotations=QUEUE_ANNO)])
    uid = uid_of(cache, "orphan")
    before = session_state(ssn)
    stmt = ssn.statement()
    with pytest.raises(StatementError):
        stmt.evict(uid, "preempted")
    assert session_state(ssn) == before
    stmt.discard()
    assert session_state(ssn) == before


def test_evict_then_discard_restores_the_running_pod() -> None:
    cache, ssn = seed_session([b.pod("victim", gpu=2, hca=None, node="n0", phase="Running", annotations=QUEUE_ANNO)])
    uid = uid_of(cache, "victim")
    start = session_state(ssn)
    stmt = ssn.statement()
    stmt.evict(uid, "preempted")
    n0 = ssn.node("n0")
    assert n0 is not None
    assert n0.releasing.get(wellknown.RESOURCE_GPU) == 2000
    assert n0.task_status(uid) is TaskStatus.RELEASING
    stmt.discard()
    assert session_state(ssn) == start


class _Recording:
    """Wraps a real plugin: the same stages, plus a record of the events its handler is given.
    ``kinds`` becomes its EVENT_KINDS (None: it declares none, so it follows every event)."""

    def __init__(self, real: Any, kinds: frozenset[EventKind] | None) -> None:
        self.real = real
        self.NAME, self.STAGES, self.args = real.NAME, real.STAGES, real.args
        if kinds is not None:
            self.EVENT_KINDS = kinds
        self.seen: list[tuple[EventKind, bool]] = []

    def open(self, ssn: Session) -> dict[str, Callable[..., Any]]:
        fns = dict(self.real.open(ssn))
        inner = fns["events"]

        def follow(ev: Event) -> None:
            self.seen.append((ev.kind, ev.undo))
            inner(ev)

        fns["events"] = follow
        return fns


def test_a_handler_is_given_the_event_kinds_its_plugin_declares_and_only_those() -> None:
    claims = frozenset({EventKind.CLAIM, EventKind.UNCLAIM})
    drf = _Recording(POLICY.plugins["drf"], claims)
    jobqueue = _Recording(POLICY.plugins["jobqueue"], None)
    policy = dataclasses.replace(POLICY, plugins={**POLICY.plugins, "drf": drf, "jobqueue": jobqueue})
    cache, _ = seed_session()
    ssn = Session(cache.snapshot(NOW), policy)
    uid = uid_of(cache, "solo")
    stmt = ssn.statement()
    stmt.allocate_task_to_quota(uid, "qa")
    stmt.allocate_quota_to_node("qa", "n1")
    stmt.allocate(uid, "n1")
    stmt.discard()
    K = EventKind
    assert drf.seen == [(K.CLAIM, False), (K.CLAIM, True)]
    assert jobqueue.seen == [
        (K.CLAIM, False),
        (K.BIND_QUOTA, False),
        (K.ALLOCATE, False),
        (K.ALLOCATE, True),
        (K.BIND_QUOTA, True),
        (K.CLAIM, True),
    ]
