"""In-flight claims: quotas this webhook instance handed out that the cache does not show yet.

Between the admission answer and the pod informer delivering the created pod, the cluster cache
does not know the pod claims its quota. Without bookkeeping the next admission — typically the
next worker of the same job, milliseconds later — would be offered the same room. So each
answer that names a quota records an :class:`InFlight` entry (the task's request, namespace,
job, task index, an expiry of ~30 s), and every later choice counts live entries against their
quota as if they were claims.

An entry is dropped when

* the cache shows a pod of that namespace claiming that quota that was not claiming it when the
  entry was made (the informer caught up; the entry's job and task index are preferred when
  several entries of one quota wait) — or a reservation that such a pod left when it was deleted
  or failed before the next admission looked (a worker crashing right after its start must get
  its reserved place back, not lose it to its own stale entry), or
* it expires (the pod was never created: another admission plugin denied it, the client gave up
  — the room is held for at most ``ttl`` seconds), or
* the quota disappeared from the cache.

Nothing is recorded for ``dryRun`` requests (the app's job) and :meth:`InFlightRegistry.live`
never mutates, so a dry run leaves the registry untouched.

Role: one registry per webhook *process*, holding the claims it is recording or has just
recorded. The arbiter is the Quota object: every claim is written into its ``status.tasks``
before the answer (``webhooks.app.admit``, ``extender.cache.claims``), so replicas cannot hand
out the same room twice. This registry only keeps concurrent admissions of one replica from all
trying the same room while a write is in flight (and serves a webhook run without API access).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from extender.model.quota import QuotaClaim, QuotaInfo
from extender.model.resources import Resource

__all__ = ["DEFAULT_TTL", "InFlight", "InFlightRegistry"]

DEFAULT_TTL = 30.0


@dataclass(frozen=True, slots=True)
class InFlight:
    seq: int  # registry-wide order of admission
    quota: str
    namespace: str
    name: str  # pod name, or its generateName prefix followed by "*"
    job: str  # job key "namespace/name"
    queue: str  # the job's queue when admitted (a job of one that is not in the cache yet)
    index: int | None  # task index
    request: Resource  # the task's whole request (the quota counts the names it governs)
    fingerprint: str  # identifies the pod across re-invocations of the webhook
    created: float
    expires_at: float
    known_claims: frozenset[str]  # claim and reservation pod uids the quota had when the entry was made

    @property
    def uid(self) -> str:
        """The uid the entry's pseudo-task and pseudo-claim carry inside a session."""
        return f"inflight:{self.seq}"

    def claim(self, quota: QuotaInfo) -> QuotaClaim:
        return QuotaClaim(
            self.uid, self.namespace, self.name, self.job, self.index, quota.governed(self.request), self.created
        )


class InFlightRegistry:
    """Per-quota in-flight entries of one webhook instance (not thread-safe: one event loop)."""

    __slots__ = ("_entries", "_seq", "ttl")

    def __init__(self, ttl: float = DEFAULT_TTL) -> None:
        if ttl <= 0:
            raise ValueError("the in-flight ttl must be > 0")
        self.ttl = ttl
        self._entries: dict[int, InFlight] = {}  # seq → entry, in admission order
        self._seq = itertools.count(1)

    def new_entry(
        self,
        *,
        quota: QuotaInfo,
        namespace: str,
        name: str,
        job: str,
        queue: str,
        index: int | None,
        request: Resource,
        fingerprint: str,
        now: float,
    ) -> InFlight:
        """An entry for ``quota`` (not recorded: pass it to :meth:`add`)."""
        return InFlight(
            seq=next(self._seq),
            quota=quota.name,
            namespace=namespace,
            name=name,
            job=job,
            queue=queue,
            index=index,
            request=request,
            fingerprint=fingerprint,
            created=now,
            expires_at=now + self.ttl,
            known_claims=frozenset(quota.claims) | {r.pod_uid for r in quota.reserved},
        )

    def add(self, entry: InFlight) -> None:
        self._entries[entry.seq] = entry

    def discard(self, entry: InFlight) -> None:
        """Forget ``entry`` (its claim was recorded on the quota, or refused)."""
        self._entries.pop(entry.seq, None)

    def live(self, quotas: Mapping[str, QuotaInfo], now: float) -> list[InFlight]:
        """The entries still in flight given the cache's quotas at ``now`` (no mutation)."""
        if not self._entries:
            return []
        by_quota: dict[str, list[InFlight]] = {}
        for e in self._entries.values():
            by_quota.setdefault(e.quota, []).append(e)
        out: list[InFlight] = []
        for name, entries in by_quota.items():
            quota = quotas.get(name)
            if quota is None:
                continue
            waiting = [e for e in entries if e.expires_at > now]
            if not waiting:
                continue
            fresh = [c for uid, c in quota.claims.items() if not uid.startswith("inflight:")]
            # a pod that arrived and was deleted (or failed) again before the next admission left
            # a reservation: that is as good a sign of arrival as its claim was
            fresh.extend(_departed(quota))
            if not fresh:
                out.extend(waiting)
                continue
            out.extend(_unmatched(waiting, fresh))
        out.sort(key=lambda e: e.seq)
        return out

    def reconcile(self, quotas: Mapping[str, QuotaInfo], now: float) -> int:
        """Drop expired and arrived entries; return how many were dropped."""
        keep = self.live(quotas, now)
        dropped = len(self._entries) - len(keep)
        if dropped:
            self._entries = {e.seq: e for e in keep}
        return dropped

    def arrived(self, *, quota: str, namespace: str, job: str, index: int | None) -> bool:
        """A pod claiming ``quota`` was just seen by the informer (even if it ends at once — a pod
        that succeeds before the next admission never shows up as a claim): drop the entry it
        accounts for, the same job and task index first. True if one was dropped."""
        candidates = [e for e in self._entries.values() if e.quota == quota and e.namespace == namespace]
        if not candidates:
            return False
        exact = [e for e in candidates if e.job == job and e.index == index]
        chosen = min(exact or candidates, key=lambda e: e.seq)
        del self._entries[chosen.seq]
        return True

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[InFlight]:
        return iter(list(self._entries.values()))


def _departed(quota: QuotaInfo) -> list[QuotaClaim]:
    """The reservations of ``quota`` as the claims their pods held (expired ones included: the
    pod arrived all the same)."""
    return [
        QuotaClaim(r.pod_uid, r.namespace, r.pod_name, r.job, r.index, r.request)
        for r in quota.reserved
        if r.pod_uid not in quota.claims
    ]


def _unmatched(entries: list[InFlight], claims: list[QuotaClaim]) -> list[InFlight]:
    """Entries no new claim accounts for. A claim is new for an entry when its uid was not among
    the quota's claims when the entry was made; each claim accounts for one entry, exact
    (job, task index) matches first."""
    used: set[str] = set()
    matched: set[int] = set()
    for exact in (True, False):
        for e in entries:
            if e.seq in matched:
                continue
            for c in claims:
                if c.uid in used or c.uid in e.known_claims or c.namespace != e.namespace:
                    continue
                if exact and (c.job != e.job or c.index != e.index):
                    continue
                used.add(c.uid)
                matched.add(e.seq)
                break
    return [e for e in entries if e.seq not in matched]
