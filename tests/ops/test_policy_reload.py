"""Policy hot reload: the running service on the emulator re-reads its ``--policy`` file every
``--policy-reload-seconds``; a changed, valid file becomes the policy of the binder, the
extender's sessions and the webhook; an invalid, missing or unreadable one is reported (log,
``sky_policy_*`` metrics, ``GET /policy``) while the running policy stays — readiness untouched.
Real files, the real event loop, kubelet's ``..data`` symlink swap included."""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest
from prometheus_client.parser import text_string_to_metric_families

from extender.cache.cache import ClusterCache
from extender.conf import PolicyError, default_policy_text, load_policy_file, load_policy_text
from extender.metrics import Metrics
from extender.policy_reload import PolicyStatus, PolicyWatcher, describe_change
from extender.scheduler import Scheduler
from extender.settings import ServeSettings, add_serve_arguments, settings_from_args
from tests import builders as b
from tests.extender.harness import Harness, harness
from tests.waiting import eventually

pytestmark = pytest.mark.anyio

PERIOD = 0.05  # seconds between the watcher's looks in these tests

DEFAULT = default_policy_text()


def _variant(old: str, new: str, text: str = DEFAULT) -> str:
    assert old in text, old
    return text.replace(old, new)


# other release_quota arguments and another stage expression
RETUNED = _variant(
    "qn.node_order: sum(topology, 2*binpack, nodeorder, sylas)",
    "qn.node_order: sum(topology, 5*binpack, nodeorder, sylas)",
    _variant("unschedulable_cycles: 30", "unschedulable_cycles: 7"),
)
# another actions list: no fix_quota_binding
FEWER_ACTIONS = _variant("  - fix_quota_binding: {min_interval_seconds: 10}\n", "")
# invalid: a misspelt action
INVALID = _variant("  - allocate_quota\n", "  - allocate_quotas\n")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


async def _periods(n: int = 5) -> None:
    await anyio.sleep(n * PERIOD)


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


async def _metrics(h: Harness) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    r = await h.ops("/metrics")
    assert r.status_code == 200
    return _samples(r.text)


def _reloads(m: dict[tuple[str, tuple[tuple[str, str], ...]], float], result: str) -> float:
    return m[("sky_policy_reload_total", (("result", result),))]


