"""The direct request path (``extender.kube.client.request`` on the ApiClient's aiohttp session)
sends what the generated client's ``call_api`` sent, and the writer answers the same.

A recording HTTPS server that requires a client certificate stands in for kube-apiserver: the
writer's calls are made once through the previous path (``tests/kube/legacy_request.py``) and
once through the direct one, with clients built from a kubeconfig (CA, client certificate and
key, bearer token) and from an in-cluster service account (CA and a token file that rotates),
and what the server received is compared request by request — method, path, query, every
header, the body's JSON, the client certificate. Against the emulator, the Binding each path
creates is compared field by field.
"""

from __future__ import annotations

import datetime
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio.config.incluster_config import InClusterConfigLoader

from extender import wellknown
from extender.emulator import Emulator
from extender.kube import client as kube_client
from extender.kube.errors import BindConflict, GiveUp, NotFound
from extender.kube.writer import KubeWriter
from tests.kube import legacy_request

pytestmark = pytest.mark.anyio

Request = Callable[..., Awaitable[kube_client.RawResponse]]
PATHS: dict[str, Request] = {"call_api": legacy_request.request, "direct": kube_client.request}


# --- certificates: one CA, a serving certificate for 127.0.0.1, a client certificate ----------
def _cert(
    subject: str, key: Any, issuer: x509.Name | None, issuer_key: Any, *, ca: bool = False, usage: Any = None
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer or name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if usage is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if subject == "127.0.0.1":
        import ipaddress

        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False
        )
    return builder.sign(issuer_key, hashes.SHA256())


@dataclass
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _pki(directory: Path) -> Pki:
    def pem_key(key: Any, path: Path) -> Path:
        pkcs8 = serialization.PrivateFormat.PKCS8
        path.write_bytes(key.private_bytes(serialization.Encoding.PEM, pkcs8, serialization.NoEncryption()))
        return path

    def pem(cert: x509.Certificate, path: Path) -> Path:
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return path

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("test CA", ca_key, None, ca_key, ca=True)
    server_key, client_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    server = _cert("127.0.0.1", server_key, ca.subject, ca_key, usage=ExtendedKeyUsageOID.SERVER_AUTH)
    client = _cert("sky-scheduler", client_key, ca.subject, ca_key, usage=ExtendedKeyUsageOID.CLIENT_AUTH)
    return Pki(
        pem(ca, directory / "ca.crt"),
        pem(server, directory / "server.crt"),
        pem_key(server_key, directory / "server.key"),
        pem(client, directory / "client.crt"),
        pem_key(client_key, directory / "client.key"),
    )


