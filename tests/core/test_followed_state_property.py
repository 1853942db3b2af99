"""State the plugins keep across a session's operations equals the same state counted afresh
(hypothesis, the ``sky-core`` profile).

Five structures follow the statement instead of recounting on every read, and each is checked
against a fresh count after every operation of random statements (commit or discard):

* ``drf`` — a job's placed share is dropped by the events that change it and counted again when
  read; a queue's claimed share is kept by the claim events;
* the topology memo (``FitMemo``) — a bind or release logs the node (and, under the continuity
  score, which reads the neighbours' room, the nodes beside it), and each quota shape's view
  (capacities, zone totals, offers, ranked candidates with their scores) catches up when next
  read; the default policy and one with continuity on are drawn;
* ``ZoneRanking`` — a zone's candidates kept best first while single nodes are re-ranked;
* ``specpool`` — what each queue's tasks claim, for its capability check, kept by claim events;
* ``jobqueue`` — the admitted jobs each JobQueue runs, kept by claim and placement events.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from types import MethodType
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from extender.conf import default_policy
from extender.framework.session import Session
from extender.model.job import QueueInfo
from extender.plugins.drf import _Shares
from extender.plugins.jobqueue import _JobQueues
from extender.plugins.specpool import _QueueClaims
from extender.plugins.topology.fitmemo import FitMemo
from extender.plugins.topology.nodechoice import Candidate, rank_key
from extender.plugins.topology.ranking import ZoneRanking
from tests.core.props import PROPERTY
from tests.core.scenarios import policy_with_topology
from tests.core.test_statement_property import EXPECTED_ERRORS, NOW, build, clusters, resolve, statements

POLICY = default_policy()
# continuity scores read the neighbours' capacity: a bind changes the scores of nodes beside it
CONTINUITY_POLICY = policy_with_topology({"continuity_weight": 200.0})


def _plugin(ssn: Session, name: str, stage: str) -> Any:
    """The object behind a plugin's stage function in this session (its per-session state)."""
    fn = ssn._plugin_fns(name)[stage]
    assert isinstance(fn, MethodType), f"{name}'s {stage} is not a method of its per-session state"
    return fn.__self__


def _shares(shares: _Shares, ssn: Session) -> dict[str, Any]:
    jobs = sorted(ssn.jobs(), key=lambda j: j.key)
    queues = sorted({j.queue for j in jobs})
    return {
        "jobs": {j.key: shares.job_order(j) for j in jobs},
        "queues": {q: shares.queue_order(ssn.snap.queues.get(q) or QueueInfo(q)) for q in queues},
    }


def _memo_view(memo: FitMemo, ssn: Session, quotas: list[Any]) -> dict[str, Any]:
    """What the planner reads of the memo, for every shape of ``quotas`` and every zone."""
    out: dict[str, Any] = {}
    for q in quotas:
        sid = memo.shape_of(q)
        rep = q if sid is None else memo.shapes[sid].rep
        for zid in memo.zone_nodes:
            cands = memo.candidates(rep, sid, zid)
            offer = memo.offer(rep, sid, zid)
            out[f"{q.name}/{zid}"] = (
                [(c.name, c.capacity, c.score) for c in cands],
                (offer.capacity, offer.untouched, offer.size),
                {n: memo.node_capacity(rep, sid, node) for n in memo.zone_nodes[zid] if (node := ssn.node(n))},
            )
    return out


def _queue_claims(claims: _QueueClaims) -> dict[str, dict[str, int]]:
    return {q: {k: v for k, v in r.q.items() if v} for q, r in claims.claimed.items() if any(r.q.values())}


def _affinity(counts: Mapping[str, Counter[Any]]) -> dict[str, dict[Any, int]]:
    return {key: {z: n for z, n in c.items() if n} for key, c in counts.items() if any(c.values())}


def _fresh_affinity(ssn: Session, zone_of: Mapping[str, Any]) -> dict[str, dict[Any, int]]:
    """Quotas per zone of the jobs of each affinity key, counted now."""
    out: defaultdict[str, Counter[Any]] = defaultdict(Counter)
    for job in ssn.jobs():
        for q in ssn.job_quotas(job) if job.affinity_key else ():
            if q.node_name in zone_of:
                out[job.affinity_key][zone_of[q.node_name]] += 1
    return _affinity(out)


