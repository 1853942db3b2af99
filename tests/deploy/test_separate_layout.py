"""The chart's separate layout (``scheduler.layout: separate``): kube-scheduler and serve in their own
Deployments with their own ServiceAccounts, the extender on mutual TLS behind a Service.

The contracts followed here: kube-scheduler's extender URL names the extender Service, whose port
reaches serve's extender listener; the tlsConfig files and serve's TLS flags point into the
mounted Secrets; the certificates Helm generates really authenticate both ways (the real extender
server, over real TLS on loopback, accepts kube-scheduler's client certificate and refuses a
caller without one or with another CA's); cert-manager mode chains both certificates to a private
CA; the NetworkPolicy admits the extender port only from the kube-scheduler pods.
(tests/deploy/test_rbac.py checks each ServiceAccount's effective rights in both layouts.)
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import ssl
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest
import yaml

from tests.deploy.chart import NAMESPACE, Obj, container, find, one, render_variant

SVC = "sky-scheduler-extender"
KS = "sky-scheduler-kube-scheduler"


def _pod(dep: Obj) -> dict[str, Any]:
    spec: dict[str, Any] = dep["spec"]["template"]["spec"]
    return spec


def _scheduler_config(objs: Sequence[Obj]) -> dict[str, Any]:
    text = one(objs, "ConfigMap", "sky-scheduler-config")["data"]["scheduler-config.yaml"]
    cfg: dict[str, Any] = yaml.safe_load(text)
    return cfg


def _serve_settings(objs: Sequence[Obj]) -> Any:
    from extender.settings import add_serve_arguments, settings_from_args

    args = container(one(objs, "Deployment", "sky-scheduler"), "sky-scheduler")["args"]
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_serve_arguments(parser)
    ns = parser.parse_args(args[1:])
    for key, value in vars(ns).items():
        if isinstance(value, str):
            setattr(ns, key, value.replace("$(POD_NAME)", "p-0").replace("$(POD_NAMESPACE)", NAMESPACE))
    return settings_from_args(ns, env={})


def _mounted_file(dep: Obj, cname: str, path: str) -> tuple[str, str]:
    """(Secret name, key) behind a file path of a container: its mount, then the pod's volume."""
    c = container(dep, cname)
    mount = next(m for m in c["volumeMounts"] if Path(path).parent == Path(m["mountPath"]))
    volume = next(v for v in _pod(dep)["volumes"] if v["name"] == mount["name"])
    return volume["secret"]["secretName"], Path(path).name


@pytest.mark.parametrize("variant", ["separate", "separate-cert-manager"])
def test_each_component_has_its_own_deployment_and_identity(variant: str) -> None:
    objs = render_variant(variant)
    serve, ks = one(objs, "Deployment", "sky-scheduler"), one(objs, "Deployment", KS)
    assert [c["name"] for c in _pod(serve)["containers"]] == ["sky-scheduler"]
    assert [c["name"] for c in _pod(ks)["containers"]] == ["kube-scheduler"]
    assert _pod(serve)["serviceAccountName"] == "sky-scheduler"
    assert _pod(ks)["serviceAccountName"] == KS
    assert one(objs, "ServiceAccount", KS)
    # each Deployment selects only its own pods, and each has a disruption budget
    s_sel, k_sel = (d["spec"]["selector"]["matchLabels"] for d in (serve, ks))
    assert s_sel != k_sel and not (s_sel.items() <= _pod_labels(ks).items())
    assert not (k_sel.items() <= _pod_labels(serve).items())
    budgets = {p["metadata"]["name"]: p["spec"]["selector"]["matchLabels"] for p in find(objs, "PodDisruptionBudget")}
    assert budgets == {"sky-scheduler": s_sel, KS: k_sel}


def _pod_labels(dep: Obj) -> dict[str, str]:
    labels: dict[str, str] = dep["spec"]["template"]["metadata"]["labels"]
    return labels


