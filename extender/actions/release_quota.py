"""``release_quota`` — give bound quotas back (seed 五 releaseQuota, DESIGN §1).

Three cases, each a statement of its own:

* **Unschedulable jobs.** A job some of whose tasks stay unplaced for ``unschedulable_cycles``
  consecutive cycles while they hold quotas gives back what no placed task uses: bound quotas
  go back to ``QuotaEmpty`` (never a statically bound one, never one a placed task of the job
  still uses), and the claims of its unplaced tasks on *unbound* quotas are dropped (a job whose
  pods can never be placed must not starve the rest of its queue) — unless its verdict says it
  only waits for room (``NoZoneFits``, ``InsufficientQuotaIdle``, a hold …): a gang in line for
  capacity keeps its claims, its place and its hold. Then it waits an exponential
  back-off (``backoff_seconds · 2^k`` after its k-th release, at most ``max_backoff_seconds``)
  before it claims and places quotas again. The reason is recorded for /diagnose
  (``QuotaReleasedUnschedulable``).
* **Idle quotas.** A bound, non-static quota that no task claims and no unexpired reservation
  holds (its job finished, or its reservations expired) goes back to ``QuotaEmpty`` — if the
  scheduler bound it (``status.boundBy``): a ``nodeName`` another controller wrote is left.
* **Lost nodes.** A quota bound to a node that no longer exists, with no placed task, is released.

The last two cases also run before hop ② as the action ``release_idle_quota`` (the default
policy lists it after ``allocate_job``), so that the room they give back is planned with in the
same cycle; here they run only if that action did not (a policy without it).

Counters and back-offs live in the scheduler between cycles: this action reads them from the
snapshot and leaves its updates in ``ssn.notes[NAME]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from pydantic import Field

from extender.framework.plugin import ArgsModel
from extender.framework.session import FitStage, Session
from extender.framework.status import Reason, Status
from extender.model.quota import QuotaInfo
from extender.model.task import ALIVE

NAME: Final = "release_quota"


# what a job waits for when it only needs room: capacity others hold now (not a refusal of its pods)
_ROOM_REASONS: Final = frozenset(
    {
        Reason.NO_ZONE_FITS,
        Reason.INSUFFICIENT_QUOTA_IDLE,
        Reason.QUOTA_IDLE_AFTER_RELEASE,
        Reason.NODE_HELD_FOR_GANG,
        Reason.HOLDING_NODES,
        Reason.FITS_ONLY_ABOVE_ALLOWED_TIER,
    }
)


def _waits_for_room(ssn: Session, job: str) -> bool:
    """The job's verdict this cycle says it waits for room, not that its pods fit nowhere (a
    holder's verdict leads with ``HoldingNodes``: what it waits for is the reason after that)."""
    verdict = ssn.verdicts.get(job)
    if verdict is None:
        return False
    why = next((f.reason for f in verdict.status.failures if f.reason is not Reason.HOLDING_NODES), None)
    return why is None or why in _ROOM_REASONS


class ReleaseQuotaArgs(ArgsModel):
    unschedulable_cycles: int = Field(30, ge=1, description="consecutive stuck cycles before release")
    backoff_seconds: float = Field(10.0, gt=0)
    max_backoff_seconds: float = Field(300.0, gt=0)


Args = ReleaseQuotaArgs


@dataclass(slots=True)
class ReleaseNotes:
    """What the scheduler must remember after this cycle."""

    stuck_cycles: dict[str, int] = field(default_factory=dict)  # job → consecutive stuck cycles
    backoff: dict[str, float] = field(default_factory=dict)  # job → not before
    releases: dict[str, int] = field(default_factory=dict)  # job → times released so far
    released: list[tuple[str, str, str]] = field(default_factory=list)  # (quota, node, reason)
    idle_done: bool = False  # the idle and lost-node cases ran this cycle (release_idle_quota)


