"""``quotaaffinity``'s ``qn.predicate`` answers on the session's bindings as they are now, whether
or not ``qn.pre_predicate`` ran since they changed.

The topology planner judges a quota without a shape (every quota with ``quotaAffinity``) node by
node through ``select`` and ``predicate`` only (``FitMemo.judge``: the holds it picks, the nodes it
plans), and trusts the answer to follow the session: "nothing else a session does can change a
predicate's answer". Before, the plugin kept the nodes of a quota's affinity partners from the
first time it was judged until a ``pre_predicate`` call recomputed them: after a partner was bound,
released, or its bind discarded in the same session, the planner still read where the partners
had been — a node the partner had just left could pass, and one it had just taken was refused.

The property: any sequence of binds and releases of partner quotas (committed or discarded) in one
session; after each step, the follower's verdict on every node equals the rule read off the
session's quotas as they are: with a partner bound somewhere, only its nodes; with none, any node.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from extender.cache.cache import ClusterCache
from extender.conf import default_policy
from extender.framework.session import Session
from extender.framework.status import Reason
from tests import builders as b
from tests.core.props import PROPERTY

NOW = 1_800_000_000.0
NODES = [f"n{i}" for i in range(4)]
PARTNERS = [f"p{i}" for i in range(3)]
TEAM = {"team": "x"}

Step = tuple[str, int, int]  # (bind | release | commit | discard, partner, node)


def _session(bound: dict[int, int]) -> Session:
    """n0–n3 (one leaf), partners p0–p2 labelled team=x (``bound``: partner → node index), and
    the follower ``f`` whose quotaAffinity selects team=x."""
    objs = [*b.seed_cluster(leaves=1, per_leaf=4), b.queue("research")]
    for i, name in enumerate(PARTNERS):
        status = {"phase": "QuotaBound", "nodeName": NODES[bound[i]]} if i in bound else None
        objs.append(b.quota(name, gpu=1, hca=None, labels=TEAM, status=status))
    aff = {"quotaAffinity": [{"labelSelector": {"matchLabels": TEAM}}]}
    objs.append(b.quota("f", gpu=1, hca=None, affinity=aff))
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, objs)
    assert not cache.conversion_errors
    return Session(cache.snapshot(NOW), default_policy())


def _check(ssn: Session) -> None:
    follower = ssn.quota("f")
    assert follower is not None
    partners = {q.node_name for q in ssn.quotas() if q.name in PARTNERS and q.node_name}
    for name in NODES:
        node = ssn.node(name)
        assert node is not None
        status = ssn.qn.predicate(follower, node)
        want = not partners or name in partners
        assert status.ok is want, f"{name} with partners on {sorted(partners)}: {status}"
        if not want:
            assert status.reason is Reason.QUOTA_AFFINITY_NOT_MATCH


@PROPERTY
@given(
    st.dictionaries(st.integers(0, 2), st.integers(0, 3), max_size=2),
    st.lists(
        st.tuples(st.sampled_from(["bind", "release", "commit", "discard"]), st.integers(0, 2), st.integers(0, 3)),
        min_size=1,
        max_size=8,
    ),
)
def test_the_affinity_verdict_follows_binds_releases_and_discards(bound: dict[int, int], steps: list[Step]) -> None:
    ssn = _session(bound)
    _check(ssn)  # judged once before anything changes: what a stale memo would keep
    stmt = ssn.statement()
    for op, i, n in steps:
        quota = ssn.quota(PARTNERS[i])
        assert quota is not None
        if op == "bind" and not quota.node_name:
            stmt.allocate_quota_to_node(quota.name, NODES[n])
        elif op == "release" and quota.node_name:
            stmt.release_quota(quota.name, "test")
        elif op in ("commit", "discard"):
            stmt.commit() if op == "commit" else stmt.discard()
            stmt = ssn.statement()
        _check(ssn)


def test_a_partner_bound_in_the_session_opens_its_node() -> None:
    """The example: p0 on n0; the follower is judged (n1 refused); p1 is bound to n1 in the same
    session — n1 now takes the follower, without a pre_predicate call in between."""
    ssn = _session({0: 0})
    follower, n1 = ssn.quota("f"), ssn.node("n1")
    assert follower is not None and n1 is not None
    assert not ssn.qn.predicate(follower, n1).ok
    ssn.statement().allocate_quota_to_node("p1", "n1")
    assert ssn.qn.predicate(follower, n1).ok
