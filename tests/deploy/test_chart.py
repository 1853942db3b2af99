"""The Helm chart: lint, render, offline schema validation, and the contracts between the rendered
objects and the code they run (flags, ports, paths, policy, CRDs)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.deploy import kubescheduler
from tests.deploy.chart import (
    CHART,
    KUBE_VERSION,
    NAMESPACE,
    REPO,
    VARIANTS,
    Obj,
    chart_values,
    container,
    find,
    helm_lint,
    helm_template,
    one,
    parse_documents,
    render,
    render_variant,
)

ALL_VARIANTS = sorted(VARIANTS)

# Kinds kubernetes-validate has no schema for: custom resources of other projects.
CUSTOM_RESOURCES = {
    ("cert-manager.io/v1", "Issuer"): "cert-manager CRD (not a built-in kind)",
    ("cert-manager.io/v1", "Certificate"): "cert-manager CRD (not a built-in kind)",
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "Prometheus Operator CRD (not a built-in kind)",
}


def _kv() -> Any:
    try:
        import kubernetes_validate
    except ImportError:
        msg = "kubernetes-validate is not installed (pip install kubernetes-validate)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return kubernetes_validate


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


# --------------------------------------------------------------------------------------------
# helm lint / helm template
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ALL_VARIANTS)
def test_lint_strict(variant: str) -> None:
    proc = helm_lint(VARIANTS[variant])
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_lint_strict_without_kube_version() -> None:
    """`helm lint --strict charts/sky-scheduler` as a user types it (helm's default capabilities)."""
    from tests.deploy.chart import run_helm

    proc = run_helm(["lint", "--strict", str(CHART)])
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("variant", ALL_VARIANTS)
def test_template_renders(variant: str) -> None:
    objs = render_variant(variant)
    assert objs
    for o in objs:
        assert o.get("apiVersion") and o.get("kind") and o.get("metadata", {}).get("name"), o
    keys = [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objs]
    assert len(keys) == len(set(keys)), "two rendered objects share kind/namespace/name"


def test_default_install_objects() -> None:
    objs = render_variant("default")
    kinds = sorted({o["kind"] for o in objs})
    assert kinds == sorted(
        {
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "ConfigMap",
            "Deployment",
            "DaemonSet",
            "PodDisruptionBudget",
            "Service",
            "Secret",
            "MutatingWebhookConfiguration",
            "NetworkPolicy",
        }
    )
    assert {d["metadata"]["name"] for d in find(objs, "Deployment")} == {"sky-scheduler", "sky-scheduler-ib"}
    assert one(objs, "DaemonSet")["metadata"]["name"] == "sky-scheduler-roce"
    for o in objs:
        if o["kind"] not in {"ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration"}:
            expected = "kube-system" if o["metadata"]["name"].endswith("authentication-reader") else NAMESPACE
            assert o["metadata"].get("namespace") == expected, o["metadata"]
    labels = one(objs, "Deployment", "sky-scheduler")["metadata"]["labels"]
    assert labels["app.kubernetes.io/managed-by"] == "Helm"
    assert labels["app.kubernetes.io/component"] == "scheduler"


def test_discovery_can_be_disabled() -> None:
    objs = render_variant("no-discovery")
    assert not find(objs, "DaemonSet")
    assert [d["metadata"]["name"] for d in find(objs, "Deployment")] == ["sky-scheduler"]
    names = {o["metadata"]["name"] for o in objs}
    assert not {n for n in names if n.endswith(("-roce", "-ib"))}
    only_roce = render({"discovery": {"ib": {"enabled": False}}})
    assert find(only_roce, "DaemonSet") and len(find(only_roce, "Deployment")) == 1


def test_crds_are_installed_from_the_chart_crds_directory() -> None:
    # helm installs charts/sky-scheduler/crds/ before the templates (not templated, not upgraded)
    proc = helm_template(extra=["--include-crds"])
    assert proc.returncode == 0, proc.stderr
    crds = find(parse_documents(proc.stdout), "CustomResourceDefinition")
    assert sorted(c["metadata"]["name"] for c in crds) == sorted(
        f"{p}.scheduling.infini-ai.com" for p in ("quotas", "nodetopologies", "podgroups", "queues", "jobqueues")
    )


def test_chart_crds_equal_the_source_of_truth_byte_for_byte() -> None:
    source = {p.name: p.read_bytes() for p in sorted((REPO / "crds").glob("*.yaml"))}
    copies = {p.name: p.read_bytes() for p in sorted((CHART / "crds").glob("*"))}
    assert source, "crds/*.yaml not found"
    assert copies.keys() == source.keys(), "charts/sky-scheduler/crds/ must hold exactly crds/*.yaml"
    stale = [name for name in source if copies[name] != source[name]]
    assert not stale, f"stale chart CRDs {stale}: run `cp crds/*.yaml charts/sky-scheduler/crds/`"


def test_chart_default_policy_equals_the_built_in_policy() -> None:
    built_in = (REPO / "extender" / "conf" / "default_policy.yaml").read_bytes()
    assert (CHART / "files" / "default-policy.yaml").read_bytes() == built_in, (
        "run `cp extender/conf/default_policy.yaml charts/sky-scheduler/files/default-policy.yaml`"
    )


# --------------------------------------------------------------------------------------------
# Offline schema validation
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ALL_VARIANTS)
def test_rendered_objects_validate_against_kubernetes_schemas(variant: str) -> None:
    kv = _kv()
    problems, skipped = [], []
    for o in render_variant(variant):
        key = (o["apiVersion"], o["kind"])
        if key in CUSTOM_RESOURCES:
            skipped.append(f"{o['kind']} {o['metadata']['name']}: {CUSTOM_RESOURCES[key]}")
            continue
        try:
            kv.validate(o, KUBE_VERSION, strict=True)
        except kv.SchemaNotFoundError:
            problems.append(f"{o['kind']} {o['metadata']['name']}: no schema, and not a known custom resource")
        except kv.ValidationError as e:
            problems.append(f"{o['kind']} {o['metadata']['name']}: {_first_line(e)}")
    assert not problems, "\n".join(problems)
    if variant in {"cert-manager", "everything"}:
        assert skipped, "the custom resources of this variant were not rendered"


