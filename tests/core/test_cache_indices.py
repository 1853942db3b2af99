"""The cache's quota indices that sessions read instead of scanning every quota.

``static_quotas`` and ``anti_affinity_quotas`` must name exactly the quotas whose spec has the
trait, through any sequence of adds, updates and deletes; a session reading them must answer as
a session that scans (a snapshot without the index). A claim's placement key must be its
claimant's current one, also after the pod changed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from extender.cache.cache import ClusterCache
from extender.conf import default_policy
from extender.framework.session import Session
from tests import builders as b

NAMES = ["q-a", "q-b", "q-c", "q-d"]


def _quota(name: str, static: bool, anti: bool, version: int) -> dict[str, Any]:
    obj = b.quota(
        name,
        static_bind_node="n0" if static else None,
        affinity={"quotaAntiAffinity": [{"quotaNames": ["q-a"]}]} if anti else None,
    )
    obj["metadata"]["resourceVersion"] = str(version)
    return obj


ops = st.lists(
    st.tuples(st.sampled_from(["put", "delete"]), st.sampled_from(NAMES), st.booleans(), st.booleans()),
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(ops)
def test_trait_indices_follow_adds_updates_and_deletes(steps: list[tuple[str, str, bool, bool]]) -> None:
    cache = ClusterCache(clock=lambda: 1_000_000.0)
    b.feed(cache, [b.node("n0"), b.node("n1")])
    version = 1
    for op, name, static, anti in steps:
        version += 1
        if op == "put":
            cache.on_quota_add(_quota(name, static, anti, version))
        elif name in cache.quotas:
            cache.on_quota_delete(_quota(name, False, False, version))
    quotas = cache.quotas.values()
    assert cache.static_quotas == {q.name for q in quotas if q.static_bind_node}
    assert cache.anti_affinity_quotas == {q.name for q in quotas if q.quota_anti_affinity}

    indexed = Session(cache.snapshot(), default_policy())
    scanning = Session(
        dataclasses.replace(cache.snapshot(), static_quotas=None, anti_affinity_quotas=None), default_policy()
    )
    assert [q.name for q in indexed.static_quotas()] == [q.name for q in scanning.static_quotas()]
    assert indexed.anti_affinity_holders() == scanning.anti_affinity_holders()
    assert indexed.anti_affinity_holders() == sorted(cache.anti_affinity_quotas)


def test_a_claim_carries_its_pods_current_placement_key() -> None:
    cache = ClusterCache(clock=lambda: 1_000_000.0)
    pod = b.pod("w-0", group="train", quota="q-a")
    b.feed(cache, [b.node("n0"), b.quota("q-a"), pod])
    (uid,) = cache.quotas["q-a"].claims
    task = next(t for j in cache.jobs.values() for t in j.tasks.values() if t.uid == uid)
    assert cache.quotas["q-a"].claims[uid].placement_key == task.placement_key()

    changed = dict(pod, spec={**pod["spec"], "tolerations": [{"key": "maint", "operator": "Exists"}]})
    changed["metadata"] = {**pod["metadata"], "resourceVersion": "2"}
    cache.on_pod_update(pod, changed)
    task = next(t for j in cache.jobs.values() for t in j.tasks.values() if t.uid == uid)
    claim_key = cache.quotas["q-a"].claims[uid].placement_key
    assert claim_key == task.placement_key()
    assert claim_key is not None and claim_key[0]  # the toleration is in it

    ssn = Session(cache.snapshot(), default_policy())
    assert ssn.claimant_keys(ssn.quota("q-a")) == (task.placement_key(),)  # type: ignore[arg-type]
