"""``kubectl create <built-in kind>`` against the emulator: kubectl's typed clients send these as
protobuf (``application/vnd.kubernetes.protobuf``) and do not fall back to JSON, so the emulator
decodes the envelope for Namespace, ConfigMap, Secret and ServiceAccount (the real kubectl v1.32)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from extender.emulator import Emulator
from tests.emulator.test_emulator_kubectl import KUBECTL, Kubectl

pytestmark = pytest.mark.skipif(not KUBECTL.exists(), reason=f"kubectl not found at {KUBECTL}")


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator() as emu:
        yield emu


@pytest.fixture
def kubectl(emu: Emulator, tmp_path: Path) -> Kubectl:
    return Kubectl(emu.write_kubeconfig(tmp_path / "kubeconfig"), tmp_path / "cache")


def test_kubectl_create_namespace_configmap_secret_serviceaccount(
    emu: Emulator, kubectl: Kubectl, tmp_path: Path
) -> None:
    binary = tmp_path / "blob.bin"
    binary.write_bytes(bytes(range(256)))
    kubectl("create", "namespace", "ml-research")
    kubectl("create", "configmap", "settings", "-n", "ml-research", "--from-literal=mode=fast", f"--from-file={binary}")
    kubectl("create", "secret", "generic", "token", "-n", "ml-research", "--from-literal=key=s3cr3t")
    kubectl("create", "serviceaccount", "trainer", "-n", "ml-research")

    # protobuf really went over the wire (the point of this test)
    creates = [r for r in emu.journal.records() if r.method == "POST"]
    assert {r.content_type for r in creates} == {"application/vnd.kubernetes.protobuf"}
    assert [r.resource for r in creates] == ["namespaces", "configmaps", "secrets", "serviceaccounts"]

    ns = emu.get("v1", "namespaces", "ml-research")
    assert ns["metadata"]["labels"] == {"kubernetes.io/metadata.name": "ml-research"}
    assert ns["status"] == {"phase": "Active"}
    cm = emu.get("v1", "configmaps", "settings", "ml-research")
    assert cm["data"] == {"mode": "fast"}
    assert base64.b64decode(cm["binaryData"]["blob.bin"]) == bytes(range(256))
    secret = emu.get("v1", "secrets", "token", "ml-research")
    assert secret["type"] == "Opaque" and base64.b64decode(secret["data"]["key"]) == b"s3cr3t"
    assert emu.get("v1", "serviceaccounts", "trainer", "ml-research")["metadata"]["namespace"] == "ml-research"
    # and kubectl reads them back as it wrote them
    out = kubectl("get", "configmap", "settings", "-n", "ml-research", "-o", "jsonpath={.data.mode}").stdout
    assert out == "fast"


def _length_delimited(number: int, payload: bytes) -> bytes:
    assert len(payload) < 128
    return bytes([number << 3 | 2, len(payload)]) + payload


def test_protobuf_of_a_kind_the_emulator_does_not_decode_is_415_naming_it(emu: Emulator) -> None:
    type_meta = _length_delimited(1, b"v1") + _length_delimited(2, b"Pod")
    body = b"k8s\x00" + _length_delimited(1, type_meta) + _length_delimited(2, b"")
    r = httpx.post(
        f"{emu.url}/api/v1/namespaces/default/pods",
        content=body,
        headers={"Content-Type": "application/vnd.kubernetes.protobuf"},
    )
    assert r.status_code == 415
    assert "v1/Pod" in r.json()["message"] and "send JSON" in r.json()["message"]
    assert emu.list("v1", "pods") == []


def test_protobuf_with_a_field_the_emulator_does_not_know_is_refused_not_dropped(emu: Emulator) -> None:
    type_meta = _length_delimited(1, b"v1") + _length_delimited(2, b"Namespace")
    meta = _length_delimited(1, b"x") + _length_delimited(13, b"")  # ObjectMeta.ownerReferences
    body = b"k8s\x00" + _length_delimited(1, type_meta) + _length_delimited(2, _length_delimited(1, meta))
    r = httpx.post(
        f"{emu.url}/api/v1/namespaces", content=body, headers={"Content-Type": "application/vnd.kubernetes.protobuf"}
    )
    assert r.status_code == 415 and "field 13 of ObjectMeta" in r.json()["message"]
    assert emu.try_get("v1", "namespaces", "x") is None