def test_custom_resources_are_skipped_only_with_a_reason() -> None:
    rendered = {(o["apiVersion"], o["kind"]) for v in ALL_VARIANTS for o in render_variant(v)}
    unknown_groups = {k for k in rendered if "." in k[0].split("/")[0] and k not in CUSTOM_RESOURCES}
    builtin_groups = (
        "apps",
        "policy",
        "rbac.authorization.k8s.io",
        "admissionregistration.k8s.io",
        "networking.k8s.io",
    )
    assert {k for k in unknown_groups if not k[0].startswith(builtin_groups)} == set()


def test_chart_crds_validate_against_the_apiextensions_schema() -> None:
    kv = _kv()
    for path in sorted((CHART / "crds").glob("*.yaml")):
        docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
        assert len(docs) == 1, path
        try:
            kv.validate(docs[0], KUBE_VERSION, strict=True)
        except kv.ValidationError as e:
            pytest.fail(f"{path.name}: {_first_line(e)}")


def test_cert_manager_objects_are_well_formed() -> None:
    """No cert-manager schema offline: check the fields cert-manager's v1 API requires."""
    objs = render_variant("cert-manager")
    issuers = {i["metadata"]["name"]: i for i in find(objs, "Issuer")}
    certs = {c["metadata"]["name"]: c for c in find(objs, "Certificate")}
    assert set(issuers) == {"sky-scheduler-selfsigned", "sky-scheduler-webhook-ca"}
    assert issuers["sky-scheduler-selfsigned"]["spec"] == {"selfSigned": {}}
    assert issuers["sky-scheduler-webhook-ca"]["spec"] == {"ca": {"secretName": "sky-scheduler-webhook-ca"}}
    assert set(certs) == {"sky-scheduler-webhook-ca", "sky-scheduler-webhook"}
    ca = certs["sky-scheduler-webhook-ca"]["spec"]
    assert ca["isCA"] is True and ca["issuerRef"]["name"] == "sky-scheduler-selfsigned"
    serving = certs["sky-scheduler-webhook"]["spec"]
    assert serving["secretName"] == "sky-scheduler-webhook-tls"
    assert serving["issuerRef"] == {"name": "sky-scheduler-webhook-ca", "kind": "Issuer", "group": "cert-manager.io"}
    for c in certs.values():
        for key in ("duration", "renewBefore"):
            assert jsonschema.Draft7Validator({"pattern": kubescheduler.GO_DURATION}).is_valid(c["spec"][key])
        assert kubescheduler.duration_seconds(c["spec"]["renewBefore"]) < kubescheduler.duration_seconds(
            c["spec"]["duration"]
        )


def test_service_monitor_scrapes_the_ops_port_of_the_metrics_service() -> None:
    objs = render_variant("everything")
    sm = one(objs, "ServiceMonitor")
    metrics = one(objs, "Service", "sky-scheduler-metrics")
    webhook_svc = one(objs, "Service", "sky-scheduler-webhook")
    selector = sm["spec"]["selector"]["matchLabels"]
    assert selector.items() <= metrics["metadata"]["labels"].items()
    assert not selector.items() <= webhook_svc["metadata"]["labels"].items()
    assert [e["port"] for e in sm["spec"]["endpoints"]] == [p["name"] for p in metrics["spec"]["ports"]] == ["ops"]
    assert sm["spec"]["endpoints"][0]["path"] == "/metrics"
    assert not find(render_variant("default"), "ServiceMonitor"), "the ServiceMonitor is off by default"


# --------------------------------------------------------------------------------------------
# KubeSchedulerConfiguration
# --------------------------------------------------------------------------------------------


def _scheduler_config(objs: Sequence[Obj]) -> dict[str, Any]:
    cm = one(objs, "ConfigMap", "sky-scheduler-config")
    return yaml.safe_load(cm["data"]["scheduler-config.yaml"])