# --- the recording server ---------------------------------------------------------------------
@dataclass
class Recorder:
    """Records every request; answers from ``script`` (status, body) in order, then a default."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    script: list[tuple[int, Any]] = field(default_factory=list)
    port: int = 0

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        ssl_object = request.transport.get_extra_info("ssl_object") if request.transport else None
        peer = ssl_object.getpeercert() if ssl_object is not None else None
        subject = dict(x[0] for x in peer["subject"]) if peer else {}
        self.requests.append(
            {
                "method": request.method,
                "path": request.path,
                "query": list(request.query.items()),
                # every header but the length, which follows the body's whitespace
                "headers": sorted((k.lower(), v) for k, v in request.headers.items() if k.lower() != "content-length"),
                "body": orjson.loads(body) if body else None,
                "client_cert": subject.get("commonName"),
            }
        )
        if self.script:
            status, answer = self.script.pop(0)
        elif request.method == "GET":
            status, answer = 200, {"apiVersion": "v1", "kind": "X", "metadata": {"resourceVersion": "7"}, "status": {}}
        else:
            status, answer = 201, {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}
        return web.Response(status=status, body=orjson.dumps(answer), content_type="application/json")


@pytest.fixture
async def recorder(tmp_path: Path) -> AsyncIterator[tuple[Recorder, Pki]]:
    pki = _pki(tmp_path)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.ca))
    ctx.load_cert_chain(str(pki.server_cert), str(pki.server_key))
    ctx.verify_mode = ssl.CERT_REQUIRED  # no client certificate, no connection
    rec = Recorder()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", rec.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx)
    await site.start()
    rec.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield rec, pki
    finally:
        await runner.cleanup()


def _kubeconfig(path: Path, rec: Recorder, pki: Pki) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {"server": f"https://127.0.0.1:{rec.port}", "certificate-authority": str(pki.ca)},
                    }
                ],
                "users": [
                    {
                        "name": "u",
                        "user": {
                            "client-certificate": str(pki.client_cert),
                            "client-key": str(pki.client_key),
                            "token": "kubeconfig-token",
                        },
                    }
                ],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


async def _writer_calls(api: Any) -> list[Any]:
    """What the writer does on the extender's and the binder's paths, each answer kept."""
    w = KubeWriter(api, backoff=0.001, backoff_max=0.002, request_timeout=5.0)
    out: list[Any] = []
    out.append(await w.bind_pod("ns", "p", "uid-1", "n1", {wellknown.ANNO_BIND_DECISION: "quota"}))
    out.append(await w.patch_pod_annotations("ns", "p", {"a": "b", "gone": None}, uid="uid-1"))
    out.append(await w.update_quota_status("q", lambda q: {"phase": "QuotaBound", "nodeName": "n1"}))
    resp = await kube_client.request(api, "GET", "/api/v1/pods", query=[("labelSelector", "a=b,c"), ("limit", "5")])
    out.append((resp.status, resp.json()))
    return out


async def _compare(rec: Recorder, make_api: Callable[[], Awaitable[Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, list[dict[str, Any]]] = {}
    answers: dict[str, list[Any]] = {}
    for name, fn in PATHS.items():
        monkeypatch.setattr(kube_client, "request", fn)
        rec.requests.clear()
        api = await make_api()
        try:
            answers[name] = await _writer_calls(api)
        finally:
            await kube_client.close(api)
        seen[name] = list(rec.requests)
    assert len(seen["direct"]) == 5  # bind, patch, get + put, list
    assert seen["direct"] == seen["call_api"]
    assert answers["direct"] == answers["call_api"]
    assert all(r["client_cert"] == "sky-scheduler" for r in seen["direct"])


async def test_kubeconfig_client_sends_the_same_requests(
    recorder: tuple[Recorder, Pki], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec, pki = recorder
    kubeconfig = _kubeconfig(tmp_path / "kc", rec, pki)

    async def make() -> Any:
        return await kube_client.from_kubeconfig(kubeconfig)

    await _compare(rec, make, monkeypatch)
    assert dict(rec.requests[0]["headers"])["authorization"] == "Bearer kubeconfig-token"
    assert dict(rec.requests[0]["headers"])["user-agent"] == kube_client.USER_AGENT


async def test_in_cluster_client_sends_the_same_requests_and_follows_token_rotation(
    recorder: tuple[Recorder, Pki], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec, pki = recorder
    token = tmp_path / "token"
    environ = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(rec.port)}
    loaders: list[InClusterConfigLoader] = []

    async def make() -> Any:
        token.write_text("sa-token-1")
        loader = InClusterConfigLoader(token_filename=str(token), cert_filename=str(pki.ca), environ=environ)
        cfg = k8s_client.Configuration()
        loader.load_and_set(cfg)
        cfg.cert_file, cfg.key_file = str(pki.client_cert), str(pki.client_key)  # the server requires one
        loaders.append(loader)
        return kube_client._client(cfg, None)

    await _compare(rec, make, monkeypatch)
    assert dict(rec.requests[0]["headers"])["authorization"] == "Bearer sa-token-1"
    # the kubelet rotates the token: the next request carries the new one
    api = await make()
    try:
        token.write_text("sa-token-2")
        loaders[-1].token_expires_at = datetime.datetime.now() - datetime.timedelta(seconds=1)
        resp = await kube_client.request(api, "GET", "/api/v1/namespaces/default")
        assert resp.ok
    finally:
        await kube_client.close(api)
    assert dict(rec.requests[-1]["headers"])["authorization"] == "Bearer sa-token-2"


async def test_error_answers_are_handled_the_same(
    recorder: tuple[Recorder, Pki], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Retries of transient answers, the 409 of a Binding that had landed, a Binding elsewhere,
    a pod that is gone: the same requests, the same outcome on both paths."""
    rec, pki = recorder
    kubeconfig = _kubeconfig(tmp_path / "kc", rec, pki)
    assigned = {"kind": "Status", "code": 409, "reason": "Conflict"}

    def script() -> list[tuple[int, Any]]:
        return [
            (503, {"kind": "Status", "code": 503}),
            (409, {**assigned, "message": 'pod p is already assigned to node "n1"'}),  # landed: success
            (409, {**assigned, "message": 'pod p is already assigned to node "n2"'}),
            (404, {"kind": "Status", "code": 404, "reason": "NotFound", "message": "pods p not found"}),
            *[(500, {"kind": "Status", "code": 500})] * 3,
        ]

    outcomes: dict[str, list[str]] = {}
    seen: dict[str, list[dict[str, Any]]] = {}
    for name, fn in PATHS.items():
        monkeypatch.setattr(kube_client, "request", fn)
        rec.requests.clear()
        rec.script = script()
        api = await kube_client.from_kubeconfig(kubeconfig)
        w = KubeWriter(api, retries=3, backoff=0.001, backoff_max=0.002, request_timeout=5.0)
        got: list[str] = []
        try:
            got.append(str((await w.bind_pod("ns", "p", "u", "n1"))["status"]))
            for _ in range(3):
                try:
                    await w.bind_pod("ns", "p", "u", "n1")
                except (BindConflict, NotFound, GiveUp) as exc:
                    got.append(type(exc).__name__)
        finally:
            await kube_client.close(api)
        outcomes[name], seen[name] = got, list(rec.requests)
    assert outcomes["direct"] == ["Success", "BindConflict", "NotFound", "GiveUp"]
    assert outcomes["direct"] == outcomes["call_api"]
    assert seen["direct"] == seen["call_api"]