@pytest.mark.parametrize("variant", ["separate", "separate-cert-manager"])
def test_the_extender_url_reaches_serves_tls_listener_through_the_service(variant: str) -> None:
    objs = render_variant(variant)
    settings = _serve_settings(objs)
    (ext,) = _scheduler_config(objs)["extenders"]
    url = urlsplit(ext["urlPrefix"])
    assert url.scheme == "https" and ext["enableHTTPS"] is True
    assert url.hostname == f"{SVC}.{NAMESPACE}.svc"
    svc = one(objs, "Service", SVC)
    serve = one(objs, "Deployment", "sky-scheduler")
    assert svc["spec"]["selector"].items() <= _pod_labels(serve).items()
    assert not svc["spec"]["selector"].items() <= _pod_labels(one(objs, "Deployment", KS)).items()
    (port,) = svc["spec"]["ports"]
    assert port["port"] == url.port
    named = {p["name"]: p["containerPort"] for p in container(serve, "sky-scheduler")["ports"]}
    assert named[port["targetPort"]] == settings.extender_port
    assert settings.extender_address == "0.0.0.0"
    # serve: TLS with client certificates required, all three files from the extender Secret
    secrets = {
        _mounted_file(serve, "sky-scheduler", f)
        for f in (settings.extender_tls_cert_file, settings.extender_tls_key_file, settings.extender_client_ca_file)
    }
    assert secrets == {("sky-scheduler-extender-tls", k) for k in ("tls.crt", "tls.key", "ca.crt")}
    # kube-scheduler: its client certificate and the CA it checks serve against, from its Secret
    tls = ext["tlsConfig"]
    assert set(tls) == {"certFile", "keyFile", "caFile"}, "never insecure, never a serverName override"
    ks = one(objs, "Deployment", KS)
    secrets = {_mounted_file(ks, "kube-scheduler", tls[k]) for k in ("certFile", "keyFile", "caFile")}
    assert secrets == {("sky-scheduler-extender-client-tls", k) for k in ("tls.crt", "tls.key", "ca.crt")}


def test_the_same_pod_layout_stays_the_default_on_loopback() -> None:
    objs = render_variant("default")
    (ext,) = _scheduler_config(objs)["extenders"]
    assert ext["urlPrefix"].startswith("http://127.0.0.1:") and "tlsConfig" not in ext
    assert not find(objs, "Deployment", KS) and not find(objs, "Service", SVC)
    assert not [s for s in find(objs, "Secret") if "extender" in s["metadata"]["name"]]


def test_only_the_kube_scheduler_pods_may_reach_the_extender_port() -> None:
    objs = render_variant("separate")
    settings = _serve_settings(objs)
    pol = one(objs, "NetworkPolicy", "sky-scheduler")
    rules = [r for r in pol["spec"]["ingress"] if {"port": settings.extender_port, "protocol": "TCP"} in r["ports"]]
    (rule,) = rules
    (peer,) = rule["from"]
    assert set(peer) == {"podSelector"}, "same namespace, pods only"
    allowed = peer["podSelector"]["matchLabels"].items()
    assert allowed <= _pod_labels(one(objs, "Deployment", KS)).items()
    assert not allowed <= _pod_labels(one(objs, "Deployment", "sky-scheduler")).items()
    ks_pol = one(objs, "NetworkPolicy", KS)
    assert ks_pol["spec"]["policyTypes"] == ["Ingress"] and "ingress" not in ks_pol["spec"]
    assert ks_pol["spec"]["podSelector"]["matchLabels"].items() <= _pod_labels(one(objs, "Deployment", KS)).items()


def test_cert_manager_chains_both_certificates_to_a_private_ca() -> None:
    objs = render_variant("separate-cert-manager")
    assert not [s for s in find(objs, "Secret") if "extender" in s["metadata"]["name"]], "cert-manager writes them"
    server = one(objs, "Certificate", "sky-scheduler-extender")
    client = one(objs, "Certificate", "sky-scheduler-extender-client")
    assert server["spec"]["secretName"] == "sky-scheduler-extender-tls"
    assert client["spec"]["secretName"] == "sky-scheduler-extender-client-tls"
    assert server["spec"]["dnsNames"] == [SVC, f"{SVC}.{NAMESPACE}", f"{SVC}.{NAMESPACE}.svc"]
    assert "server auth" in server["spec"]["usages"] and "client auth" in client["spec"]["usages"]
    ca_issuer = one(objs, "Issuer", server["spec"]["issuerRef"]["name"])
    assert client["spec"]["issuerRef"] == server["spec"]["issuerRef"]
    assert server["spec"]["issuerRef"]["kind"] == "Issuer"
    ca_secret = ca_issuer["spec"]["ca"]["secretName"]
    ca_cert = next(c for c in find(objs, "Certificate") if c["spec"]["secretName"] == ca_secret)
    assert ca_cert["spec"]["isCA"] is True
    root = one(objs, "Issuer", ca_cert["spec"]["issuerRef"]["name"])
    assert root["spec"] == {"selfSigned": {}}, "the extender's CA is its own, never a shared issuer"
    # the webhook's CA chain is another one: its certificates do not open the extender
    assert ca_cert["metadata"]["name"] != "sky-scheduler-webhook-ca"