def _serve_args(objs: Sequence[Obj]) -> argparse.Namespace:
    from extender.settings import add_serve_arguments

    args = container(one(objs, "Deployment", "sky-scheduler"), "sky-scheduler")["args"]
    assert args[0] == "serve"
    parser = argparse.ArgumentParser(prog="sky-scheduler serve", exit_on_error=False)
    add_serve_arguments(parser)
    return _parse_strictly(parser, args[1:])


def _parse_strictly(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """Parse like the real command, but turn argparse's exit into a test failure with the reason."""
    try:
        ns, unknown = parser.parse_known_args(list(argv))
    except (argparse.ArgumentError, SystemExit) as e:
        pytest.fail(f"{parser.prog} rejects the chart's arguments {list(argv)}: {e}")
    if unknown:
        pytest.fail(f"{parser.prog} does not know the chart's arguments {unknown}")
    return ns


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
    for mutate in (
        lambda c: c["extenders"][0].update(enableHttps=c["extenders"][0].pop("enableHTTPS")),
        lambda c: c["extenders"][0].update(nodecachecapable=True),
        lambda c: c["extenders"][0].update(httpTimeout=10),
        lambda c: c["extenders"][0].update(weight=0),
        lambda c: c["leaderElection"].update(resourceLock="endpoints"),
        lambda c: c["profiles"][0].update(percentageOfNodesToScore=101),
        lambda c: c.update(apiVersion="kubescheduler.config.k8s.io/v1beta3"),
        lambda c: c["extenders"][0].update(managedResources=[{"name": "gpu"}]),
    ):
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
    serve = _serve_args(objs)
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


# --------------------------------------------------------------------------------------------
# The serve and discover command lines
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ALL_VARIANTS)
def test_serve_args_are_real_serve_flags(variant: str) -> None:
    from extender.settings import settings_from_args

    objs = render_variant(variant)
    ns = _serve_args(objs)
    # the values the kubelet substitutes, then the real validation of serve
    env = {"POD_NAME": "sky-scheduler-0", "POD_NAMESPACE": NAMESPACE}
    for key, value in vars(ns).items():
        if isinstance(value, str):
            setattr(ns, key, value.replace("$(POD_NAME)", env["POD_NAME"]).replace("$(POD_NAMESPACE)", NAMESPACE))
    settings = settings_from_args(ns, env={})
    assert settings.scheduler_name == "sky-scheduler"
    assert settings.lease_namespace == NAMESPACE and settings.identity == "sky-scheduler-0"
    dep = one(objs, "Deployment", "sky-scheduler")
    serve = container(dep, "sky-scheduler")
    env_names = {e["name"]: e for e in serve["env"]}
    assert env_names["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert env_names["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    ports = {p["name"]: p["containerPort"] for p in serve["ports"]}
    assert ports["ops"] == settings.ops_port
    if VARIANTS[variant].get("webhook", {}).get("enabled", True):
        assert ports["webhook"] == settings.webhook_port != 0
        mount = next(m for m in serve["volumeMounts"] if m["name"] == "webhook-tls")
        assert Path(settings.tls_cert_file).parent == Path(mount["mountPath"]) == Path(settings.tls_key_file).parent
    else:
        assert settings.webhook_port == 0 and "webhook" not in ports


def test_every_serve_setting_is_set_by_the_chart() -> None:
    """A new serve flag must be decided on in the chart (set it, or list it here with the reason)."""
    from extender.settings import ServeSettings

    not_set = {
        "kubeconfig": "in-cluster configuration",
        "webhook_client_ca_file": "only with webhook.clientAuth.caConfigMap (test_network_guard)",
        "extender_tls_cert_file": "same-pod layout: loopback; set by scheduler.layout=separate (below)",
        "extender_tls_key_file": "same-pod layout: loopback; set by scheduler.layout=separate (below)",
        "extender_client_ca_file": "same-pod layout: loopback; set by scheduler.layout=separate (below)",
    }
    separate = {
        a.split("=", 1)[0]
        for a in container(one(render_variant("separate"), "Deployment", "sky-scheduler"), "sky-scheduler")["args"]
    }
    assert {"--extender-tls-cert-file", "--extender-tls-key-file", "--extender-client-ca-file"} <= separate
    flags = {
        a.split("=", 1)[0]
        for a in container(one(render_variant("default"), "Deployment", "sky-scheduler"), "sky-scheduler")["args"]
    }
    for f in ServeSettings.__dataclass_fields__:
        flag = "--" + f.replace("_", "-")
        if f in not_set:
            assert flag not in flags
            continue
        if f == "leader_elect":
            assert "--leader-elect" in flags or "--no-leader-elect" in flags
            continue
        assert flag in flags, f"serve {flag} is not set by the chart"


def test_serve_policy_file_is_the_mounted_policy_and_loads() -> None:
    from extender.conf import load_policy_text

    for variant in ("default", "everything"):
        objs = render_variant(variant)
        ns = _serve_args(objs)
        dep = one(objs, "Deployment", "sky-scheduler")
        serve = container(dep, "sky-scheduler")
        mount = next(m for m in serve["volumeMounts"] if m["name"] == "policy")
        assert Path(ns.policy).parent == Path(mount["mountPath"])
        volume = next(v for v in dep["spec"]["template"]["spec"]["volumes"] if v["name"] == "policy")
        text = one(objs, "ConfigMap", volume["configMap"]["name"])["data"][Path(ns.policy).name]
        load_policy_text(text, f"{variant}: rendered policy")
    custom = "actions: [allocate_job]\nplugins: {gang: {}}\nstages:\n  job.valid: and(gang)\n"
    objs = render({"scheduler": {"policy": custom}})
    assert one(objs, "ConfigMap", "sky-scheduler-policy")["data"]["policy.yaml"] == custom


@pytest.mark.parametrize(
    ("values", "seconds"), [({}, 10.0), ({"policyReloadSeconds": 0}, 0.0), ({"policyReloadSeconds": 2.5}, 2.5)]
)
def test_policy_reload_period_reaches_serve(values: dict[str, Any], seconds: float) -> None:
    """The mounted policy ConfigMap is re-read every policyReloadSeconds (0: never)."""
    from extender.settings import settings_from_args

    ns = _serve_args(render({"scheduler": {"serve": values}}))
    ns.lease_namespace, ns.identity = NAMESPACE, "sky-scheduler-0"
    assert settings_from_args(ns, env={}).policy_reload_seconds == seconds


def _discover_parser() -> argparse.ArgumentParser:
    from discovery.cli import add_arguments

    parser = argparse.ArgumentParser(prog="sky-scheduler discover", exit_on_error=False)
    add_arguments(parser)
    return parser


@pytest.mark.parametrize("variant", ALL_VARIANTS)
def test_discover_args_are_real_discover_flags(variant: str) -> None:
    objs = render_variant(variant)
    for kind, name, cname, sub in (
        ("DaemonSet", "sky-scheduler-roce", "agent", "roce"),
        ("Deployment", "sky-scheduler-ib", "collector", "ib"),
    ):
        found = find(objs, kind, name)
        if not found:
            continue
        args = container(found[0], cname)["args"]
        assert args[:2] == ["discover", sub]
        ns = _parse_strictly(_discover_parser(), args[1:])
        assert ns.discover_kind == sub
        if sub == "roce":
            assert ns.node_name == "$(NODE_NAME)"
            assert str(ns.lldpd_socket) == "/run/lldpd/lldpd.socket"
        else:
            assert ns.lease_namespace == "$(POD_NAMESPACE)" and ns.identity == "$(POD_NAME)"
        # the heartbeat: its interval from the values, status.agent from the pod name
        assert ns.heartbeat_seconds == chart_values()["discovery"][sub]["heartbeatSeconds"]
        env = {e["name"]: e for e in container(found[0], cname)["env"]}
        assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"


@pytest.mark.parametrize(
    ("kind", "name", "cname"),
    [
        ("Deployment", "sky-scheduler", "sky-scheduler"),
        ("DaemonSet", "sky-scheduler-roce", "agent"),
        ("Deployment", "sky-scheduler-ib", "collector"),
    ],
)
def test_the_console_script_accepts_each_containers_args(kind: str, name: str, cname: str) -> None:
    """The image's ENTRYPOINT is `sky-scheduler`: the container args are its whole command line."""
    from extender.cli import build_parser

    args = container(one(render_variant("default"), kind, name), cname)["args"]
    parser = build_parser()
    parser.exit_on_error = False
    ns = _parse_strictly(parser, args)
    assert ns.command == args[0]


def test_a_renamed_flag_fails_the_parse() -> None:
    """The guard itself: an argument the parser does not know must fail the test helpers."""
    parser = argparse.ArgumentParser(prog="probe", exit_on_error=False)
    from extender.settings import add_serve_arguments

    add_serve_arguments(parser)
    with pytest.raises(pytest.fail.Exception):
        _parse_strictly(parser, ["--binder-interval=1"])
    with pytest.raises(pytest.fail.Exception):
        _parse_strictly(_discover_parser(), ["roce", "--lldp-socket=/x"])


def test_ib_hostname_pattern_reaches_the_collector_verbatim() -> None:
    objs = render_variant("everything")
    args = container(one(objs, "Deployment", "sky-scheduler-ib"), "collector")["args"]
    ns = _parse_strictly(_discover_parser(), args[1:])
    assert ns.hostname_pattern == VARIANTS["everything"]["discovery"]["ib"]["hostnamePattern"]


def test_fabric_map_and_switch_names_come_from_configmap_directories() -> None:
    """The files the agents re-read every round are in a mounted ConfigMap directory (not a
    subPath, which the kubelet never updates); without the values neither flag nor volume."""
    objs = render_variant("everything")
    cases = [
        (one(objs, "DaemonSet", "sky-scheduler-roce"), "agent", "fabric_map", "roce-fabric-map", "fabric-map.yaml"),
        (
            one(objs, "Deployment", "sky-scheduler-ib"),
            "collector",
            "switch_names",
            "ib-switch-names",
            "switch-names.yaml",
        ),
    ]
    for owner, name, flag, configmap, key in cases:
        c = container(owner, name)
        path = Path(getattr(_parse_strictly(_discover_parser(), c["args"][1:]), flag))
        assert path.name == key
        (mount,) = [m for m in c["volumeMounts"] if m["mountPath"] == str(path.parent)]
        assert mount["readOnly"] is True and "subPath" not in mount
        (volume,) = [v for v in owner["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"]]
        assert volume["configMap"] == {"name": configmap}
    default = render_variant("default")
    without = [
        ("DaemonSet", "sky-scheduler-roce", "agent", "--fabric-map"),
        ("Deployment", "sky-scheduler-ib", "collector", "--switch-names"),
    ]
    for kind, owner_name, name, flag in without:
        c = container(one(default, kind, owner_name), name)
        assert not any(a.startswith(flag) for a in c["args"])


# --------------------------------------------------------------------------------------------
# Pods: probes, security, placement
# --------------------------------------------------------------------------------------------


def test_serve_probes_use_the_ops_endpoints() -> None:
    objs = render_variant("default")
    serve = container(one(objs, "Deployment", "sky-scheduler"), "sky-scheduler")
    ns = _serve_args(objs)
    ops = {p["name"]: p["containerPort"] for p in serve["ports"]}["ops"]
    assert ops == ns.ops_port
    assert serve["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "ops"}
    assert serve["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "ops"}
    assert serve["startupProbe"]["httpGet"]["path"] == "/healthz"
    ks = container(one(objs, "Deployment", "sky-scheduler"), "kube-scheduler")
    assert ks["livenessProbe"]["httpGet"]["scheme"] == "HTTPS"
    assert f"--secure-port={ks['ports'][0]['containerPort']}" in ks["args"]


RESTRICTED = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "runAsNonRoot": True,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def test_scheduler_containers_are_restricted() -> None:
    dep = one(render_variant("default"), "Deployment", "sky-scheduler")
    pod = dep["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 65532
    for c in pod["containers"]:
        assert c["securityContext"] == RESTRICTED, c["name"]
        assert c["resources"]["requests"] and c["resources"]["limits"]["memory"], c["name"]
    assert not pod.get("hostNetwork")


def test_scheduler_is_highly_available() -> None:
    objs = render_variant("default")
    dep = one(objs, "Deployment", "sky-scheduler")
    assert dep["spec"]["replicas"] == 2
    selector = dep["spec"]["selector"]["matchLabels"]
    pdb = one(objs, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1 and pdb["spec"]["selector"]["matchLabels"] == selector
    anti = dep["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    term = anti["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    assert term["topologyKey"] == "kubernetes.io/hostname" and term["labelSelector"]["matchLabels"] == selector
    hard = one(render_variant("everything"), "Deployment", "sky-scheduler")["spec"]["template"]["spec"]["affinity"]
    assert hard["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"] == (
        "kubernetes.io/hostname"
    )
    assert dep["spec"]["template"]["spec"].get("schedulerName", "default-scheduler") == "default-scheduler"


def test_roce_daemonset() -> None:
    ds = one(render_variant("default"), "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert pod["nodeSelector"] == chart_values()["discovery"]["roce"]["nodeSelector"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["cni"]["hostPath"]["path"] == "/etc/cni/net.d"
    assert volumes["sys"]["hostPath"]["path"] == "/sys"
    assert volumes["lldpd-run"]["emptyDir"] is not None
    agent, lldpd = container(ds, "agent"), container(ds, "lldpd")
    mounts = {m["name"]: m for m in agent["volumeMounts"]}
    assert mounts["cni"]["readOnly"] is True and mounts["sys"]["readOnly"] is True
    assert "--cni-dir=" + mounts["cni"]["mountPath"] in agent["args"]
    assert "--sysfs-root=" + mounts["sys"]["mountPath"] in agent["args"]
    # agent and sidecar share lldpd's control socket directory
    assert {m["mountPath"] for m in lldpd["volumeMounts"] if m["name"] == "lldpd-run"} == {
        mounts["lldpd-run"]["mountPath"]
    }
    sock = next(a for a in agent["args"] if a.startswith("--lldpd-socket=")).split("=", 1)[1]
    assert lldpd["args"][lldpd["args"].index("-u") + 1] == sock
    assert Path(sock).parent == Path(mounts["lldpd-run"]["mountPath"])
    env = {e["name"]: e for e in agent["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    # the agent: non-root, no capabilities, in lldpd's socket group
    assert agent["securityContext"]["runAsNonRoot"] is True
    assert agent["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert agent["securityContext"]["allowPrivilegeEscalation"] is False
    assert pod["securityContext"]["supplementalGroups"] == [chart_values()["discovery"]["roce"]["lldpd"]["socketGroup"]]
    # the sidecar: root with exactly the capabilities lldpd needs, nothing privileged
    sc = lldpd["securityContext"]
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert set(sc["capabilities"]["add"]) == {
        "NET_RAW",
        "NET_ADMIN",
        "SETUID",
        "SETGID",
        "SYS_CHROOT",
        "CHOWN",
        "FOWNER",
        "DAC_OVERRIDE",
    }
    assert not sc.get("privileged") and sc["allowPrivilegeEscalation"] is False
    assert "-r" in lldpd["args"], "receive-only by default"


def test_roce_with_the_hosts_lldpd() -> None:
    ds = one(render_variant("host-lldpd"), "DaemonSet")
    names = [c["name"] for c in ds["spec"]["template"]["spec"]["containers"]]
    assert names == ["agent"]
    vol = next(v for v in ds["spec"]["template"]["spec"]["volumes"] if v["name"] == "lldpd-socket")
    assert vol["hostPath"] == {"path": "/run/lldpd.socket", "type": "Socket"}
    mount = next(m for m in container(ds, "agent")["volumeMounts"] if m["name"] == "lldpd-socket")
    assert f"--lldpd-socket={mount['mountPath']}" in container(ds, "agent")["args"]


def test_ib_collector_deployment() -> None:
    dep = one(render_variant("default"), "Deployment", "sky-scheduler-ib")
    assert dep["spec"]["replicas"] == 1
    c = container(dep, "collector")
    assert c["resources"]["requests"]["rdma/hca"] == "1" and c["resources"]["limits"]["rdma/hca"] == "1"
    assert dep["spec"]["template"]["spec"]["nodeSelector"] == chart_values()["discovery"]["ib"]["nodeSelector"]
    ns = _parse_strictly(_discover_parser(), c["args"][1:])
    assert ns.lease_name == chart_values()["discovery"]["ib"]["leaseName"]
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert c["securityContext"]["allowPrivilegeEscalation"] is False


def test_nothing_is_privileged_or_shares_host_namespaces_beyond_the_roce_network() -> None:
    for variant in ALL_VARIANTS:
        for o in render_variant(variant):
            if o["kind"] not in {"Deployment", "DaemonSet"}:
                continue
            pod = o["spec"]["template"]["spec"]
            assert not pod.get("hostPID") and not pod.get("hostIPC"), o["metadata"]["name"]
            assert bool(pod.get("hostNetwork")) == (o["kind"] == "DaemonSet"), o["metadata"]["name"]
            assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
            for c in pod["containers"]:
                sc = c["securityContext"]
                assert not sc.get("privileged") and sc["allowPrivilegeEscalation"] is False, c["name"]
                assert sc["readOnlyRootFilesystem"] is True, c["name"]
                assert "ALL" in sc["capabilities"]["drop"], c["name"]


# --------------------------------------------------------------------------------------------
# The webhook
# --------------------------------------------------------------------------------------------


def _webhooks(objs: Sequence[Obj]) -> list[dict[str, Any]]:
    hooks: list[dict[str, Any]] = one(objs, "MutatingWebhookConfiguration")["webhooks"]
    return hooks


def _webhook(objs: Sequence[Obj]) -> dict[str, Any]:
    """The entry for pods that name sky-scheduler (the first)."""
    hook = _webhooks(objs)[0]
    assert hook["name"].startswith("pods.")
    return hook


@pytest.mark.parametrize("variant", [v for v in ALL_VARIANTS if v != "no-webhook"])
def test_webhook_configuration(variant: str) -> None:

    objs = render_variant(variant)
    for hook in _webhooks(objs):
        _check_webhook_entry(objs, hook, variant)
    assert [h["name"].split(".")[0] for h in _webhooks(objs)] == ["pods", "inject"]


def _check_webhook_entry(objs: Sequence[Obj], hook: dict[str, Any], variant: str) -> None:
    from webhooks.app import MUTATE_PATH

    assert hook["clientConfig"]["service"]["path"] == MUTATE_PATH == "/mutate/pods"
    assert hook["rules"] == [
        {
            "operations": ["CREATE"],
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["pods"],
            "scope": "Namespaced",
        }
    ]
    assert hook["sideEffects"] == "NoneOnDryRun"  # claims are written on Quotas, never for a dry run
    assert hook["admissionReviewVersions"] == ["v1"]
    assert hook["matchPolicy"] == "Equivalent" and hook["reinvocationPolicy"] == "Never"
    if hook["name"].startswith("pods."):
        assert hook["failurePolicy"] == VARIANTS[variant].get("webhook", {}).get("failurePolicy", "Ignore")
    assert hook["timeoutSeconds"] == 3
    # the Service routes to the serve container's webhook port
    svc_ref = hook["clientConfig"]["service"]
    svc = one(objs, "Service", svc_ref["name"])
    assert svc["metadata"]["namespace"] == svc_ref["namespace"] == NAMESPACE
    (port,) = svc["spec"]["ports"]
    assert port["port"] == svc_ref["port"] and port["targetPort"] == "webhook"
    dep = one(objs, "Deployment", "sky-scheduler")
    assert svc["spec"]["selector"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    serve_ports = {p["name"]: p["containerPort"] for p in container(dep, "sky-scheduler")["ports"]}
    assert serve_ports["webhook"] == _serve_args(objs).webhook_port


def _namespace_matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    for expr in selector.get("matchExpressions", []):
        value = labels.get(expr["key"])
        op = expr["operator"]
        if op == "In" and value not in expr["values"]:
            return False
        if op == "NotIn" and value is not None and value in expr["values"]:
            return False
        if op == "Exists" and value is None:
            return False
        if op == "DoesNotExist" and value is not None:
            return False
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def test_webhook_namespace_selection() -> None:
    def ns(name: str, **labels: str) -> dict[str, str]:
        return {"kubernetes.io/metadata.name": name, **labels}

    inject = "scheduling.infini-ai.com/inject"
    sel = _webhook(render_variant("default"))["namespaceSelector"]
    assert _namespace_matches(sel, ns("ml-research"))
    assert _namespace_matches(sel, ns("ml-research", **{inject: "enabled"}))
    assert not _namespace_matches(sel, ns("ml-research", **{inject: "disabled"}))
    assert not _namespace_matches(sel, ns(NAMESPACE)), "the release namespace is never sent to the webhook"
    assert not _namespace_matches(sel, ns("kube-system"))
    opt_in = _webhook(render_variant("everything"))["namespaceSelector"]
    assert _namespace_matches(opt_in, ns("ml-research", **{inject: "enabled"}))
    assert not _namespace_matches(opt_in, ns("ml-research"))
    assert not _namespace_matches(opt_in, ns(NAMESPACE, **{inject: "enabled"}))
    other = render({"webhook": {"excludedNamespaces": []}}, extra=["--namespace", "sched"])
    assert not _namespace_matches(_webhook(other)["namespaceSelector"], ns("sched"))


def test_webhook_disabled() -> None:
    objs = render_variant("no-webhook")
    assert not find(objs, "MutatingWebhookConfiguration")
    assert not find(objs, "Secret")
    assert not [s for s in find(objs, "Service") if s["metadata"]["name"].endswith("-webhook")]
    assert _serve_args(objs).webhook_port == 0


# --------------------------------------------------------------------------------------------
# Certificates
# --------------------------------------------------------------------------------------------


def _pem_certs(b64: str) -> list[Any]:
    import base64

    from cryptography import x509

    return x509.load_pem_x509_certificates(base64.b64decode(b64))


def test_helm_generated_certificate() -> None:
    from cryptography import x509

    objs = render_variant("default")
    secret = one(objs, "Secret", "sky-scheduler-webhook-tls")
    assert secret["type"] == "kubernetes.io/tls"
    hook = _webhook(objs)
    assert hook["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
    (ca,) = _pem_certs(secret["data"]["ca.crt"])
    (leaf,) = _pem_certs(secret["data"]["tls.crt"])
    assert leaf.issuer == ca.subject
    leaf.verify_directly_issued_by(ca)
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    svc = "sky-scheduler-webhook"
    assert set(sans) == {svc, f"{svc}.{NAMESPACE}", f"{svc}.{NAMESPACE}.svc"}
    validity = leaf.not_valid_after_utc - leaf.not_valid_before_utc
    assert validity.days >= 3649
    dep = one(objs, "Deployment", "sky-scheduler")
    vol = next(v for v in dep["spec"]["template"]["spec"]["volumes"] if v["name"] == "webhook-tls")
    assert vol["secret"]["secretName"] == secret["metadata"]["name"]
    assert not find(objs, "Certificate") and not find(objs, "Issuer")


def test_cert_manager_certificate() -> None:
    objs = render_variant("cert-manager")
    assert not find(objs, "Secret"), "cert-manager writes the Secret"
    mwc = one(objs, "MutatingWebhookConfiguration")
    cert = one(objs, "Certificate", "sky-scheduler-webhook")
    assert mwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/{cert['metadata']['name']}"
    assert "caBundle" not in _webhook(objs)["clientConfig"], "cainjector fills it"
    svc = "sky-scheduler-webhook"
    assert cert["spec"]["dnsNames"] == [svc, f"{svc}.{NAMESPACE}", f"{svc}.{NAMESPACE}.svc"]
    dep = one(objs, "Deployment", "sky-scheduler")
    vol = next(v for v in dep["spec"]["template"]["spec"]["volumes"] if v["name"] == "webhook-tls")
    assert vol["secret"]["secretName"] == cert["spec"]["secretName"]
    own = render_variant("cert-manager-issuer")
    assert not find(own, "Issuer")
    assert one(own, "Certificate")["spec"]["issuerRef"] == {
        "name": "corp-ca",
        "kind": "ClusterIssuer",
        "group": "cert-manager.io",
    }


def test_existing_secret_certificate() -> None:
    objs = render_variant("secret-cert")
    assert not find(objs, "Secret") and not find(objs, "Certificate")
    assert _webhook(objs)["clientConfig"]["caBundle"] == "Q0E="
    dep = one(objs, "Deployment", "sky-scheduler")
    vol = next(v for v in dep["spec"]["template"]["spec"]["volumes"] if v["name"] == "webhook-tls")
    assert vol["secret"]["secretName"] == "my-tls"


def test_helm_template_cannot_look_up_so_each_render_makes_a_new_pair() -> None:
    """The documented limit: `helm template` (and --dry-run=client) has no cluster, `lookup` returns
    nothing, and every render generates a fresh CA. test_lookup_keeps_the_existing_certificate
    covers the other branch against the project's API emulator."""
    a = one(render({}), "Secret")["data"]["ca.crt"]
    b = one(render({}), "Secret")["data"]["ca.crt"]
    assert a != b


def test_lookup_keeps_the_existing_certificate(tmp_path: Path) -> None:
    """`helm template --dry-run=server` runs `lookup` against a live API: here the project's
    Kubernetes API emulator, holding a webhook Secret from an earlier install."""
    import subprocess
    import sys
    import time

    pytest.importorskip("extender.emulator.cli")
    existing = {"ca.crt": "Q0EtQlVORExF", "tls.crt": "Q0VSVA==", "tls.key": "S0VZ"}
    seed = tmp_path / "seed.yaml"
    seed.write_text(
        yaml.safe_dump_all(
            [
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "type": "kubernetes.io/tls",
                    "metadata": {"name": "sky-scheduler-webhook-tls", "namespace": NAMESPACE},
                    "data": existing,
                },
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": "partial-webhook-tls", "namespace": NAMESPACE},
                    "data": {"tls.crt": "Q0VSVA=="},
                },
            ]
        ),
        encoding="utf-8",
    )
    kubeconfig = tmp_path / "kubeconfig"
    log = (tmp_path / "emulator.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "extender.cli", "emulator", "--kubeconfig-out", str(kubeconfig), "--load", str(seed)],
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while not kubeconfig.exists():
            assert proc.poll() is None, (tmp_path / "emulator.log").read_text()
            assert time.monotonic() < deadline, "the emulator did not start"
            time.sleep(0.1)

        def server_render(*extra: str) -> list[Obj]:
            res = helm_template(
                kube_version=None,
                extra=[
                    "--dry-run=server",
                    "--kubeconfig",
                    str(kubeconfig),
                    "--show-only",
                    "templates/webhook/webhook.yaml",
                    *extra,
                ],
            )
            assert res.returncode == 0, res.stderr
            return parse_documents(res.stdout)

        objs = server_render()
        assert one(objs, "Secret")["data"] == existing
        assert _webhook(objs)["clientConfig"]["caBundle"] == existing["ca.crt"]
        # an incomplete Secret is replaced by a fresh pair, not half-reused
        objs = server_render("--set", "fullnameOverride=partial")
        data = one(objs, "Secret")["data"]
        assert data["tls.crt"] != "Q0VSVA==" and _webhook(objs)["clientConfig"]["caBundle"] == data["ca.crt"]
        _pem_certs(data["ca.crt"])
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def test_helm_generated_certificate_names_follow_the_namespace() -> None:
    proc = helm_template(extra=["--namespace", "sched", "--show-only", "templates/webhook/webhook.yaml"])
    assert proc.returncode == 0, proc.stderr
    from cryptography import x509

    secret = one(parse_documents(proc.stdout), "Secret")
    (leaf,) = _pem_certs(secret["data"]["tls.crt"])
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert "sky-scheduler-webhook.sched.svc" in sans


def test_shell_quoting_of_rendered_args() -> None:
    """Container args are exec'd without a shell: no argument may rely on shell expansion."""
    for variant in ALL_VARIANTS:
        for o in render_variant(variant):
            if o["kind"] not in {"Deployment", "DaemonSet"}:
                continue
            for c in o["spec"]["template"]["spec"]["containers"]:
                for a in c.get("args", []):
                    assert "${" not in a and "`" not in a, (c["name"], a)


def test_only_the_schedulers_pods_reach_the_webhook() -> None:
    """matchConditions (CEL) restrict the calls to pods naming sky-scheduler, and — in inject-enabled
    namespaces — pods naming no scheduler or the default one: the schedulers the webhook injects."""
    from webhooks.state import DEFAULT_SCHEDULER, WebhookConfig

    pods, inject = _webhooks(render_variant("default"))
    (cond,) = pods["matchConditions"]
    assert cond["expression"] == "has(object.spec.schedulerName) && object.spec.schedulerName == 'sky-scheduler'"
    (cond,) = inject["matchConditions"]
    injectable = ", ".join(f"'{s}'" for s in WebhookConfig().injectable_schedulers)
    assert WebhookConfig().injectable_schedulers == ("", DEFAULT_SCHEDULER)
    assert cond["expression"] == f"!has(object.spec.schedulerName) || object.spec.schedulerName in [{injectable}]"
    inject_label = "scheduling.infini-ai.com/inject"
    sel = inject["namespaceSelector"]
    assert _namespace_matches(sel, {"kubernetes.io/metadata.name": "ml", inject_label: "enabled"})
    assert not _namespace_matches(sel, {"kubernetes.io/metadata.name": "ml"})
    assert not _namespace_matches(sel, {"kubernetes.io/metadata.name": NAMESPACE, inject_label: "enabled"})
    other = render({"schedulerName": "gpu-sched", "webhook": {"injection": {"enabled": False}}})
    (only,) = _webhooks(other)
    assert "== 'gpu-sched'" in only["matchConditions"][0]["expression"]
    strict = render({"webhook": {"injection": {"failurePolicy": "Fail"}}})
    assert [h["failurePolicy"] for h in _webhooks(strict)] == ["Ignore", "Fail"]