def _running(jqs: _JobQueues) -> dict[str, set[str]]:
    return {q: s for q, s in jqs.running.items() if s}


@PROPERTY
@given(clusters(affinity=True, jobqueue=True), statements, st.booleans())
def test_followed_state_equals_a_fresh_count_after_every_operation(
    objs: list[dict[str, Any]], plan: list[tuple[list[tuple[str, int, int]], str]], continuity: bool
) -> None:
    cache = build(objs)
    ssn = Session(cache.snapshot(NOW), CONTINUITY_POLICY if continuity else POLICY)
    shares = _plugin(ssn, "drf", "job.order")
    topology = _plugin(ssn, "topology", "job.zone_candidates")
    claims = _plugin(ssn, "specpool", "tq.predicate")
    jqs = _plugin(ssn, "jobqueue", "job.enqueueable")
    quotas = sorted(ssn.quotas(), key=lambda q: q.name)
    _shares(shares, ssn)  # counted now: from here on the events keep them
    claims._ensure()
    jqs._ensure()
    _memo_view(topology.memo, ssn, quotas)  # every shape met and read: from here on it catches up

    def check(when: str) -> None:
        assert _shares(shares, ssn) == _shares(_Shares(ssn), ssn), f"drf shares drifted {when}"
        fresh_claims = _QueueClaims(ssn)
        fresh_claims._ensure()
        assert _queue_claims(claims) == _queue_claims(fresh_claims), f"specpool queue claims drifted {when}"
        fresh_jqs = _JobQueues(ssn)
        fresh_jqs._ensure()
        assert _running(jqs) == _running(fresh_jqs), f"jobqueue running jobs drifted {when}"
        fresh = FitMemo(ssn, neighbour_scores=continuity)
        assert _memo_view(topology.memo, ssn, quotas) == _memo_view(fresh, ssn, quotas), f"memo drifted {when}"
        if topology._affinity is not None:
            want = _fresh_affinity(ssn, topology.memo.zone_of)
            assert _affinity(topology._affinity) == want, f"topology affinity counts drifted {when}"

    for ops, end in plan:
        stmt = ssn.statement()
        for kind, a, c in ops:
            op = resolve(ssn, stmt, kind, a, c)
            try:
                op.call()
            except EXPECTED_ERRORS:
                continue
            check(f"after {kind}")
        if end == "discard":
            stmt.discard()
        else:
            stmt.commit()
        check(f"after {end}")


# --- ZoneRanking ---------------------------------------------------------------------------------


def _cand(name: str, score: int, capacity: int) -> Candidate:
    return Candidate(name, int(name[1:]), capacity, score / 4)


NAMES = [f"n{i}" for i in range(8)]
rooms = st.dictionaries(st.sampled_from(NAMES), st.tuples(st.integers(-3, 3), st.integers(0, 3)))


@PROPERTY
@given(rooms, st.lists(st.tuples(st.lists(st.sampled_from(NAMES), max_size=4), rooms), max_size=6))
def test_zone_ranking_equals_sorting_the_zone_again(
    start: dict[str, tuple[int, int]], changes: list[tuple[list[str], dict[str, tuple[int, int]]]]
) -> None:
    """Nodes change (score, room; room 0 leaves the ranking), are marked stale, and the ranking
    read afterwards is the zone sorted by ``rank_key`` from scratch."""
    now = {n: _cand(n, s, c) for n, (s, c) in start.items() if c > 0}
    ranking = ZoneRanking(now.values())
    for stale, updates in changes:
        touched = set(stale) | set(updates)
        for n in touched:
            ranking.mark_stale(n)
            s, c = updates.get(n, (now[n].score * 4, now[n].capacity) if n in now else (0, 0))
            if c > 0:
                now[n] = _cand(n, int(s), c)
            else:
                now.pop(n, None)
        assert ranking.ranked(now.get) == sorted(now.values(), key=rank_key)
