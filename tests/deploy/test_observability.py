"""The chart's observability pieces: the Grafana dashboard reads only series the service exports,
its optional ConfigMap carries the file, and log settings accept any case."""

from __future__ import annotations

import json
import re

import pytest

from extender.metrics import Metrics
from tests.deploy.chart import CHART, find, helm_lint, one, render

_DASHBOARD = CHART / "files" / "grafana-dashboard.json"
_SERIES = re.compile(r"\b((?:sky|process|python)_[a-z_]+)\b")
_SUFFIXES = ("_bucket", "_count", "_sum", "_total")


def _exported() -> set[str]:
    m = Metrics()
    m.watch_queues(lambda: None)
    names: set[str] = set()
    for family in m.registry.collect():
        names.add(family.name)
        names.update(s.name for s in family.samples)
    for family in m._queues.describe() if m._queues else ():
        names.add(family.name)
    return names


def test_every_dashboard_query_reads_an_exported_series() -> None:
    doc = json.loads(_DASHBOARD.read_text(encoding="utf-8"))
    exported = _exported()
    queried = set()
    for panel in doc["panels"]:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            queried.update(_SERIES.findall(target["expr"]))
    for var in doc["templating"]["list"]:
        queried.update(_SERIES.findall(str(var.get("query", ""))))
    missing = {q for q in queried if q not in exported and not any(q.removesuffix(s) in exported for s in _SUFFIXES)}
    assert not missing, f"the dashboard queries series nobody exports: {sorted(missing)}"
    assert {"sky_queue_allocated", "sky_webhook_request_seconds_bucket", "sky_build_info"} <= queried


def test_dashboard_configmap_is_optional_and_carries_the_file() -> None:
    assert not [o for o in render() if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-dashboard")]
    objs = render({"metrics": {"grafanaDashboard": {"enabled": True, "namespace": "monitoring"}}})
    cm = one(objs, "ConfigMap", "sky-scheduler-dashboard")
    assert cm["metadata"]["namespace"] == "monitoring"
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(cm["data"]["sky-scheduler.json"]) == json.loads(_DASHBOARD.read_text(encoding="utf-8"))


@pytest.mark.parametrize("level", ["info", "INFO", "Debug"])
def test_log_levels_in_any_case_reach_every_container_in_lower_case(level: str) -> None:
    values = {
        "scheduler": {"serve": {"logLevel": level, "logFormat": "json"}},
        "discovery": {"roce": {"logLevel": level}, "ib": {"logLevel": level, "logFormat": "json"}},
    }
    objs = render(values)
    args = [
        a
        for kind in ("Deployment", "DaemonSet")
        for o in find(objs, kind)
        for c in o["spec"]["template"]["spec"]["containers"]
        for a in c.get("args", [])
    ]
    levels = [a for a in args if a.startswith("--log-level=")]
    assert len(levels) == 3 and set(levels) == {f"--log-level={level.lower()}"}
    assert sorted(a for a in args if a.startswith("--log-format=")) == ["--log-format=json"] * 2 + ["--log-format=text"]


def test_an_unknown_level_fails_lint() -> None:
    proc = helm_lint({"scheduler": {"serve": {"logLevel": "loud"}}})
    assert proc.returncode != 0 and "logLevel" in proc.stdout + proc.stderr