class Action:
    NAME: Final = NAME
    Args = ReleaseQuotaArgs

    def __init__(self, args: ReleaseQuotaArgs) -> None:
        self.args = args

    def execute(self, ssn: Session) -> None:
        notes = notes_of(ssn)
        self.release_stuck_jobs(ssn, notes)
        if not notes.idle_done:  # a policy without release_idle_quota
            release_idle(ssn, notes)

    def release_stuck_jobs(self, ssn: Session, notes: ReleaseNotes) -> None:
        memory = ssn.snap.stuck_cycles
        backoff = ssn.snap.backoff
        for job in ssn.pending_jobs():
            if backoff.get(job.key, 0.0) > ssn.now:
                continue  # backing off after a release: not trying, so not stuck either
            unplaced = 0
            waiting: dict[str, list[str]] = {}  # quota → unplaced tasks claiming it
            placed: set[str] = set()  # quotas claimed by placed tasks
            for t in job.tasks.values():  # one pass over the alive tasks (read for every pending job)
                if t.status not in ALIVE:
                    continue
                if t.node:
                    if t.quota:
                        placed.add(t.quota)
                elif not t.spot:
                    unplaced += 1
                    if t.quota:
                        waiting.setdefault(t.quota, []).append(t.uid)
            if not unplaced:
                continue
            releasable: list[QuotaInfo] = []  # bound quotas to give back
            unclaim: list[str] = []  # tasks whose claims on unbound quotas go
            # a gang that waits for room keeps its claims (its place in line, and its hold): only
            # one that cannot be placed as things are (no node takes its pods) gives them back
            keeps_claims = _waits_for_room(ssn, job.key)
            for name in sorted(waiting.keys() - placed):
                q = ssn.quota(name)
                if q is None or q.static_bind_node or (q.node_name and not q.bound_by):
                    continue  # static, or bound by another controller: not ours to release
                if q.node_name:
                    releasable.append(q)
                elif not keeps_claims:
                    unclaim.extend(sorted(waiting[name]))
            if not releasable and not unclaim:
                continue
            count = memory.get(job.key, 0) + 1
            if count < self.args.unschedulable_cycles:
                notes.stuck_cycles[job.key] = count
                continue
            k = ssn.snap.release_count.get(job.key, 0)
            delay = min(self.args.max_backoff_seconds, self.args.backoff_seconds * (2**k))
            # stable for the same job state (the delay, which grows, is in /diagnose)
            why = f"{unplaced} task(s) could not be placed on their quotas' nodes; quotas released"
            stmt = ssn.statement()
            for q in releasable:
                stmt.release_quota(q.name, Reason.RELEASED_UNSCHEDULABLE.value)
                notes.released.append((q.name, q.node_name, why))
            for uid in unclaim:
                stmt.unclaim(uid, Status.unschedulable(Reason.RELEASED_UNSCHEDULABLE, why).message())
            stmt.commit()
            notes.backoff[job.key] = ssn.now + delay
            notes.releases[job.key] = k + 1
            ssn.verdict(job.key, FitStage.BIND, Status.unschedulable(Reason.RELEASED_UNSCHEDULABLE, why))


def notes_of(ssn: Session) -> ReleaseNotes:
    """This cycle's release notes (one object for ``release_idle_quota`` and ``release_quota``)."""
    notes = ssn.notes.get(NAME)
    if not isinstance(notes, ReleaseNotes):
        notes = ssn.notes[NAME] = ReleaseNotes()
    return notes


def release_idle(ssn: Session, notes: ReleaseNotes) -> None:
    """The idle and lost-node cases of the module docstring: each released quota in a statement
    of its own, recorded in ``notes.released``. Once a cycle: nothing between hop ① and the end
    of the cycle makes a bound quota idle or loses a node."""
    notes.idle_done = True
    names = ssn.snap.release_candidates
    candidates = list(ssn.quotas()) if names is None else [q for q in map(ssn.quota, sorted(names)) if q]
    for quota in candidates:
        if not quota.node_name or quota.static_bind_node or not quota.bound_by:
            continue  # unbound, static, or bound by another controller (the QN pipeline skips those)
        if quota.is_idle(ssn.now):
            why = "no task claims it and no reservation holds it"
        elif ssn.node(quota.node_name) is None and not any(
            (t := ssn.task(uid)) is not None and t.node for uid in quota.claims
        ):
            why = f"node {quota.node_name} no longer exists"
        else:
            continue
        node = quota.node_name
        stmt = ssn.statement()
        stmt.release_quota(quota.name, why)
        stmt.commit()
        notes.released.append((quota.name, node, why))
