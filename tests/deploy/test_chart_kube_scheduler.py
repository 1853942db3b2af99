"""The chart's kube-scheduler: its KubeSchedulerConfiguration checked against the v1 types, the
extender it names, and the image following the cluster version."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.deploy import kubescheduler
from tests.deploy.chart import (
    ALL_VARIANTS,
    KUBE_VERSION,
    NAMESPACE,
    Obj,
    container,
    helm_template,
    one,
    parse_documents,
    render_variant,
)
from tests.deploy.rendered import serve_args


def _scheduler_config(objs: Sequence[Obj]) -> dict[str, Any]:
    cm = one(objs, "ConfigMap", "sky-scheduler-config")
    config: dict[str, Any] = yaml.safe_load(cm["data"]["scheduler-config.yaml"])
    return config


@pytest.mark.parametrize("variant", ALL_VARIANTS)
def test_kube_scheduler_configuration_matches_the_v1_types(variant: str) -> None:
    cfg = _scheduler_config(render_variant(variant))
    errors = sorted(jsonschema.Draft7Validator(kubescheduler.SCHEMA).iter_errors(cfg), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors)
    assert not kubescheduler.semantic_problems(cfg)


def test_kube_scheduler_configuration_contents() -> None:
    cfg = _scheduler_config(render_variant("default"))
    le = cfg["leaderElection"]
    assert le == {
        "leaderElect": True,
        "resourceLock": "leases",
        "resourceName": "sky-scheduler",
        "resourceNamespace": NAMESPACE,
        "leaseDuration": "15s",
        "renewDeadline": "10s",
        "retryPeriod": "2s",
    }
    assert cfg["profiles"] == [{"schedulerName": "sky-scheduler", "percentageOfNodesToScore": 100}]
    (ext,) = cfg["extenders"]
    assert ext == {
        "urlPrefix": "http://127.0.0.1:8888",
        "filterVerb": "filter",
        "prioritizeVerb": "prioritize",
        "preemptVerb": "preempt",
        "bindVerb": "bind",
        "weight": 10,
        "enableHTTPS": False,
        "httpTimeout": "10s",
        "nodeCacheCapable": True,
        "ignorable": False,
    }
    managed = _scheduler_config(render_variant("everything"))["extenders"][0]["managedResources"]
    assert managed == [{"name": "nvidia.com/gpu", "ignoredByScheduler": False}]


def test_the_schema_catches_mis_cased_and_unknown_fields() -> None:
    """The schema is only worth something if it rejects what kube-scheduler's strict decoder rejects."""
    good = _scheduler_config(render_variant("default"))
    validator = jsonschema.Draft7Validator(kubescheduler.SCHEMA)
    assert validator.is_valid(good)
    mutations: tuple[Callable[[dict[str, Any]], None], ...] = (
        lambda c: c["extenders"][0].update(enableHttps=c["extenders"][0].pop("enableHTTPS")),
        lambda c: c["extenders"][0].update(nodecachecapable=True),
        lambda c: c["extenders"][0].update(httpTimeout=10),
        lambda c: c["extenders"][0].update(weight=0),
        lambda c: c["leaderElection"].update(resourceLock="endpoints"),
        lambda c: c["profiles"][0].update(percentageOfNodesToScore=101),
        lambda c: c.update(apiVersion="kubescheduler.config.k8s.io/v1beta3"),
        lambda c: c["extenders"][0].update(managedResources=[{"name": "gpu"}]),
    )
    for mutate in mutations:
        bad = yaml.safe_load(yaml.safe_dump(good))
        mutate(bad)
        assert not validator.is_valid(bad), bad
    contended = yaml.safe_load(yaml.safe_dump(good))
    contended["leaderElection"].update(resourceNamespace="kube-system", resourceName="kube-scheduler")
    assert kubescheduler.semantic_problems(contended)


@pytest.mark.parametrize("variant", [v for v in ALL_VARIANTS if not v.startswith("separate")])
def test_extender_url_is_the_serve_containers_extender_listener(variant: str) -> None:
    """Same-pod layout; tests/deploy/test_separate_layout.py follows the separate layout's URL."""
    objs = render_variant(variant)
    ext = _scheduler_config(objs)["extenders"][0]
    serve = serve_args(objs)
    assert ext["urlPrefix"] == f"http://{serve.extender_address}:{serve.extender_port}"
    assert serve.extender_address == "127.0.0.1", "the extender is plain HTTP: loopback only"
    assert ext["enableHTTPS"] is False
    ports = container(one(objs, "Deployment", "sky-scheduler"), "sky-scheduler")["ports"]
    assert serve.extender_port not in {p["containerPort"] for p in ports}, "the extender port is not exposed"


def test_kube_scheduler_container_reads_the_rendered_config() -> None:
    objs = render_variant("default")
    dep = one(objs, "Deployment", "sky-scheduler")
    ks = container(dep, "kube-scheduler")
    assert ks["image"] == f"registry.k8s.io/kube-scheduler:v{KUBE_VERSION}", "defaults to the cluster's version"
    config_arg = next(a for a in ks["args"] if a.startswith("--config="))
    path = Path(config_arg.split("=", 1)[1])
    mount = next(m for m in ks["volumeMounts"] if m["name"] == "scheduler-config")
    assert str(path.parent) == mount["mountPath"]
    volume = next(v for v in dep["spec"]["template"]["spec"]["volumes"] if v["name"] == "scheduler-config")
    cm = one(objs, "ConfigMap", volume["configMap"]["name"])
    assert path.name in cm["data"]
    assert container(one(render_variant("everything"), "Deployment", "sky-scheduler"), "kube-scheduler")[
        "image"
    ].endswith(":v1.31.4")


@pytest.mark.parametrize(
    ("server_version", "tag"),
    [
        ("1.29.3", "v1.29.3"),
        ("v1.30.4-eks-a737599", "v1.30.4"),
        ("v1.31.2-gke.1115000", "v1.31.2"),
        ("v1.28.9+k3s1", "v1.28.9"),
    ],
)
def test_kube_scheduler_follows_the_cluster_version(server_version: str, tag: str) -> None:
    proc = helm_template(kube_version=server_version, extra=["--show-only", "templates/scheduler/deployment.yaml"])
    assert proc.returncode == 0, proc.stderr
    (dep,) = parse_documents(proc.stdout)
    assert container(dep, "kube-scheduler")["image"] == f"registry.k8s.io/kube-scheduler:{tag}"


def test_older_clusters_are_refused() -> None:
    proc = helm_template(kube_version="1.27.9")
    assert proc.returncode != 0 and "kubeVersion" in proc.stderr
