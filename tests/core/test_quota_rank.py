"""``QuotaInfo.rank`` — the smallest task index among a quota's claimants — and
``QuotaInfo.claimant_keys`` — their placement keys in task-index order — kept by the claim
methods as claims come and go, carried by clones and across an update of the quota object;
and clones that share claims until one side edits them."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from extender.cache.cache import ClusterCache
from extender.model.quota import QuotaClaim, QuotaInfo
from extender.model.resources import Resource
from extender.model.task import TaskInfo
from tests import builders as b


def _task(uid: str, index: int | None) -> TaskInfo:
    # a node selector per pod: every claimant has its own placement key
    return TaskInfo(
        uid=uid, namespace="ml", name=uid, job="ml/train", index=index, request=Resource({}), node_selector={"p": uid}
    )


def _expected_keys(q: QuotaInfo) -> tuple[object, ...]:
    ordered = sorted(q.claims.values(), key=lambda c: (c.index is None, c.index or 0, c.name))
    return tuple(_task(c.uid, c.index).placement_key() for c in ordered)


def _expected(q: QuotaInfo) -> int | None:
    return min((c.index for c in q.claims.values() if c.index is not None), default=None)


steps = st.lists(
    st.tuples(st.sampled_from(["add", "remove", "restore", "clone"]), st.integers(0, 5), st.none() | st.integers(0, 9)),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(steps)
def test_rank_is_the_smallest_claimant_index_after_any_claim_edits(ops: list[tuple[str, int, int | None]]) -> None:
    q = QuotaInfo(name="q", queue="research", request=Resource({}))
    removed: dict[str, QuotaClaim] = {}
    for op, who, index in ops:
        uid = f"u{who}"
        if op == "add" and uid not in q.claims:
            q.add_claim(_task(uid, index), force=True)
            removed.pop(uid, None)
        elif op == "remove" and uid in q.claims:
            removed[uid] = q.remove_claim(uid)
        elif op == "restore" and uid in removed:
            q.restore_claim(removed.pop(uid))
        elif op == "clone":
            q = q.clone()
        assert q.rank == _expected(q)
        if q.claims:  # (a quota that never had a claim does not know its claimants' keys yet)
            assert q.claimant_keys == _expected_keys(q)


def test_rank_survives_an_update_of_the_quota_object() -> None:
    cache = ClusterCache(clock=lambda: 1_000_000.0)
    quota = b.quota("q-shared", gpu=8)
    pods = [b.pod(f"w-{i}", group="train", quota="q-shared", index=i) for i in (3, 1, 2)]
    b.feed(cache, [b.node("n0"), quota, *pods])
    assert cache.quotas["q-shared"].rank == 1

    updated = dict(quota, metadata={**quota["metadata"], "resourceVersion": "2"})
    cache.on_quota_update(quota, updated)
    assert cache.quotas["q-shared"].rank == 1  # claims (from pods) and their rank carried over

    cache.on_pod_delete(pods[1])
    assert cache.quotas["q-shared"].rank == 2


copy_steps = st.lists(
    st.tuples(st.sampled_from(["add", "remove", "clone"]), st.integers(0, 7), st.integers(0, 5)), max_size=40
)


@settings(max_examples=150, deadline=None)
@given(copy_steps)
def test_a_clones_claims_are_its_own_though_shared_until_edited(ops: list[tuple[str, int, int]]) -> None:
    """Clones share claims and allocated until one side edits them: no edit shows in the other."""
    copies = [QuotaInfo(name="q", queue="research", request=Resource({"g": 100}))]
    models: list[dict[str, int]] = [{}]  # uid → index, per copy
    for op, which, who in ops:
        i = which % len(copies)
        q, model = copies[i], models[i]
        uid = f"u{who}"
        if op == "add" and uid not in model:
            q.add_claim(TaskInfo(uid=uid, namespace="ml", name=uid, job="ml/j", index=who, request=Resource({"g": 1})))
            model[uid] = who
        elif op == "remove" and uid in model:
            q.remove_claim(uid)
            del model[uid]
        elif op == "clone":
            copies.append(q.clone())
            models.append(dict(model))
        for c, m in zip(copies, models, strict=True):
            assert set(c.claims) == set(m)
            assert c.allocated.get("g") == len(m)
            assert c.rank == min(m.values(), default=None)
