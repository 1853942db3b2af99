"""The emulator's mutating admission chain against a real HTTPS webhook, over real HTTP.

Each rule is kube-apiserver's (extender/emulator/admission.py says where each comes from): order
by configuration name, failurePolicy, namespace/object selectors, matchConditions, the
AdmissionReview sent (``?timeout=Ns``, defaulted object, dryRun), the JSONPatch applied,
denials, reinvocation, and the validation of the configurations themselves.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from extender.emulator import Emulator
from tests.emulator.webhooks import RecordingWebhook, allow, annotate

pytestmark = pytest.mark.anyio

Obj = dict[str, Any]
MWC = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"


@pytest.fixture
async def emu() -> AsyncIterator[Emulator]:
    async with Emulator() as emu:
        yield emu


@pytest.fixture
async def hook(tmp_path: Path) -> AsyncIterator[RecordingWebhook]:
    server = await RecordingWebhook(tmp_path / "hook").start()
    yield server
    await server.stop()


@pytest.fixture
async def api(emu: Emulator) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=emu.url, timeout=30) as client:
        yield client


def webhook(hook: RecordingWebhook, name: str, path: str, **fields: Any) -> Obj:
    """A webhook entry aimed at ``hook`` by URL (``service=`` to aim by Service reference)."""
    service = fields.pop("service", None)
    client: Obj = {"caBundle": hook.ca_bundle}
    if service:
        client["service"] = {**service, "path": path}
    else:
        client["url"] = f"https://{hook.address}{path}"
    return {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "clientConfig": client,
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
        **fields,
    }


def configuration(name: str, *hooks: Obj) -> Obj:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": list(hooks),
    }


def pod(name: str | None = "p", **meta: Any) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {k: v for k, v in {"name": name, **meta}.items() if v is not None},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


async def register(api: httpx.AsyncClient, *configs: Obj) -> None:
    for config in configs:
        r = await api.post(MWC, json=config)
        assert r.status_code == 201, r.text


async def create_pod(api: httpx.AsyncClient, body: Obj, ns: str = "default", query: str = "") -> httpx.Response:
    return await api.post(f"/api/v1/namespaces/{ns}/pods{query}", json=body)


def annotations_of(obj: Obj) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


async def test_create_sends_an_admission_review_and_stores_the_patched_pod(
    emu: Emulator, api: httpx.AsyncClient, hook: RecordingWebhook
) -> None:
    hook.routes["/mutate"] = annotate("example.com/seen", "yes")
    await register(api, configuration("one", webhook(hook, "one.example.com", "/mutate", timeoutSeconds=7)))

    r = await create_pod(api, pod(), query="?fieldManager=me")

    assert r.status_code == 201, r.text
    assert annotations_of(r.json()) == {"example.com/seen": "yes"}
    assert annotations_of(emu.get("v1", "pods", "p", "default")) == {"example.com/seen": "yes"}
    (call,) = hook.calls
    assert call.path == "/mutate" and call.query == "timeout=7s"
    assert call.review["apiVersion"] == "admission.k8s.io/v1" and call.review["kind"] == "AdmissionReview"
    req = call.review["request"]
    assert req["operation"] == "CREATE" and req["namespace"] == "default" and req["name"] == "p"
    assert req["kind"] == {"group": "", "version": "v1", "kind": "Pod"}
    assert req["resource"] == {"group": "", "version": "v1", "resource": "pods"}
    assert req["dryRun"] is False and req["oldObject"] is None and req["uid"]
    assert req["options"] == {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "me"}
    # the object is defaulted before admission and not yet given a uid
    assert req["object"]["spec"]["schedulerName"] == "default-scheduler"
    assert "uid" not in req["object"]["metadata"]


async def test_configurations_are_called_in_name_order_then_listed_order(
    api: httpx.AsyncClient, hook: RecordingWebhook
) -> None:
    for path in ("/a1", "/a2", "/b"):
        hook.routes[path] = lambda review: (200, allow(review))
    # created b first: the order is by configuration name, not creation
    await register(
        api,
        configuration("b-config", webhook(hook, "b.example.com", "/b")),
        configuration("a-config", webhook(hook, "a2.example.com", "/a2"), webhook(hook, "a1.example.com", "/a1")),
    )
    assert (await create_pod(api, pod())).status_code == 201
    assert hook.paths() == ["/a2", "/a1", "/b"]


async def test_service_reference_resolves_through_the_service_map_and_checks_the_service_name(
    emu: Emulator, api: httpx.AsyncClient, tmp_path: Path
) -> None:
    # a certificate for the Service's DNS name only: dialled at 127.0.0.1, verified as the service
    hook = await RecordingWebhook(tmp_path / "svc", hosts=("hook.webhooks.svc",)).start()
    try:
        hook.routes["/m"] = annotate("example.com/by", "service")
        service = {"namespace": "webhooks", "name": "hook", "port": 8443}
        await register(api, configuration("svc", webhook(hook, "svc.example.com", "/m", service=service)))
        unmapped = await create_pod(api, pod("before"))
        assert unmapped.status_code == 500, unmapped.text  # failurePolicy defaults to Fail
        assert 'failed calling webhook "svc.example.com"' in unmapped.json()["message"]
        assert "not mapped" in unmapped.json()["message"]

        emu.map_service("webhooks", "hook", 8443, hook.address)
        r = await create_pod(api, pod("after"))
        assert r.status_code == 201, r.text
        assert annotations_of(r.json()) == {"example.com/by": "service"}
        assert hook.calls[-1].query == "timeout=10s"  # the default timeoutSeconds
    finally:
        await hook.stop()


async def test_a_certificate_not_for_the_service_name_is_a_calling_error(
    emu: Emulator, api: httpx.AsyncClient, tmp_path: Path
) -> None:
    hook = await RecordingWebhook(tmp_path / "wrong", hosts=("127.0.0.1", "other.webhooks.svc")).start()
    try:
        hook.routes["/m"] = annotate("example.com/by", "service")
        service = {"namespace": "webhooks", "name": "hook", "port": 443}
        emu.map_service("webhooks", "hook", 443, hook.address)
        await register(api, configuration("svc", webhook(hook, "svc.example.com", "/m", service=service)))
        r = await create_pod(api, pod())
        assert r.status_code == 500 and "failed calling webhook" in r.json()["message"]
        assert hook.calls == []  # the TLS handshake failed: the webhook never saw the review
        assert emu.try_get("v1", "pods", "p", "default") is None
    finally:
        await hook.stop()


@pytest.mark.parametrize("failure", ["status-500", "wrong-uid", "timeout", "patch-without-type"])
async def test_failure_policy_ignore_admits_unchanged_and_fail_rejects(
    emu: Emulator, api: httpx.AsyncClient, hook: RecordingWebhook, failure: str
) -> None:
    async def answer(review: Obj) -> tuple[int, Obj]:
        if failure == "status-500":
            return 500, {"error": "boom"}
        if failure == "timeout":
            await asyncio.sleep(1.5)
            return 200, allow(review)
        doc = allow(review, [{"op": "add", "path": "/metadata/labels", "value": {"x": "y"}}])
        if failure == "wrong-uid":
            doc["response"]["uid"] = "someone-else"
        else:
            del doc["response"]["patchType"]
        return 200, doc

    hook.routes["/m"] = answer
    await register(
        api,
        configuration("ignore", webhook(hook, "ignore.example.com", "/m", failurePolicy="Ignore", timeoutSeconds=1)),
    )
    r = await create_pod(api, pod("ignored"))
    assert r.status_code == 201, r.text
    assert "labels" not in r.json()["metadata"]  # admitted as sent

    await api.delete(f"{MWC}/ignore")
    await register(
        api, configuration("fail", webhook(hook, "fail.example.com", "/m", failurePolicy="Fail", timeoutSeconds=1))
    )
    r = await create_pod(api, pod("failed"))
    assert r.status_code == 500, r.text
    assert r.json()["message"].startswith('Internal error occurred: failed calling webhook "fail.example.com"')
    assert emu.try_get("v1", "pods", "failed", "default") is None


async def test_a_denial_is_the_webhook_status_with_its_name(
    emu: Emulator, api: httpx.AsyncClient, hook: RecordingWebhook
) -> None:
    def deny(review: Obj) -> tuple[int, Obj]:
        doc = allow(review)
        doc["response"] = {
            "uid": review["request"]["uid"],
            "allowed": False,
            "status": {"code": 200, "message": "no GPUs for you"},
        }
        return 200, doc

    hook.routes["/deny"] = deny
    await register(api, configuration("deny", webhook(hook, "deny.example.com", "/deny", failurePolicy="Ignore")))
    r = await create_pod(api, pod())
    assert r.status_code == 400  # a code below 400 is raised to 400; Ignore does not apply to a denial
    assert r.json()["message"] == 'admission webhook "deny.example.com" denied the request: no GPUs for you'
    assert emu.try_get("v1", "pods", "p", "default") is None


async def test_selectors_choose_namespaces_and_objects(
    emu: Emulator, api: httpx.AsyncClient, hook: RecordingWebhook
) -> None:
    hook.routes["/m"] = annotate("example.com/seen", "yes")
    selected = webhook(
        hook,
        "sel.example.com",
        "/m",
        namespaceSelector={"matchExpressions": [{"key": "inject", "operator": "NotIn", "values": ["disabled"]}]},
        objectSelector={"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]},
    )
    await register(api, configuration("sel", selected))
    emu.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "off", "labels": {"inject": "disabled"}}})

    in_default = (await create_pod(api, pod("a"))).json()
    opted_out_ns = (await create_pod(api, pod("b"), ns="off")).json()
    opted_out_pod = (await create_pod(api, pod("c", labels={"skip": "1"}))).json()
    missing_ns = await create_pod(api, pod("d"), ns="nowhere")

    assert annotations_of(in_default) == {"example.com/seen": "yes"}
    assert annotations_of(opted_out_ns) == {} and annotations_of(opted_out_pod) == {}
    assert missing_ns.status_code == 404  # NamespaceLifecycle runs before the webhooks
    assert len(hook.calls) == 1


async def test_match_conditions_skip_and_errors_follow_the_failure_policy(
    emu: Emulator, api: httpx.AsyncClient, hook: RecordingWebhook
) -> None:
    hook.routes["/m"] = annotate("example.com/seen", "yes")
    conditions = [
        {"name": "not-skipped", "expression": "!('skip' in object.metadata.labels)"},
        {"name": "not-system", "expression": "!request.userInfo.username.startsWith('system:node:')"},
    ]
    await register(
        api,
        configuration("mc", webhook(hook, "mc.example.com", "/m", failurePolicy="Ignore", matchConditions=conditions)),
    )
    labelled = (await create_pod(api, pod("a", labels={"app": "x"}))).json()
    skipped = (await create_pod(api, pod("b", labels={"skip": "1"}))).json()
    # no labels at all: `object.metadata.labels` is an evaluation error → Ignore skips the webhook
    unlabelled = await create_pod(api, pod("c"))
    assert annotations_of(labelled) == {"example.com/seen": "yes"}
    assert annotations_of(skipped) == {} and unlabelled.status_code == 201 and annotations_of(unlabelled.json()) == {}
    assert len(hook.calls) == 1

    # the same error with failurePolicy Fail rejects the request without calling the webhook
    await api.delete(f"{MWC}/mc")
    await register(
        api,
        configuration("mc2", webhook(hook, "mc2.example.com", "/m", failurePolicy="Fail", matchConditions=conditions)),
    )
    r = await create_pod(api, pod("d"))
    assert r.status_code == 500 and "failed to evaluate match conditions" in r.json()["message"]
    assert len(hook.calls) == 1


async def test_reinvocation_if_needed_calls_an_earlier_webhook_again_once(
    api: httpx.AsyncClient, hook: RecordingWebhook
) -> None:
    hook.routes["/first"] = lambda review: (200, allow(review))  # changes nothing itself
    hook.routes["/second"] = annotate("example.com/second", "done")
    hook.routes["/never"] = lambda review: (200, allow(review))
    await register(
        api,
        configuration(
            "a",
            webhook(hook, "first.example.com", "/first", reinvocationPolicy="IfNeeded"),
            webhook(hook, "never.example.com", "/never", reinvocationPolicy="Never"),
            webhook(hook, "second.example.com", "/second", reinvocationPolicy="IfNeeded"),
        ),
    )
    r = await create_pod(api, pod())
    assert r.status_code == 201
    # second changed the object: first (IfNeeded, called before) runs again; never does not; second
    # is not re-called for its own change
    assert hook.paths() == ["/first", "/never", "/second", "/first"]
    assert "example.com/second" in hook.calls[-1].review["request"]["object"]["metadata"]["annotations"]


async def test_dry_run_is_sent_to_the_webhook_and_nothing_is_stored(
    emu: Emulator, api: httpx.AsyncClient, hook: RecordingWebhook
) -> None:
    hook.routes["/m"] = annotate("example.com/seen", "yes")
    await register(api, configuration("dry", webhook(hook, "dry.example.com", "/m")))
    r = await create_pod(api, pod(generateName="gen-", name=None), query="?dryRun=All")
    assert r.status_code == 201, r.text
    assert annotations_of(r.json()) == {"example.com/seen": "yes"}
    req = hook.calls[0].review["request"]
    assert req["dryRun"] is True and req["name"] == "" and req["options"]["dryRun"] == ["All"]
    assert emu.list("v1", "pods") == []


async def test_configurations_are_validated_and_defaulted(api: httpx.AsyncClient, hook: RecordingWebhook) -> None:
    good = webhook(hook, "good.example.com", "/m")
    r = await api.post(MWC, json=configuration("good", good))
    stored = r.json()["webhooks"][0]
    assert (stored["failurePolicy"], stored["matchPolicy"], stored["timeoutSeconds"], stored["reinvocationPolicy"]) == (
        "Fail",
        "Equivalent",
        10,
        "Never",
    )
    assert stored["namespaceSelector"] == {} and stored["rules"][0]["scope"] == "*"
    bad = {
        "timeoutSeconds": 31,
        "sideEffects": "Some",
        "matchConditions": [
            {"name": "authz", "expression": "authorizer.group('').resource('pods').check('create').allowed()"}
        ],
        "clientConfig": {"url": "http://127.0.0.1/m?x=1"},
    }
    r = await api.post(MWC, json=configuration("bad", {**good, **bad}))
    assert r.status_code == 422, r.text
    fields = {c["field"] for c in r.json()["details"]["causes"]}
    assert {
        "webhooks[0].timeoutSeconds",
        "webhooks[0].sideEffects",
        "webhooks[0].matchConditions[0].expression",
        "webhooks[0].clientConfig.url",
    } <= fields


async def test_python_api_create_admitted_runs_the_chain(
    emu: Emulator, api: httpx.AsyncClient, hook: RecordingWebhook
) -> None:
    hook.routes["/m"] = annotate("example.com/seen", "yes")
    await register(api, configuration("py", webhook(hook, "py.example.com", "/m")))
    result = await emu.create_admitted(pod(), user={"username": "alice"})
    assert annotations_of(result.obj) == {"example.com/seen": "yes"}
    assert [c.outcome for c in result.calls] == ["patched"]
    assert hook.calls[0].review["request"]["userInfo"] == {"username": "alice"}
    # the plain Python API stays outside admission (fixtures load objects as they are)
    assert annotations_of(emu.create(pod("plain"))) == {}


def test_cli_service_mapping_parses_and_refuses_malformed_input() -> None:
    import argparse

    from extender.emulator.cli import _service_mapping

    assert _service_mapping("sky-system/sky-scheduler-webhook:443=127.0.0.1:9443") == (
        "sky-system",
        "sky-scheduler-webhook",
        443,
        "127.0.0.1:9443",
    )
    for bad in ("sky-system/hook=127.0.0.1:9443", "hook:443=127.0.0.1:9443", "ns/hook:443=127.0.0.1", "ns/hook:x=h:1"):
        with pytest.raises(argparse.ArgumentTypeError):
            _service_mapping(bad)