async def test_the_emulator_receives_the_same_binding(emu: Emulator, ns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    stored: dict[str, dict[str, Any]] = {}
    journal: dict[str, list[tuple[Any, ...]]] = {}
    for name, fn in PATHS.items():
        monkeypatch.setattr(kube_client, "request", fn)
        pod = emu.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"p-{name.replace('_', '-')}", "namespace": ns},
                "spec": {"containers": [{"name": "c", "image": "i"}], "schedulerName": "sky-scheduler"},
            }
        )
        meta = pod["metadata"]
        emu.journal.clear()
        api = kube_client.from_url(emu.url, token=emu.token)
        try:
            annotations = {wellknown.ANNO_BIND_DECISION: "inline-quota", wellknown.ANNO_QUOTA_NAME: "q-1"}
            await KubeWriter(api).bind_pod(ns, meta["name"], meta["uid"], "n7", annotations)
        finally:
            await kube_client.close(api)
        after = emu.get("v1", "pods", meta["name"], ns)
        stored[name] = {"nodeName": after["spec"]["nodeName"], "annotations": after["metadata"]["annotations"]}
        journal[name] = [
            (r.method, r.path.replace(meta["name"], "P"), r.verb, r.subresource, r.code, r.content_type, r.user_agent)
            for r in emu.journal.records()
        ]
    assert (
        stored["direct"]
        == stored["call_api"]
        == {
            "nodeName": "n7",
            "annotations": {wellknown.ANNO_BIND_DECISION: "inline-quota", wellknown.ANNO_QUOTA_NAME: "q-1"},
        }
    )
    assert journal["direct"] == journal["call_api"]
    assert [j[2:5] for j in journal["direct"]] == [("create", "binding", 201)]