# --------------------------------------------------------------------------------------------
# The generated certificates, used for real
# --------------------------------------------------------------------------------------------


def _write_secret(objs: Sequence[Obj], name: str, directory: Path) -> dict[str, Path]:
    directory.mkdir()
    out = {}
    for key, b64 in one(objs, "Secret", name)["data"].items():
        out[key] = directory / key
        out[key].write_bytes(base64.b64decode(b64))
    return out


async def _post_filter(port: int, ctx: ssl.SSLContext, host: str) -> bytes:
    """One extender filter call over TLS to 127.0.0.1, verifying the server as ``host``."""
    from tests import builders as b

    body = orjson.dumps({"Pod": b.pod("p", uid="u-1"), "Nodes": None, "NodeNames": ["n0"]})
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname=host)
    try:
        head = f"POST /filter HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        writer.write(f"{head}Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), timeout=20)
    finally:
        writer.close()


@pytest.mark.anyio
async def test_helm_generated_certificates_authenticate_both_ways(tmp_path: Path) -> None:
    from extender.api.extender import create_app
    from extender.servers import AppServer
    from tests import builders as b
    from tests.extender.wire import cache_of, state_of

    objs = render_variant("separate")
    server = _write_secret(objs, "sky-scheduler-extender-tls", tmp_path / "server")
    client = _write_secret(objs, "sky-scheduler-extender-client-tls", tmp_path / "client")
    webhook = _write_secret(objs, "sky-scheduler-webhook-tls", tmp_path / "webhook")
    assert server["ca.crt"].read_bytes() == client["ca.crt"].read_bytes(), "one CA for both sides"
    srv = AppServer(
        create_app(state_of(cache_of([b.node("n0")]))),
        host="127.0.0.1",
        port=0,
        name="extender",
        certfile=server["tls.crt"],
        keyfile=server["tls.key"],
        client_ca_file=server["ca.crt"],
    )
    await srv.start()
    host = urlsplit(_scheduler_config(objs)["extenders"][0]["urlPrefix"]).hostname or ""
    try:
        # kube-scheduler's side: checks serve against ca.crt and the Service's name, presents its pair
        ctx = ssl.create_default_context(cafile=str(client["ca.crt"]))
        ctx.load_cert_chain(client["tls.crt"], client["tls.key"])
        reply = await _post_filter(srv.port, ctx, host)
        assert reply.startswith(b"HTTP/1.1 200"), reply[:200]
        assert b'"NodeNames"' in reply
        # a caller without a client certificate, or with one of another CA (the webhook's), is refused
        for pair in (None, (webhook["tls.crt"], webhook["tls.key"])):
            ctx = ssl.create_default_context(cafile=str(client["ca.crt"]))
            if pair is not None:
                ctx.load_cert_chain(*pair)
            try:
                reply = await _post_filter(srv.port, ctx, host)
            except (ssl.SSLError, ConnectionError):
                reply = b""
            assert not reply.startswith(b"HTTP/"), f"answered a caller with {pair}: {reply[:100]!r}"
        # and kube-scheduler refuses a server that is not the Service (hostname verification)
        ctx = ssl.create_default_context(cafile=str(client["ca.crt"]))
        ctx.load_cert_chain(client["tls.crt"], client["tls.key"])
        with pytest.raises(ssl.SSLCertVerificationError):
            await _post_filter(srv.port, ctx, "sky-scheduler-webhook.sky-system.svc")
    finally:
        await srv.stop()


