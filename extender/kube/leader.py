"""Leader election on a ``coordination.k8s.io/v1`` Lease, with client-go's semantics.

* A candidate takes the lease when nobody holds it (no Lease, empty ``holderIdentity``), or when
  the holder's record has not changed for ``leaseDurationSeconds`` *as measured on our own clock
  since we last saw it change* — never by comparing the holder's ``renewTime`` with our wall
  clock, so clock skew between machines does not matter.
* The leader renews every ``retry_period``; if no renewal succeeds for ``renew_deadline`` it steps
  down (before anyone else may take over, since ``renew_deadline < lease_duration``).
* On a clean stop the leader releases the lease (empty holder, ``leaseDurationSeconds: 1``, as
  client-go's ``ReleaseOnCancel``), so a successor need not wait out the lease.
* ``leaseTransitions`` is incremented whenever the holder changes.

Every API call goes through :class:`~extender.kube.writer.KubeWriter`.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import time
from collections.abc import Callable
from typing import Any

from extender.aio import cancel_and_wait
from extender.kube.bodies import micro_time
from extender.kube.errors import AlreadyExists, Conflict, KubeError
from extender.kube.writer import KubeWriter

__all__ = ["LeaderElector"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Callback = Callable[[], Any]


class LeaderElector:
    """Campaign for ``namespace/lease_name`` as ``identity`` until stopped.

    Observe :attr:`is_leader`, await :attr:`leading` / :attr:`not_leading`, or pass callbacks
    (plain or ``async``): ``on_started_leading``, ``on_stopped_leading``, ``on_new_leader(identity)``.
    With ``rejoin`` (default) a leader that lost the lease campaigns again.
    """

    def __init__(
        self,
        writer: KubeWriter,
        *,
        lease_name: str,
        namespace: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        release_on_stop: bool = True,
        rejoin: bool = True,
        on_started_leading: Callback | None = None,
        on_stopped_leading: Callback | None = None,
        on_new_leader: Callable[[str], Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not identity:
            raise ValueError("identity must not be empty")
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError("need lease_duration > renew_deadline > retry_period > 0")
        self.writer = writer
        self.lease_name = lease_name
        self.namespace = namespace
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.release_on_stop = release_on_stop
        self.rejoin = rejoin
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.on_new_leader = on_new_leader
        self._clock = clock
        self.leading = asyncio.Event()
        self.not_leading = asyncio.Event()
        self.not_leading.set()
        self.leader: str | None = None
        """The holder we last observed (ourselves while leading)."""
        self._observed: Obj | None = None
        self._observed_spec: Obj | None = None
        self._observed_at = 0.0
        self._renew_sent = -math.inf  # when the last acquire or renewal that succeeded was sent
        self._task: asyncio.Task[None] | None = None

    @property
    def is_leader(self) -> bool:
        return self.leading.is_set()

    def lease_left(self) -> float:
        """Seconds during which this replica may still act as the leader: until ``renew_deadline``
        after the last successful renewal was *sent* (another replica may take the lease only
        ``lease_duration`` after it saw that renewal, which it cannot see before it was sent);
        0 when not leading. The binder's writes are fenced with it (``KubeWriter.fenced``)."""
        if not self.is_leader:
            return 0.0
        return max(0.0, self._renew_sent + self.renew_deadline - self._clock())

    @property
    def _duration_seconds(self) -> int:
        return max(1, math.ceil(self.lease_duration))

    # ------------------------------------------------------------------------------------------
    # lifecycle

    def start(self) -> asyncio.Task[None]:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self.run(), name=f"leader-election {self.namespace}/{self.lease_name}")
        return self._task

    async def stop(self) -> None:
        """Stop campaigning; a leader steps down and (``release_on_stop``) releases the lease."""
        await cancel_and_wait(self._task)

    async def run(self) -> None:
        try:
            while True:
                await self._acquire()
                await self._renew_until_lost()
                if not self.rejoin:
                    return
        finally:
            was_leader = self.is_leader
            if was_leader:
                await self._step_down()
                if self.release_on_stop:
                    await asyncio.shield(self._release())

    # ------------------------------------------------------------------------------------------
    # the loops

    async def _acquire(self) -> None:
        while True:
            if await self._try_acquire_or_renew():
                await self._become_leader()
                return
            await asyncio.sleep(self.retry_period)

    async def _renew_until_lost(self) -> None:
        """Renew every ``retry_period``; step down exactly when ``renew_deadline`` has passed
        since the last successful renewal (attempts are cut short at that deadline)."""
        last_renew = self._clock()
        while True:
            deadline = last_renew + self.renew_deadline
            await asyncio.sleep(min(self.retry_period, max(0.0, deadline - self._clock())))
            remaining = deadline - self._clock()
            if remaining <= 0:
                log.warning(
                    "leader election %s: could not renew for %.1fs, stepping down", self.identity, self.renew_deadline
                )
                await self._step_down()
                return
            try:
                async with asyncio.timeout(remaining):
                    ok = await self._try_acquire_or_renew()
            except TimeoutError:
                ok = False
            if ok:
                last_renew = self._clock()

    async def _try_acquire_or_renew(self) -> bool:
        """One client-go ``tryAcquireOrRenew`` round; False when someone else holds it or on error."""
        now = micro_time()
        sent = self._clock()
        ok = await self._acquire_or_renew(now)
        if ok:
            self._renew_sent = sent
        return ok

    async def _acquire_or_renew(self, now: str) -> bool:
        try:
            lease = await self.writer.get_lease(self.namespace, self.lease_name)
            if lease is None:
                spec = {
                    "holderIdentity": self.identity,
                    "leaseDurationSeconds": self._duration_seconds,
                    "acquireTime": now,
                    "renewTime": now,
                    "leaseTransitions": 0,
                }
                created = await self.writer.create_lease(self.namespace, self.lease_name, spec)
                self._observe(created)
                return True
            record: Obj = dict(lease.get("spec") or {})
            self._observe(lease)
            holder = record.get("holderIdentity") or ""
            held_by_other = bool(holder) and holder != self.identity
            duration = float(record.get("leaseDurationSeconds") or self._duration_seconds)
            if held_by_other and self._observed_at + duration > self._clock():
                return False  # held, and not expired as far as we can tell
            ours = holder == self.identity
            new_spec = {
                **record,
                "holderIdentity": self.identity,
                "leaseDurationSeconds": self._duration_seconds,
                "renewTime": now,
                "acquireTime": record.get("acquireTime") if ours and record.get("acquireTime") else now,
                "leaseTransitions": int(record.get("leaseTransitions") or 0) + (0 if ours else 1),
            }
            updated = await self.writer.update_lease({**lease, "spec": new_spec})
            self._observe(updated)
            return True
        except (AlreadyExists, Conflict):
            return False
        except KubeError as exc:
            log.info("leader election %s: %s", self.identity, exc)
            return False

    def _observe(self, lease: Obj) -> None:
        spec = dict(lease.get("spec") or {})
        if spec != self._observed_spec:
            self._observed_spec = spec
            self._observed_at = self._clock()
            holder = spec.get("holderIdentity") or None
            if holder != self.leader:
                self.leader = holder
                if holder and self.on_new_leader is not None:
                    self._fire(self.on_new_leader, holder)
        self._observed = lease

    async def _become_leader(self) -> None:
        log.info("leader election: %s became leader of %s/%s", self.identity, self.namespace, self.lease_name)
        self.not_leading.clear()
        self.leading.set()
        if self.on_started_leading is not None:
            self._fire(self.on_started_leading)

    async def _step_down(self) -> None:
        if not self.is_leader:
            return
        log.info("leader election: %s stopped leading %s/%s", self.identity, self.namespace, self.lease_name)
        self.leading.clear()
        self.not_leading.set()
        if self.on_stopped_leading is not None:
            self._fire(self.on_stopped_leading)

    async def _release(self) -> None:
        """Give the lease up (only if we still hold it), so a successor takes over at once.

        A renewal cut short by the stop may still have reached the API server: the lease then
        carries a newer resourceVersion than the one we saw, and the release conflicts. It is
        read again and, if it is still ours, released from there."""
        lease = self._observed
        for _ in range(3):
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            now = micro_time()
            spec = {
                **(lease.get("spec") or {}),
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
                "acquireTime": now,
                "renewTime": now,
            }
            try:
                await self.writer.update_lease({**lease, "spec": spec})
            except Conflict:
                try:
                    lease = await self.writer.get_lease(self.namespace, self.lease_name)
                except KubeError as exc:
                    log.warning("leader election %s: could not release the lease: %s", self.identity, exc)
                    return
                continue
            except KubeError as exc:
                log.warning("leader election %s: could not release the lease: %s", self.identity, exc)
                return
            log.info("leader election: %s released %s/%s", self.identity, self.namespace, self.lease_name)
            return
        log.warning("leader election %s: could not release the lease: it kept changing", self.identity)

    def _fire(self, callback: Callable[..., Any], *args: Any) -> None:
        try:
            result = callback(*args)
        except Exception:
            log.exception("leader election %s: callback failed", self.identity)
            return
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(result)
            task.add_done_callback(_log_failure)


def _log_failure(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("leader election callback failed", exc_info=task.exception())
