"""A hold (issue 16 item 4) seen where an operator looks, on the running service over HTTP: the
held gang's ``/diagnose`` and PodGroup condition name the held nodes, a job kept off them says
``NodeHeldForGang`` in both, the ``sky_gang_holds`` / ``sky_held_nodes`` metrics count it, and
all of it clears once the gang runs (the next waiting gang may hold then).

Leaf s1 = n0–n3, leaf s2 = n4 (8 GPUs and 8 HCAs each). ``z`` (one whole node) takes n4 (best
fit), ``a`` takes a node of s1; ``big`` (4 whole nodes) fits no zone and, after one failed cycle
(``reserve_after_cycles: 1``), holds n0–n3; ``b`` (one whole node) could use a free node of s1 but
is kept off it. When ``a`` ends, ``big`` runs on s1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from extender import wellknown
from extender.conf import default_policy_text
from tests import builders as b
from tests.extender.harness import Harness, harness

pytestmark = pytest.mark.anyio

Obj = dict[str, Any]
HELD = "n0–n3 (4 nodes)"


def _policy(tmp_path: Path) -> Path:
    doc = yaml.safe_load(default_policy_text())
    doc["plugins"]["topology"]["reserve_after_cycles"] = 1
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _cluster() -> list[Obj]:
    objs = [b.queue("research")]
    for i in range(5):
        objs += [b.node(f"n{i}"), b.topology(f"n{i}", ["s1" if i < 4 else "s2"])]
    return objs


async def _metrics(h: Harness) -> dict[str, float]:
    r = await h.ops("/metrics")
    assert r.status_code == 200
    return {s.name: s.value for fam in text_string_to_metric_families(r.text) for s in fam.samples}


def _condition(h: Harness, job: str) -> Obj:
    pg = h.emulator.get(wellknown.API_VERSION, wellknown.PODGROUPS, job, "default")
    conditions: list[Obj] = [c for c in pg["status"]["conditions"] if c["type"] == "Unschedulable"]
    (cond,) = conditions
    return cond


async def _diagnose(h: Harness, job: str) -> Obj:
    r = await h.ops(f"/diagnose/job/default/{job}")
    assert r.status_code == 200, r.text
    return dict(r.json())


def _quota_nodes(h: Harness, job: str, workers: int) -> list[str]:
    nodes = h.cl.quota_nodes()
    return [nodes.get(f"q-{job}-{i}", "") for i in range(workers)]


async def test_a_hold_is_visible_in_diagnose_conditions_and_metrics_and_clears_when_the_gang_runs(
    tmp_path: Path,
) -> None:
    async with harness(tmp_path, policy=str(_policy(tmp_path)), policy_reload_seconds=0) as h:
        h.apply(_cluster())
        for job in ("z", "a"):
            h.apply(b.training_job(job, 1, gpu=8, hca=8))
            await h.cycle()
        assert _quota_nodes(h, "z", 1) == ["n4"] and _quota_nodes(h, "a", 1)[0] in ("n0", "n1", "n2", "n3")
        h.apply(b.training_job("big", 4, gpu=8, hca=8))
        await h.cycle()  # its plan fails: one cycle waited
        assert (await _metrics(h))["sky_gang_holds"] == 0
        await h.cycle()  # waited enough: it holds s1
        h.apply(b.training_job("b", 1, gpu=8, hca=8))
        await h.cycle()
        await h.cycle()

        # the hold leads, then why the gang does not fit now — in /diagnose, the condition, and
        # what the extender tells kube-scheduler for its pods
        big = await _diagnose(h, "big")
        assert big["stage"] == "ZoneSelection" and big["reason"] == "HoldingNodes", big
        assert big["message"].startswith(f"HoldingNodes({HELD} for default/big); NoZoneFits(no zone holds"), big
        cond = _condition(h, "big")
        assert cond["status"] == "True" and cond["reason"] == "HoldingNodes"
        assert cond["message"] == f"ZoneSelection: {big['message']}", cond
        pod = h.pod("big-worker-0")
        reply = (await h.post("filter", {"Pod": pod, "Nodes": None, "NodeNames": ["n1"]})).json()
        why = f"HoldingNodes(quota q-big-0 not bound: {HELD} for default/big)"
        assert reply["FailedAndUnresolvableNodes"] == {"n1": why}, reply

        kept = await _diagnose(h, "b")
        assert kept["reason"] == "NodeHeldForGang", kept
        assert "default/big" in kept["message"], kept
        assert _condition(h, "b")["reason"] == "NodeHeldForGang"
        assert _quota_nodes(h, "b", 1) == [""]  # three nodes of s1 are free, and held

        m = await _metrics(h)
        assert (m["sky_gang_holds"], m["sky_held_nodes"]) == (1, 4)

        # a ends: its pod and quota go; the held leaf is whole and big runs there
        h.emulator.delete("v1", "pods", "a-worker-0", "default")
        h.emulator.delete(wellknown.API_VERSION, wellknown.QUOTAS, "q-a-0")
        await h.cl.settle()
        await h.cycle()
        assert sorted(_quota_nodes(h, "big", 4)) == ["n0", "n1", "n2", "n3"]
        assert _condition(h, "big")["status"] == "False"
        assert _hold_record(h, "big") is None
        # big's hold ended as it was placed; b fits nowhere now and has waited: it holds one node
        # (in that cycle when planned after big — the order of the two depends on their creation
        # times, which the API server sets —, else in the next)
        await h.cycle()
        m = await _metrics(h)
        assert (m["sky_gang_holds"], m["sky_held_nodes"]) == (1, 1)
        assert _hold_record(h, "b") is not None
        assert (await _diagnose(h, "b"))["reason"] != "NodeHeldForGang"  # no hold keeps it off now


async def test_a_displaced_hold_leaves_the_diagnosis_condition_and_record_of_its_gang(tmp_path: Path) -> None:
    """The same cluster; ``big`` holds s1, then ``urgent`` (4 whole nodes, priority 10) has waited
    as long and takes its place (``max_holds`` 1). Where an operator looks, the hold is
    ``urgent``'s now: its /diagnose, condition and ``status.hold`` name n0–n3; ``big``'s no longer
    do, and the metrics still count one hold."""
    async with harness(tmp_path, policy=str(_policy(tmp_path)), policy_reload_seconds=0) as h:
        h.apply(_cluster())
        for job in ("z", "a"):
            h.apply(b.training_job(job, 1, gpu=8, hca=8))
            await h.cycle()
        h.apply(b.training_job("big", 4, gpu=8, hca=8))
        await h.cycle()
        await h.cycle()
        assert _hold_record(h, "big") is not None
        urgent = b.training_job("urgent", 4, gpu=8, hca=8)
        for o in urgent:
            if o["kind"] == "Pod":
                o["spec"]["priority"] = 10
        h.apply(urgent)
        await h.cycle()
        await h.cycle()

        assert _hold_record(h, "big") is None
        assert (_hold_record(h, "urgent") or {}).get("nodes") == ["n0", "n1", "n2", "n3"]
        assert f"HoldingNodes({HELD} for default/urgent)" in (await _diagnose(h, "urgent"))["message"]
        assert f"HoldingNodes({HELD} for default/urgent)" in _condition(h, "urgent")["message"]
        assert "HoldingNodes" not in (await _diagnose(h, "big"))["message"]
        assert "HoldingNodes" not in _condition(h, "big")["message"]
        m = await _metrics(h)
        assert (m["sky_gang_holds"], m["sky_held_nodes"]) == (1, 4)


def _hold_record(h: Harness, job: str) -> Obj | None:
    pg = h.emulator.get(wellknown.API_VERSION, wellknown.PODGROUPS, job, "default")
    hold: Obj | None = (pg.get("status") or {}).get("hold")
    return hold