def _info(m: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> list[dict[str, str]]:
    return [dict(labels) for (name, labels), v in m.items() if name == "sky_policy_info" and v == 1]


def _uses(h: Harness) -> set[int]:
    """Identities of the policies the binder's scheduler, the extender's sessions and the webhook run."""
    assert h.rt.webhook_state is not None
    return {id(h.rt.scheduler.policy), id(h.state.policy), id(h.state.session().policy), id(h.rt.webhook_state.policy)}


async def _expect_healthy(h: Harness) -> None:
    assert (await h.ops("/healthz")).status_code == 200
    r = await h.ops("/readyz")
    assert (r.status_code, r.json()["ready"]) == (200, True)


# --------------------------------------------------------------------------------------------
# the running service
# --------------------------------------------------------------------------------------------


async def test_edits_apply_bad_edits_are_refused_and_a_missing_file_is_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """One service through four edits of its policy file, each checked by a step below."""
    caplog.set_level(logging.INFO, logger="extender.policy_reload")
    path = tmp_path / "policy.yaml"
    path.write_text(DEFAULT)
    async with harness(tmp_path, policy=str(path), policy_reload_seconds=PERIOD) as h:
        h.apply(b.seed_cluster())
        await h.cl.settle()
        first, ssn = await _loaded_at_start(h, path)
        path.write_text(RETUNED)
        retuned = await _another_valid_policy(h, path, caplog, first, ssn)
        path.write_text(INVALID)
        await _an_invalid_edit(h, path, caplog, retuned)
        path.unlink()
        await _the_file_disappears(h, path, caplog, retuned)
        path.write_text(FEWER_ACTIONS)
        await _a_valid_file_again(h, path, retuned)


async def _loaded_at_start(h: Any, path: Path) -> tuple[Any, Any]:
    """The file's policy is in effect, visible in metrics and /policy; the session is reused."""
    rt = h.rt
    first = rt.policy
    assert _uses(h) == {id(first)}
    m = await _metrics(h)
    assert _info(m) == [{"sha256": _sha(DEFAULT), "source": str(path)}]
    assert [_reloads(m, r) for r in ("ok", "invalid", "unreadable")] == [0, 0, 0]
    doc = (await h.ops("/policy")).json()
    assert doc["source"] == str(path) and doc["sha256"] == _sha(DEFAULT)
    assert doc["reload"] == {
        "file": str(path),
        "periodSeconds": PERIOD,
        "lastCheck": doc["reload"]["lastCheck"],
        "lastError": None,
    }
    ssn = h.state.session()
    assert h.state.session() is ssn  # reused while nothing changes ...
    return first, ssn


async def _another_valid_policy(h: Any, path: Path, caplog: pytest.LogCaptureFixture, first: Any, ssn: Any) -> Any:
    """1. Another valid policy (other release_quota arguments, another stage expression) was written:
    it replaces the one in effect."""
    rt = h.rt
    await eventually(lambda: rt.policy is not first)
    retuned = rt.policy
    assert _uses(h) == {id(retuned)}  # ... and not once the policy has
    assert h.state.session() is not ssn
    assert rt.scheduler.policy.actions[-1].args.unschedulable_cycles == 7
    node_order = h.state.session().policy.stages["qn.node_order"].expression
    assert node_order == "sum(topology, 5*binpack, nodeorder, sylas)"
    m = await _metrics(h)
    assert _reloads(m, "ok") == 1 and m[("sky_policy_reload_failing", ())] == 0
    assert _info(m) == [{"sha256": _sha(RETUNED), "source": str(path)}]
    assert m[("sky_policy_last_reload_timestamp_seconds", ())] == pytest.approx(rt.policy_status.loaded_at)
    reloaded = [r.getMessage() for r in caplog.records if "policy reloaded" in r.getMessage()]
    assert len(reloaded) == 1 and _sha(RETUNED)[:12] in reloaded[0]
    assert "arguments of action(s) release_quota" in reloaded[0] and "stage(s) qn.node_order" in reloaded[0]
    return retuned


async def _an_invalid_edit(h: Any, path: Path, caplog: pytest.LogCaptureFixture, retuned: Any) -> None:
    """2. An invalid edit was written: refused once, the running policy kept, visible; readiness
    untouched."""
    rt = h.rt
    await eventually(lambda: rt.policy_status.error is not None)
    await _periods()
    assert rt.policy is retuned and _uses(h) == {id(retuned)}
    errors = [r for r in caplog.records if r.name == "extender.policy_reload" and r.levelno >= logging.ERROR]
    assert len(errors) == 1, [r.getMessage() for r in errors]  # once, not once per look
    assert f"{path}: actions[4]: unknown action 'allocate_quotas'" in errors[0].getMessage()
    m = await _metrics(h)
    assert (_reloads(m, "ok"), _reloads(m, "invalid")) == (1, 1)
    assert m[("sky_policy_reload_failing", ())] == 1
    assert _info(m) == [{"sha256": _sha(RETUNED), "source": str(path)}]  # still the one in effect
    doc = (await h.ops("/policy")).json()
    assert doc["sha256"] == _sha(RETUNED)
    err = doc["reload"]["lastError"]
    assert err["result"] == "invalid" and err["sha256"] == _sha(INVALID)
    assert err["message"].startswith(f"{path}: actions[4]: unknown action 'allocate_quotas'")
    await _expect_healthy(h)
    # the binder still cycles with the policy in effect
    report = await h.cycle()
    assert list(report.result.timings) == list(retuned.action_names)


async def _the_file_disappears(h: Any, path: Path, caplog: pytest.LogCaptureFixture, retuned: Any) -> None:
    """3. The file was removed: the policy is kept, reported once as unreadable."""
    rt = h.rt
    await eventually(lambda: rt.policy_status.error is not None and rt.policy_status.error.result == "unreadable")
    await _periods()
    assert rt.policy is retuned
    m = await _metrics(h)
    assert (_reloads(m, "ok"), _reloads(m, "invalid"), _reloads(m, "unreadable")) == (1, 1, 1)
    assert m[("sky_policy_reload_failing", ())] == 1
    err = (await h.ops("/policy")).json()["reload"]["lastError"]
    assert err["result"] == "unreadable" and "cannot read the policy file" in err["message"]
    assert err["sha256"] is None
    warned = [r for r in caplog.records if r.name == "extender.policy_reload" and r.levelno == logging.WARNING]
    assert len(warned) == 1 and "cannot read the policy file" in warned[0].getMessage()
    await _expect_healthy(h)


async def _a_valid_file_again(h: Any, path: Path, retuned: Any) -> None:
    """4. A valid file was written again: reloaded, the error cleared."""
    rt = h.rt
    await eventually(lambda: rt.policy is not retuned)
    fewer = rt.policy
    assert _uses(h) == {id(fewer)}
    assert "fix_quota_binding" not in fewer.action_names
    report = await h.cycle()  # the binder runs the new actions
    assert list(report.result.timings) == list(fewer.action_names)
    m = await _metrics(h)
    assert (_reloads(m, "ok"), _reloads(m, "invalid"), _reloads(m, "unreadable")) == (2, 1, 1)
    assert m[("sky_policy_reload_failing", ())] == 0
    doc = (await h.ops("/policy")).json()
    assert doc["sha256"] == _sha(FEWER_ACTIONS) and doc["reload"]["lastError"] is None
    assert doc["actions"] == list(fewer.action_names)


async def test_kubelets_symlink_swap_is_picked_up_by_content(tmp_path: Path) -> None:
    """A ConfigMap volume: ``policy.yaml → ..data/policy.yaml``, ``..data → ..<timestamp>``.
    kubelet writes a new timestamped directory and renames a new ``..data`` over the old one;
    here the new file even has the old one's mtime, so only its content tells."""
    volume = tmp_path / "policy"
    volume.mkdir()
    stamp = 1_700_000_000

    def write_version(name: str, text: str) -> Path:
        d = volume / name
        d.mkdir()
        f = d / "policy.yaml"
        f.write_text(text)
        os.utime(f, (stamp, stamp))
        return d

    def swap_to(name: str, text: str) -> None:
        old = (volume / "..data").resolve()
        write_version(name, text)
        os.symlink(name, volume / "..data_tmp")
        os.replace(volume / "..data_tmp", volume / "..data")  # atomic, as kubelet's AtomicWriter
        shutil.rmtree(old)

    write_version("..2024_01_01_00_00_00.000000001", DEFAULT)
    os.symlink("..2024_01_01_00_00_00.000000001", volume / "..data")
    os.symlink("..data/policy.yaml", volume / "policy.yaml")
    path = volume / "policy.yaml"
    async with harness(tmp_path, policy=str(path), policy_reload_seconds=PERIOD) as h:
        rt = h.rt
        first = rt.policy
        before = (os.stat(path).st_mtime, os.lstat(path).st_mtime)
        swap_to("..2024_01_01_00_05_00.000000002", RETUNED)
        assert (os.stat(path).st_mtime, os.lstat(path).st_mtime) == before  # mtimes tell nothing
        await eventually(lambda: rt.policy is not first)
        assert rt.policy_status.sha256 == _sha(RETUNED) and rt.policy_status.error is None
        assert rt.scheduler.policy is rt.policy and h.state.session().policy is rt.policy
        # and again: each swap is one reload, the content the only clue
        second = rt.policy
        swap_to("..2024_01_01_00_10_00.000000003", FEWER_ACTIONS)
        await eventually(lambda: rt.policy is not second)
        assert rt.policy.action_names == load_policy_text(FEWER_ACTIONS).action_names
        await _periods()
        assert rt.metrics.policy_reloads.labels(result="ok")._value.get() == 2
        assert rt.metrics.policy_reloads.labels(result="unreadable")._value.get() == 0


async def test_no_file_no_watcher_and_zero_means_never(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(DEFAULT)
    async with harness(tmp_path, policy=str(path), policy_reload_seconds=0) as h:
        assert h.rt.policy_watcher is None
        first = h.rt.policy
        path.write_text(RETUNED)
        await anyio.sleep(0.3)
        assert h.rt.policy is first
        doc = (await h.ops("/policy")).json()
        assert doc["reload"]["periodSeconds"] == 0 and doc["sha256"] == _sha(DEFAULT)
    async with harness(tmp_path / "built-in") as h:
        assert h.rt.policy_watcher is None
        doc = (await h.ops("/policy")).json()
        assert doc["source"] == "built-in" and doc["sha256"] == _sha(DEFAULT)
        assert doc["reload"] == {"file": None, "periodSeconds": 0.0, "lastCheck": None, "lastError": None}
        assert doc["actions"] == list(h.rt.policy.action_names)
        m = await _metrics(h)
        assert _info(m) == [{"sha256": _sha(DEFAULT), "source": "built-in"}]


# --------------------------------------------------------------------------------------------
# the pieces, without a loop
# --------------------------------------------------------------------------------------------


def _watcher(path: Path, metrics: Metrics | None = None) -> tuple[PolicyWatcher, dict[str, Any]]:
    box: dict[str, Any] = {"policy": load_policy_file(path), "applied": 0}
    status = PolicyStatus(source=str(path), sha256=_sha(path.read_text()), loaded_at=1.0)

    def apply(p: Any) -> None:
        box["policy"], box["applied"] = p, box["applied"] + 1

    w = PolicyWatcher(str(path), period=1.0, status=status, current=lambda: box["policy"], apply=apply, metrics=metrics)
    return w, box


def _message(w: PolicyWatcher) -> str:
    """The reload error on record ("" when none)."""
    err = w.status.error
    return "" if err is None else err.message


def test_watcher_checks_by_content_and_reports_each_failure_once(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(DEFAULT)
    metrics = Metrics()
    w, box = _watcher(path, metrics)
    count = metrics.policy_reloads.labels
    assert w.check() == "unchanged" and box["applied"] == 0
    path.write_text(DEFAULT.replace("\n", "\n\n"))  # same policy, other bytes: applied (no effective change)
    assert w.check() == "ok" and box["applied"] == 1
    path.write_text(INVALID)
    assert [w.check() for _ in range(3)] == ["invalid", "unchanged", "unchanged"]
    assert count(result="invalid")._value.get() == 1
    assert "allocate_quotas" in _message(w)
    path.write_text("actions: [allocate_job\n")  # another invalid content: reported too
    assert w.check() == "invalid" and count(result="invalid")._value.get() == 2
    assert "not valid YAML" in _message(w)
    path.write_bytes(b"actions: [\xff]\n")
    assert w.check() == "invalid" and "not UTF-8" in _message(w)
    path.unlink()
    assert [w.check() for _ in range(3)] == ["unreadable", "unreadable", "unreadable"]
    assert count(result="unreadable")._value.get() == 1 and metrics.policy_failing._value.get() == 1
    path.mkdir()  # another reason it cannot be read: reported
    assert w.check() == "unreadable" and count(result="unreadable")._value.get() == 2
    path.rmdir()
    path.write_text(DEFAULT.replace("\n", "\n\n"))  # back to the content in effect: nothing to load
    assert w.check() == "unchanged" and box["applied"] == 1
    assert _message(w) == "" and metrics.policy_failing._value.get() == 0
    assert count(result="ok")._value.get() == 1


def test_describe_change_names_the_top_level_differences() -> None:
    default, retuned, fewer = (load_policy_text(t) for t in (DEFAULT, RETUNED, FEWER_ACTIONS))
    assert describe_change(default, retuned) == "arguments of action(s) release_quota; stage(s) qn.node_order"
    assert describe_change(default, fewer).startswith("actions fix_quota_binding, allocate_job")
    no_binpack = load_policy_text(
        DEFAULT.replace("  binpack: {}\n", "")
        .replace("2*binpack, ", "")
        .replace("sum(binpack, nodeorder, 2*sylas)", "sum(nodeorder, 2*sylas)")
    )
    assert describe_change(default, no_binpack) == "plugin(s) removed: binpack; stage(s) qn.node_order, tn.node_order"
    assert describe_change(default, load_policy_text(DEFAULT)) == "no effective change (formatting or comments)"


def test_scheduler_swap_keeps_memory_and_looks_at_every_quota_again() -> None:
    cache = ClusterCache()
    b.feed(cache, [b.node("n0"), b.quota("q0"), b.pod("p0", quota="q0")])
    sched = Scheduler(load_policy_text(DEFAULT))
    sched.run_once(cache.snapshot())
    sched.memory.backoff["default/x"] = cache.clock() + 1000
    snap = cache.snapshot()
    sched.run_once(snap)
    assert snap.changed_quotas is not None  # incremental after the first cycle
    new = load_policy_text(FEWER_ACTIONS)
    sched.swap_policy(new)
    assert sched.policy is new and "default/x" in sched.memory.backoff
    snap = cache.snapshot()
    result = sched.run_once(snap)
    assert snap.changed_quotas is None  # the first cycle of a policy looks at everything
    assert list(result.timings) == list(new.action_names) and result.session.policy is new


def test_policy_reload_seconds_flag() -> None:
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_serve_arguments(parser)
    assert ServeSettings().policy_reload_seconds == 10.0
    no_hook = ["--webhook-port", "0"]
    ns = parser.parse_args([*no_hook, "--policy-reload-seconds", "0"])
    assert settings_from_args(ns, env={}).policy_reload_seconds == 0.0
    env = {"SKY_POLICY_RELOAD_SECONDS": "2.5"}
    assert settings_from_args(parser.parse_args(no_hook), env=env).policy_reload_seconds == 2.5
    for bad in ("-1", "nan"):
        with pytest.raises(ValueError, match=r"^--policy-reload-seconds must be >= 0$"):
            settings_from_args(parser.parse_args([*no_hook, "--policy-reload-seconds", bad]), env={})


def test_start_and_reload_share_the_loader(tmp_path: Path) -> None:
    """What refuses a reload refuses a start, with the same message."""
    path = tmp_path / "policy.yaml"
    path.write_text(INVALID)
    with pytest.raises(PolicyError) as at_start:
        load_policy_file(path)
    path.write_text(DEFAULT)
    w, _ = _watcher(path)
    path.write_text(INVALID)
    assert w.check() == "invalid"
    assert w.status.error is not None and w.status.error.message == str(at_start.value)