def test_upgrade_keeps_the_extender_certificates_and_replaces_a_partial_set(tmp_path: Path) -> None:
    """`helm template --dry-run=server` runs the chart's `lookup` against the project's API
    emulator: a complete pair of extender Secrets from an earlier install is kept as it is; a set
    missing one Secret is replaced by a fresh CA and pair (the CA key is not kept)."""
    from tests.deploy.chart import server_dry_run

    ca = base64.b64encode(b"CA").decode()
    kept = {
        "sky-scheduler-extender-tls": {"ca.crt": ca, "tls.crt": "U0VSVkVS", "tls.key": "U0tFWQ=="},
        "sky-scheduler-extender-client-tls": {"ca.crt": ca, "tls.crt": "Q0xJRU5U", "tls.key": "Q0tFWQ=="},
        "partial-extender-tls": {"ca.crt": ca, "tls.crt": "U0VSVkVS", "tls.key": "U0tFWQ=="},
    }
    seed: list[Obj] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}]
    for name, data in kept.items():
        meta = {"name": name, "namespace": NAMESPACE}
        seed.append({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls", "metadata": meta, "data": data})
    with server_dry_run(tmp_path, seed) as render:

        def secrets(*extra: str) -> dict[str, dict[str, str]]:
            only = ["--set", "scheduler.layout=separate", "--show-only", "templates/scheduler/extender-tls.yaml"]
            return {s["metadata"]["name"]: s["data"] for s in render([*only, *extra])}

        got = secrets()
        assert got == {k: v for k, v in kept.items() if not k.startswith("partial")}
        fresh = secrets("--set", "fullnameOverride=partial")  # its client Secret is missing
        server, client = fresh["partial-extender-tls"], fresh["partial-extender-client-tls"]
        assert server["ca.crt"] == client["ca.crt"] != ca
        assert server["tls.crt"] != kept["partial-extender-tls"]["tls.crt"]


def test_serve_with_the_charts_arguments_requires_kube_schedulers_certificate(tmp_path: Path) -> None:
    """The real `sky-scheduler serve` process, started with the serve container's rendered
    arguments (mounted paths mapped to the rendered Secrets and ConfigMap written to disk,
    addresses to loopback, ports to free ones) against the API emulator: its extender answers
    kube-scheduler's client certificate at the URL's host name and refuses a caller without one."""
    import subprocess

    from extender.emulator import Emulator
    from extender.simulate.cluster import crd_directory
    from tests.ops.serve_child import SERVING, free_port, start_cli

    objs = render_variant("separate")
    dirs = {
        "/etc/sky-scheduler/extender-tls": _write_secret(objs, "sky-scheduler-extender-tls", tmp_path / "ext"),
        "/etc/sky-scheduler/tls": _write_secret(objs, "sky-scheduler-webhook-tls", tmp_path / "hook"),
    }
    client = _write_secret(objs, "sky-scheduler-extender-client-tls", tmp_path / "client")
    (tmp_path / "policy").mkdir()
    policy = one(objs, "ConfigMap", "sky-scheduler-policy")["data"]["policy.yaml"]
    (tmp_path / "policy" / "policy.yaml").write_text(policy, encoding="utf-8")
    ports = {flag: str(free_port()) for flag in ("--extender-port", "--webhook-port", "--ops-port")}
    args = []
    for arg in container(one(objs, "Deployment", "sky-scheduler"), "sky-scheduler")["args"]:
        flag, _, value = arg.partition("=")
        if flag in ports:
            value = ports[flag]
        elif value == "0.0.0.0":
            value = "127.0.0.1"  # the pod's addresses: loopback here
        for mount, files in dirs.items():
            value = value.replace(mount, str(next(iter(files.values())).parent))
        value = value.replace("/etc/sky-scheduler/policy", str(tmp_path / "policy"))
        value = value.replace("$(POD_NAMESPACE)", NAMESPACE).replace("$(POD_NAME)", "sky-scheduler-0")
        args.append(f"{flag}={value}" if value else flag)
    assert args[0] == "serve" and "--extender-client-ca-file=" + str(tmp_path / "ext" / "ca.crt") in args
    with Emulator() as emu:
        emu.load_yaml(crd_directory())
        emu.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        kubeconfig = emu.write_kubeconfig(tmp_path / "kubeconfig")
        proc, lines = start_cli([*args, "--kubeconfig", str(kubeconfig)])
        try:
            lines.wait_for(SERVING)
            port = int(ports["--extender-port"])
            host = urlsplit(_scheduler_config(objs)["extenders"][0]["urlPrefix"]).hostname or ""
            ctx = ssl.create_default_context(cafile=str(client["ca.crt"]))
            ctx.load_cert_chain(client["tls.crt"], client["tls.key"])
            reply = asyncio.run(_post_filter(port, ctx, host))
            assert reply.startswith(b"HTTP/1.1 200"), reply[:300]
            bare = ssl.create_default_context(cafile=str(client["ca.crt"]))
            try:
                refused = asyncio.run(_post_filter(port, bare, host))
            except (ssl.SSLError, ConnectionError):
                refused = b""
            assert not refused.startswith(b"HTTP/"), refused[:100]
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
