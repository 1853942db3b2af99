"""The webhook's in-flight registry and pods that came and went between two admissions.

An entry waits for its pod's claim to show in the cache. A pod that arrives and is deleted (or
fails) before the next admission looks leaves no claim, but a reservation on the quota: that
counts as its arrival. A reservation that already existed when the entry was made does not (it
is the one the admitted pod is about to inherit, or somebody else's).
"""

from __future__ import annotations

from extender import wellknown
from extender.model.quota import QuotaClaim, QuotaInfo, ReservedTask
from extender.model.resources import Resource
from webhooks.inflight import InFlightRegistry

GPU = wellknown.RESOURCE_GPU


def _quota(*, claims: tuple[str, ...] = (), reserved: tuple[ReservedTask, ...] = ()) -> QuotaInfo:
    q = QuotaInfo(name="q", queue="research", request=Resource({GPU: 8000}))
    for uid in claims:
        q.claims[uid] = QuotaClaim(uid, "ml", uid, "ml/train", 2, Resource({GPU: 8000}))
    q.reserved = reserved
    return q


def _reservation(uid: str, *, index: int = 2, namespace: str = "ml", expires_at: float = 600.0) -> ReservedTask:
    return ReservedTask(
        job=f"{namespace}/train",
        index=index,
        namespace=namespace,
        pod_name=f"train-worker-{index}",
        pod_uid=uid,
        reason="Deleted",
        expires_at=expires_at,
        request=Resource({GPU: 8000}),
    )


def _admit(reg: InFlightRegistry, q: QuotaInfo, *, index: int = 2) -> None:
    reg.add(
        reg.new_entry(
            quota=q,
            namespace="ml",
            name=f"train-worker-{index}",
            job="ml/train",
            queue="research",
            index=index,
            request=Resource({GPU: 8000}),
            fingerprint=f"w{index}",
            now=0.0,
        )
    )


def test_a_reservation_left_by_the_entrys_pod_means_it_arrived() -> None:
    reg = InFlightRegistry(ttl=30)
    _admit(reg, _quota())
    # the pod arrived, claimed, and was deleted again before any other admission looked
    gone = _quota(reserved=(_reservation("uid-new"),))
    assert reg.live({"q": gone}, now=1.0) == []


def test_an_expired_reservation_still_proves_the_arrival() -> None:
    reg = InFlightRegistry(ttl=30)
    _admit(reg, _quota())
    gone = _quota(reserved=(_reservation("uid-new", expires_at=5.0),))  # a TTL shorter than 30 s
    assert reg.live({"q": gone}, now=10.0) == []


def test_a_reservation_older_than_the_entry_does_not_count() -> None:
    """The restarted pod's own admission: the reservation it inherits was there already."""
    reg = InFlightRegistry(ttl=30)
    old = _reservation("uid-old")
    _admit(reg, _quota(reserved=(old,)))
    assert [e.name for e in reg.live({"q": _quota(reserved=(old,))}, now=1.0)] == ["train-worker-2"]


def test_a_reservation_of_another_namespace_does_not_count() -> None:
    reg = InFlightRegistry(ttl=30)
    _admit(reg, _quota())
    other = _quota(reserved=(_reservation("uid-x", namespace="other"),))
    assert len(reg.live({"q": other}, now=1.0)) == 1


def test_a_reserved_pod_that_claims_again_counts_once() -> None:
    """A claim and a reservation of the same pod uid are one arrival, not two."""
    reg = InFlightRegistry(ttl=30)
    q = _quota()
    _admit(reg, q, index=2)
    _admit(reg, q, index=3)
    both = _quota(claims=("uid-new",), reserved=(_reservation("uid-new"),))
    assert [e.name for e in reg.live({"q": both}, now=1.0)] == ["train-worker-3"]
