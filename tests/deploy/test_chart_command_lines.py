"""The serve and discover command lines the chart renders, parsed by the real parsers: every flag
exists, every serve setting is set, values reach the process verbatim, nothing needs a shell."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.chart import (
    ALL_VARIANTS,
    NAMESPACE,
    VARIANTS,
    chart_values,
    container,
    find,
    one,
    render,
    render_variant,
)
from tests.deploy.rendered import discover_parser, parse_strictly, serve_args


@pytest.mark.parametrize("variant", ALL_VARIANTS)
def test_serve_args_are_real_serve_flags(variant: str) -> None:
    from extender.settings import settings_from_args

    objs = render_variant(variant)
    ns = serve_args(objs)
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
        ns = serve_args(objs)
        dep = one(objs, "Deployment", "sky-scheduler")
        serve = container(dep, "sky-scheduler")
        mount = next(m for m in serve["volumeMounts"] if m["name"] == "policy")
        assert Path(ns.policy).parent == Path(mount["mountPath"])
        volume = next(v for v in dep["spec"]["template"]["spec"]["volumes"] if v["name"] == "policy")
        text = one(objs, "ConfigMap", volume["configMap"]["name"])["data"][Path(ns.policy).name]
        load_policy_text(text, f"{variant}: rendered policy")
    custom = "actions: [allocate_job]\nplugins: {gang: {}}\nstages:\n  job.valid: and(gang)\n"
    rendered = render({"scheduler": {"policy": custom}})
    assert one(rendered, "ConfigMap", "sky-scheduler-policy")["data"]["policy.yaml"] == custom


@pytest.mark.parametrize(
    ("values", "seconds"), [({}, 10.0), ({"policyReloadSeconds": 0}, 0.0), ({"policyReloadSeconds": 2.5}, 2.5)]
)
def test_policy_reload_period_reaches_serve(values: dict[str, Any], seconds: float) -> None:
    """The mounted policy ConfigMap is re-read every policyReloadSeconds (0: never)."""
    from extender.settings import settings_from_args

    ns = serve_args(render({"scheduler": {"serve": values}}))
    ns.lease_namespace, ns.identity = NAMESPACE, "sky-scheduler-0"
    assert settings_from_args(ns, env={}).policy_reload_seconds == seconds


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
        ns = parse_strictly(discover_parser(), args[1:])
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
    ns = parse_strictly(parser, args)
    assert ns.command == args[0]


def test_a_renamed_flag_fails_the_parse() -> None:
    """The guard itself: an argument the parser does not know must fail the test helpers."""
    parser = argparse.ArgumentParser(prog="probe", exit_on_error=False)
    from extender.settings import add_serve_arguments

    add_serve_arguments(parser)
    with pytest.raises(pytest.fail.Exception):
        parse_strictly(parser, ["--binder-interval=1"])
    with pytest.raises(pytest.fail.Exception):
        parse_strictly(discover_parser(), ["roce", "--lldp-socket=/x"])


def test_ib_hostname_pattern_reaches_the_collector_verbatim() -> None:
    objs = render_variant("everything")
    args = container(one(objs, "Deployment", "sky-scheduler-ib"), "collector")["args"]
    ns = parse_strictly(discover_parser(), args[1:])
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
        path = Path(getattr(parse_strictly(discover_parser(), c["args"][1:]), flag))
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


def test_shell_quoting_of_rendered_args() -> None:
    """Container args are exec'd without a shell: no argument may rely on shell expansion."""
    for variant in ALL_VARIANTS:
        for o in render_variant(variant):
            if o["kind"] not in {"Deployment", "DaemonSet"}:
                continue
            for c in o["spec"]["template"]["spec"]["containers"]:
                for a in c.get("args", []):
                    assert "${" not in a and "`" not in a, (c["name"], a)
