"""Claims recorded on the Quota before the pod exists: ``status.tasks`` entries with ``expiresAt``.

A webhook replica that hands a quota to a pod at admission (and the extender when it binds a
one-pod job inline) writes the claim into the Quota's ``status.tasks`` *before* it answers, with
the quota's ``resourceVersion`` as precondition (:func:`record_claim` is the read-modify-write
rule the writer applies, re-read on every 409). So two replicas, or a replica and the binder,
can never hand out the same room: whoever writes second re-reads the first claim and finds no
room (it then tries another quota, bounded).

An in-flight entry looks like a pod's entry plus ``expiresAt``; its ``uid`` is
``admission:<request uid>`` (or the pod's uid for an inline bind). Every reader counts it as a
claim until

* the pod it was made for is seen claiming the quota (:meth:`ClaimEntry.accounts_for`: the pod
  names the entry in its ``claim-entry`` annotation, which the webhook sets with the quota — the
  name of a ``generateName`` pod is not known at admission; a pod without one: same namespace
  and name, or the name prefix with the same job and task index) — the pod's own claim replaces
  it and the binder rewrites the entry in the pod's form;
* or ``expiresAt`` passes (:data:`DEFAULT_CLAIM_TTL`, 30 s: the pod was never created — another
  admission plugin denied it, the client gave up). The binder leader removes expired entries
  every cycle; writers ignore them when they count room.

A *replacement* (a pod of the same job and task index, or of the same name, as a pod that
claims the quota — the training operator recreating a deleted worker before the deletion is
seen) does not compete with the pod it replaces: :func:`replaces` says so, and the room the old
pod holds counts as the new pod's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from extender.cache.convert import format_time, parse_time
from extender.model.claimant import Claimant, is_stand_in, replaces
from extender.model.quota import QuotaClaim, QuotaInfo
from extender.model.resources import QuantityError, Resource, format_quantity

__all__ = [
    "ADMISSION_PREFIX",
    "DEFAULT_CLAIM_TTL",
    "ClaimEntry",
    "Claimant",
    "NoRoom",
    "entries_of",
    "record_claim",
    "replaces",
]

ADMISSION_PREFIX: Final = "admission:"
DEFAULT_CLAIM_TTL: Final = 30.0
"""Seconds an in-flight claim holds its room for a pod that has not appeared yet."""


@dataclass(frozen=True, slots=True)
class ClaimEntry:
    """One in-flight claim (a ``status.tasks`` entry with ``expiresAt``)."""

    uid: str
    namespace: str
    name: str  # the pod's name, or its generateName prefix followed by "*"
    job: str
    index: int | None
    request: Resource  # on the quota's resource names
    expires_at: float

    @property
    def claimant(self) -> Claimant:
        return Claimant(self.namespace, self.name, self.job, self.index)

    def claim(self) -> QuotaClaim:
        return QuotaClaim(self.uid, self.namespace, self.name, self.job, self.index, self.request)

    def expired(self, now: float) -> bool:
        return now >= self.expires_at

    def accounts_for(self, pod: QuotaClaim, *, by_prefix: bool = True) -> bool:
        """``pod``'s claim on the quota is the claim this entry was recorded for: the entry carries
        the pod's uid (an inline bind's), or the pod names this entry (annotation
        ``claim-entry``: exactly one pod per entry) — or, for a pod that names none (admitted by
        an older webhook), the same namespace and name, or (``by_prefix``) for a ``generateName``
        entry the name prefix with the same job and task index."""
        if pod.uid == self.uid:
            return True
        if pod.entry:
            return pod.entry == self.uid
        if pod.namespace != self.namespace:
            return False
        if is_stand_in(self.name) and by_prefix:
            return pod.name.startswith(self.name[:-1]) and pod.job == self.job and pod.index == self.index
        return pod.name == self.name

    def to_api(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "uid": self.uid,
            "namespace": self.namespace,
            "name": self.name,
            "job": self.job,
            "request": _resource_list(self.request),
            "phase": "Pending",
            "expiresAt": format_time(self.expires_at),
        }
        if self.index is not None:
            out["taskIndex"] = self.index
        return out


def _resource_list(r: Resource) -> dict[str, str]:
    return {k: format_quantity(k, v) for k, v in sorted(r.q.items()) if v}


def _entry(raw: object) -> ClaimEntry | None:
    """The in-flight entry ``raw`` is, or None (a pod's entry, or unreadable)."""
    if not isinstance(raw, Mapping) or not raw.get("expiresAt") or not raw.get("uid"):
        return None
    try:
        request = Resource.from_list(raw.get("request"))
    except (QuantityError, ValueError, TypeError):
        return None
    index = raw.get("taskIndex")
    return ClaimEntry(
        uid=str(raw["uid"]),
        namespace=str(raw.get("namespace") or ""),
        name=str(raw.get("name") or ""),
        job=str(raw.get("job") or ""),
        index=index if isinstance(index, int) else None,
        request=request,
        expires_at=parse_time(raw.get("expiresAt")),
    )


def entries_of(obj: Mapping[str, Any] | None) -> dict[str, ClaimEntry]:
    """The in-flight entries of a Quota object, by uid (expired ones included)."""
    out: dict[str, ClaimEntry] = {}
    for raw in ((obj or {}).get("status") or {}).get("tasks") or ():
        e = _entry(raw)
        if e is not None:
            out[e.uid] = e
    return out


class NoRoom(Exception):
    """The quota, as the API holds it now, has no room for the claim."""


def _request_of(raw: Mapping[str, Any]) -> Resource:
    try:
        return Resource.from_list(raw.get("request"))
    except (QuantityError, ValueError, TypeError):
        return Resource.empty()


def record_claim(
    obj: Mapping[str, Any],
    entry: ClaimEntry,
    *,
    now: float,
    known: QuotaInfo | None = None,
    inherit_from: str = "",
) -> dict[str, Any] | None:
    """The Quota's new ``status`` with ``entry`` added, or None if it is there already.

    Room is judged on ``obj`` as just read (the writer re-reads on every conflict), together with
    what the caller's cache ``known`` knows that the object does not show yet (pods that claim
    it, reservations not written yet): ``request + shadowResource`` must cover every live entry,
    every claim the cache knows, every unexpired reservation that does not wait for this task,
    and the new entry. Expired in-flight entries are dropped; entries and claims of a pod this
    one replaces (:func:`replaces`) do not count. Raises :class:`NoRoom` otherwise."""
    spec = obj.get("spec") or {}
    status = dict(obj.get("status") or {})
    request = Resource.from_list(spec.get("request"))
    shadow = Resource.from_list(status.get("shadowResource"))
    names = request.q.keys() | shadow.q.keys()
    me = Claimant(entry.namespace, entry.name, entry.job, entry.index, inherit_from)
    if _recorded(status, entry.uid):
        return None  # recorded already (a retry whose first write landed)
    kept, used, counted = _live_entries(status, me, known, now)
    used.iadd(_known_claims(known, me, counted))
    used.iadd(_unexpired_reservations(status, known, me, now))
    need = Resource({k: v for k, v in entry.request.q.items() if k in names})
    free = request + shadow
    free.isub(used)
    short = need.shortfalls(free)
    if short:
        raise NoRoom(", ".join(map(str, short)))
    kept.append(entry.to_api())
    status["tasks"] = kept
    total = used + need
    status["allocated"] = _resource_list(total)
    return status


def _recorded(status: Mapping[str, Any], uid: str) -> bool:
    """``status.tasks`` lists an entry of ``uid``."""
    return any(isinstance(raw, Mapping) and str(raw.get("uid") or "") == uid for raw in status.get("tasks") or ())


def _live_entries(
    status: Mapping[str, Any], me: Claimant, known: QuotaInfo | None, now: float
) -> tuple[list[Any], Resource, set[str]]:
    """The ``status.tasks`` entries that stay (expired in-flight ones go), what those of them
    count (not the ones ``me`` replaces, nor in-flight ones whose pod is among ``known``'s
    claims: counted with those), and the uids of all that stay."""
    kept: list[Any] = []
    used = Resource.empty()
    counted: set[str] = set()
    pods = [c for c in known.claims.values() if not c.uid.startswith(ADMISSION_PREFIX)] if known is not None else []
    for raw in status.get("tasks") or ():
        if not isinstance(raw, Mapping):
            continue
        uid = str(raw.get("uid") or "")
        e = _entry(raw)
        if e is not None and e.expired(now):
            continue  # the pod never came: the entry goes
        kept.append(raw)
        who = Claimant(
            str(raw.get("namespace") or ""),
            str(raw.get("name") or ""),
            str(raw.get("job") or ""),
            raw.get("taskIndex") if isinstance(raw.get("taskIndex"), int) else None,
        )
        counted.add(uid)
        if replaces(me, who) or (e is not None and _arrived(e, pods)):
            continue  # replaced by this pod, or its pod is among the cache's claims (counted below)
        used.iadd(_request_of(raw))
    return kept, used, counted


def _arrived(e: ClaimEntry, pods: Iterable[QuotaClaim]) -> bool:
    """The cache knows the pod ``e`` was recorded for (:meth:`ClaimEntry.accounts_for`), but not
    by a ``generateName`` prefix (the cache's rule for pods admitted by an older webhook): every
    pod of that owner shares it, and the writer, which judges room, counts an entry it cannot tie
    to one pod."""
    return any(e.accounts_for(c, by_prefix=False) for c in pods)


def _known_claims(known: QuotaInfo | None, me: Claimant, counted: set[str]) -> Resource:
    """What the pods' claims the cache knows (``known``) count that the object does not list
    (the object is the truth for in-flight entries), but for those of a pod ``me`` replaces."""
    used = Resource.empty()
    if known is not None:
        for c in known.claims.values():
            if c.uid in counted or c.uid.startswith(ADMISSION_PREFIX):
                continue  # the object is the truth for in-flight entries
            if replaces(me, Claimant(c.namespace, c.name, c.job, c.index)):
                continue
            used.iadd(c.request)
    return used


def _unexpired_reservations(status: Mapping[str, Any], known: QuotaInfo | None, me: Claimant, now: float) -> Resource:
    """What the reservations count: those ``status.reservedTasks`` lists and those the cache
    keeps but has not written yet (``known``), if unexpired and not kept for a pod ``me``
    replaces."""
    reserved: dict[str, tuple[Claimant, Resource, float]] = {}
    for raw in status.get("reservedTasks") or ():
        if isinstance(raw, Mapping) and raw.get("podUID"):
            idx = raw.get("taskIndex")
            who = Claimant(
                str(raw.get("namespace") or ""),
                str(raw.get("podName") or ""),
                str(raw.get("job") or ""),
                idx if isinstance(idx, int) else None,
            )
            reserved[str(raw["podUID"])] = (who, _request_of(raw), parse_time(raw.get("expiresAt")))
    for r in known.reserved if known is not None else ():
        reserved.setdefault(r.pod_uid, (Claimant(r.namespace, r.pod_name, r.job, r.index), r.request, r.expires_at))
    used = Resource.empty()
    for who, req, expires in reserved.values():
        if now < expires and not replaces(me, who):
            used.iadd(req)
    return used


def live_entries(entries: Iterable[ClaimEntry], now: float) -> list[ClaimEntry]:
    return [e for e in entries if not e.expired(now)]
