"""Policy hot reload: ``serve --policy FILE`` looks at FILE every ``--policy-reload-seconds``.

The Helm chart mounts the policy from a ConfigMap. kubelet updates such a volume by writing the
new files into a fresh timestamped directory and swapping the ``..data`` symlink the file names
point through, so the mtime of the path we open need not change, and the file may be missing for
a moment. Changes are therefore detected by content: the SHA-256 of the file's bytes.

A changed file goes through the loader used at start (:func:`extender.conf.load_policy_bytes`):

* valid → ``apply`` makes it the policy of every component (``Runtime.swap_policy``), one info
  line says what changed; ``sky_policy_reload_total{result="ok"}``;
* invalid → the running policy stays; one error line with the loader's message (where and why),
  ``sky_policy_reload_total{result="invalid"}``, ``sky_policy_reload_failing`` 1 and the error
  in ``GET /policy`` until the file is fixed (or put back to the policy in effect);
* unreadable (missing, a directory, no permission) → the same, as ``result="unreadable"``.

Each distinct failure is logged and counted once, not once per look. Readiness never depends on
the policy file: the policy in effect keeps working.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from extender.cache.convert import format_time
from extender.conf import PolicyError, PolicyUnreadable, load_policy_bytes, policy_sha256, read_policy_file
from extender.framework.policy import Policy
from extender.metrics import Metrics

__all__ = ["PolicyStatus", "PolicyWatcher", "ReloadError", "describe_change"]

log = logging.getLogger(__name__)

UNCHANGED = "unchanged"


@dataclass(frozen=True, slots=True)
class ReloadError:
    """Why the policy file on disk is not the policy in effect."""

    result: str  # "invalid" or "unreadable"
    message: str  # the loader's message: which file, where in it and why
    sha256: str  # of the rejected content ("" when the file could not be read)
    at: float  # epoch seconds, when it was first seen


@dataclass(slots=True)
class PolicyStatus:
    """Where the policy in effect came from and how reloading goes; shown by ``GET /policy``."""

    source: str  # the file it was read from, "built-in", or the name given with a policy object
    sha256: str  # of the bytes it was loaded from ("" when given as an object)
    loaded_at: float  # epoch seconds
    file: str = ""  # the watched file ("" when there is none)
    reload_seconds: float = 0.0  # 0: not watched
    last_check: float = 0.0  # epoch seconds of the watcher's last look (0: none yet)
    error: ReloadError | None = None

    def to_json(self, policy: Policy) -> dict[str, Any]:
        err = self.error
        return {
            "source": self.source,
            "sha256": self.sha256 or None,
            "loadedAt": format_time(self.loaded_at) or None,
            "actions": list(policy.action_names),
            "plugins": sorted(policy.plugins),
            "stages": {k: s.expression for k, s in policy.stages.items() if s.expression},
            "reload": {
                "file": self.file or None,
                "periodSeconds": self.reload_seconds,
                "lastCheck": format_time(self.last_check) or None,
                "lastError": None
                if err is None
                else {
                    "result": err.result,
                    "message": err.message,
                    "sha256": err.sha256 or None,
                    "at": format_time(err.at),
                },
            },
        }


def _args(obj: object) -> Any:
    return getattr(obj, "args", None)


def describe_change(old: Policy, new: Policy) -> str:
    """What differs at the top level: actions (order, arguments), plugins (set, arguments), stages."""
    parts: list[str] = []
    if old.action_names != new.action_names:
        parts.append(f"actions {', '.join(old.action_names)} → {', '.join(new.action_names)}")
    else:
        changed = [a.NAME for a, b in zip(old.actions, new.actions, strict=True) if _args(a) != _args(b)]
        if changed:
            parts.append(f"arguments of action(s) {', '.join(changed)}")
    added = sorted(set(new.plugins) - set(old.plugins))
    removed = sorted(set(old.plugins) - set(new.plugins))
    if added:
        parts.append(f"plugin(s) added: {', '.join(added)}")
    if removed:
        parts.append(f"plugin(s) removed: {', '.join(removed)}")
    retuned = sorted(n for n in set(old.plugins) & set(new.plugins) if _args(old.plugins[n]) != _args(new.plugins[n]))
    if retuned:
        parts.append(f"arguments of plugin(s) {', '.join(retuned)}")
    stages = sorted(
        s for s in set(old.stages) | set(new.stages) if _expr(old, s) != _expr(new, s)
    )  # generated defaults included: a plugin added to a stage changes its expression
    if stages:
        parts.append(f"stage(s) {', '.join(stages)}")
    return "; ".join(parts) or "no effective change (formatting or comments)"


def _expr(policy: Policy, stage: str) -> str:
    s = policy.stages.get(stage)
    return s.expression if s is not None else ""


class PolicyWatcher:
    """Looks at ``path`` every ``period`` seconds and applies a changed, valid policy.

    ``apply`` must make the policy the one every component uses from its next cycle or request
    on; it is called on the event loop, between awaits (see ``Runtime.swap_policy``).
    ``baseline``: the SHA-256 of the content the policy in effect was loaded from (default:
    ``status.sha256``); content with this hash is not reloaded. ``spot_resource``: serve's
    ``--spot-resource``, which a policy must not contradict (:func:`extender.conf.check_settings`).
    """

    def __init__(
        self,
        path: str,
        *,
        period: float,
        status: PolicyStatus,
        current: Callable[[], Policy],
        apply: Callable[[Policy], None],
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.time,
        baseline: str | None = None,
        spot_resource: str | None = None,
    ) -> None:
        self.path = path
        self.spot_resource = spot_resource
        self.period = period
        self.status = status
        self.current = current
        self.apply = apply
        self.metrics = metrics
        self.clock = clock
        self._applied = status.sha256 if baseline is None else baseline
        status.file = path
        status.reload_seconds = period

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.period)
            if stop.is_set():
                return
            try:
                self.check()
            except Exception:  # a bug must not end reloading: the next look starts clean
                log.exception("policy reload: checking %s failed", self.path)

    def check(self) -> str:
        """One look (synchronous: the swap happens before any other task runs): ``unchanged``,
        or the result counted (``ok``, ``invalid``, ``unreadable``)."""
        now = self.clock()
        self.status.last_check = now
        try:
            data = read_policy_file(self.path)
        except PolicyUnreadable as exc:
            return self._failed("unreadable", str(exc), "", now)
        sha = policy_sha256(data)
        err = self.status.error
        if sha == self._applied:
            if err is not None:  # readable again, or put back: nothing to load
                log.info(
                    "policy file %s is the policy in effect again (sha256 %s); cleared: %s",
                    self.path,
                    sha[:12],
                    err.message,
                )
                self._clear()
            return UNCHANGED
        if err is not None and err.sha256 == sha:
            return UNCHANGED  # the same bad content: reported already
        try:
            policy = load_policy_bytes(data, self.path, spot_resource=self.spot_resource)
        except PolicyError as exc:
            return self._failed("invalid", str(exc), sha, now)
        old = self.current()
        self.apply(policy)
        self._applied = sha
        st = self.status
        st.source, st.sha256, st.loaded_at = self.path, sha, now
        self._clear()
        if self.metrics is not None:
            self.metrics.policy_reloads.labels(result="ok").inc()
            self.metrics.set_policy(sha, self.path, now)
        log.info("policy reloaded from %s (sha256 %s): %s", self.path, sha[:12], describe_change(old, policy))
        return "ok"

    def _failed(self, result: str, message: str, sha: str, now: float) -> str:
        err = self.status.error
        if err is None or (err.result, err.message, err.sha256) != (result, message, sha):
            self.status.error = ReloadError(result, message, sha, now)
            if self.metrics is not None:
                self.metrics.policy_reloads.labels(result=result).inc()
            keeping = f"keeping the policy in effect (sha256 {self.status.sha256[:12] or 'n/a'})"
            if result == "invalid":
                log.error("policy reload rejected, %s: %s", keeping, message)
            else:
                log.warning("policy reload: %s; %s", message, keeping)
        if self.metrics is not None:
            self.metrics.policy_failing.set(1)
        return result

    def _clear(self) -> None:
        self.status.error = None
        if self.metrics is not None:
            self.metrics.policy_failing.set(0)
