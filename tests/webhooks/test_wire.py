"""The webhook over real HTTPS, as kube-apiserver calls it: AdmissionReview v1 in and out."""

from __future__ import annotations

import base64
import copy
import json
import ssl
from typing import Any

import httpx
import pytest

from extender import wellknown
from extender.metrics import Metrics
from extender.simulate.certs import TLSFiles
from tests import builders as b
from tests.webhooks import helpers as h
from webhooks.state import WebhookConfig

pytestmark = pytest.mark.anyio

NS = "ml-research"
GPU = wellknown.RESOURCE_GPU
INJECT = {wellknown.LABEL_INJECT: wellknown.LABEL_INJECT_ENABLED}


def llama_cluster() -> list[dict[str, Any]]:
    """The sample's world: PodGroup llama-sft (queue research), four 8-GPU quotas; worker 0 runs
    on N0 and fills q-llama-sft-0, so the next free quota by name is q-llama-sft-1."""
    objs: list[dict[str, Any]] = [b.node(f"N{i}") for i in range(4)]
    objs.append(b.podgroup("llama-sft", namespace=NS, min_member=4, queue="research"))
    for i in range(4):
        status = h.bound("N0") if i == 0 else None
        objs.append(b.quota(f"q-llama-sft-{i}", queue="research", gpu=8, hca=8, status=status))
    objs.append(
        b.pod(
            "llama-sft-worker-0",
            namespace=NS,
            group="llama-sft",
            quota="q-llama-sft-0",
            gpu=8,
            hca=8,
            index=0,
            node="N0",
            phase="Running",
        )
    )
    return objs


def small_cluster(quotas: int = 3) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [b.node("N0"), b.node("N1")]
    objs += [b.quota(f"q-{i}", queue="default") for i in range(quotas)]
    return objs


# --- the sample, verbatim -------------------------------------------------------------------------
async def test_the_sample_review_gets_exactly_the_sample_response(tls: TLSFiles) -> None:
    state = h.make_state(llama_cluster())
    async with h.serve(state, tls) as hook:
        sent = h.sample_review()
        a = await hook.admit(sent)
    expected = h.sample_response()
    assert a.status_code == 200
    assert a.body["response"]["uid"] == expected["response"]["uid"]
    assert a.body["response"]["patchType"] == "JSONPatch"
    # the sample's operations, and after quota-name the claim entry the pod's claim accounts for
    # (``claim-entry``, newer than the sample: the in-flight entry recorded on the quota)
    sample_ops = h.decode_patch(expected)
    entry = {
        "op": "add",
        "path": "/metadata/annotations/scheduling.infini-ai.com~1claim-entry",
        "value": "admission:" + expected["response"]["uid"],
    }
    assert a.ops == [sample_ops[0], entry, *sample_ops[1:]]
    assert a.annotations[wellknown.ANNO_QUOTA_NAME] == "q-llama-sft-1"
    assert a.annotations[wellknown.ANNO_TASK_INDEX] == "1"
    assert a.body["response"]["auditAnnotations"]["quota"] == "q-llama-sft-1"
    assert "warnings" not in a.body["response"]


async def test_applying_the_webhook_to_its_own_output_gives_no_patch(tls: TLSFiles) -> None:
    state = h.make_state(llama_cluster())
    async with h.serve(state, tls) as hook:
        first = await hook.admit(h.sample_review())
        second = await hook.again(first)
    assert first.ops
    assert second.status_code == 200
    assert "patch" not in second.response and "patchType" not in second.response
    assert second.ops == []
    # the re-invocation did not count the same pod twice
    assert len(state.inflight) == 1


async def test_the_query_string_the_apiserver_appends_is_ignored(tls: TLSFiles) -> None:
    state = h.make_state(llama_cluster())
    async with h.serve(state, tls) as hook:
        plain = await hook.admit(h.sample_review(), path="/mutate/pods")
        timed = await hook.admit(h.sample_review(), path="/mutate/pods?timeout=10s")
        other = await hook.post(h.sample_review(), path="/mutate/other?timeout=10s")
    assert plain.status_code == timed.status_code == 200
    assert plain.quota == "q-llama-sft-1"
    assert timed.quota == "q-llama-sft-2"  # the first one is in flight
    assert other.status_code == 404


# --- shapes of pods --------------------------------------------------------------------------------
async def test_dry_run_gets_the_same_patch_and_records_nothing(tls: TLSFiles) -> None:
    state = h.make_state(llama_cluster())
    async with h.serve(state, tls) as hook:
        dry_doc = h.sample_review()
        dry_doc["request"]["dryRun"] = True
        dry = await hook.admit(dry_doc)
        assert len(state.inflight) == 0
        dry_again = await hook.admit(copy.deepcopy(dry_doc))
        real = await hook.admit(h.sample_review())
        assert len(state.inflight) == 1
    assert dry.quota == dry_again.quota == real.quota == "q-llama-sft-1"


async def test_a_pod_without_an_annotations_map_gets_one_created_first(tls: TLSFiles) -> None:
    state = h.make_state(small_cluster())
    pod = h.admission_pod("solo", no_annotations=True, gpu=1, hca=1)
    async with h.serve(state, tls) as hook:
        a = await hook.pod(pod)
        again = await hook.again(a)
    assert "annotations" not in pod["metadata"]
    assert a.ops[0] == {"op": "add", "path": "/metadata/annotations", "value": {}}
    assert a.ops[1] == {
        "op": "add",
        "path": "/metadata/annotations/scheduling.infini-ai.com~1quota-name",
        "value": "q-0",
    }
    # "solo" has no ordinal, no index labels: no task-index
    assert a.annotations == {
        wellknown.ANNO_QUOTA_NAME: "q-0",
        wellknown.ANNO_CLAIM_ENTRY: "admission:" + a.sent["request"]["uid"],
    }
    assert again.ops == []


async def test_a_null_annotations_map_is_replaced_by_an_empty_one_first(tls: TLSFiles) -> None:
    state = h.make_state(small_cluster())
    pod = h.admission_pod("solo", no_annotations=True)
    pod["metadata"]["annotations"] = None
    async with h.serve(state, tls) as hook:
        a = await hook.pod(pod)
    assert a.ops[0] == {"op": "add", "path": "/metadata/annotations", "value": {}}
    assert a.quota == "q-0"


async def test_a_generate_name_pod_without_index_labels_gets_no_task_index(tls: TLSFiles) -> None:
    # the prefix ends in a digit: only a real name's ordinal may count, and there is none yet
    state = h.make_state(small_cluster())
    pod = h.admission_pod(None, generate_name="trainer-7")
    async with h.serve(state, tls) as hook:
        a = await hook.pod(pod)
        again = await hook.again(a)
    assert "name" not in a.sent["request"] and "name" not in a.pod["metadata"]
    assert a.quota == "q-0"
    assert wellknown.ANNO_TASK_INDEX not in a.annotations
    assert again.ops == []


async def test_a_named_pod_without_index_labels_gets_the_ordinal_of_its_name(tls: TLSFiles) -> None:
    state = h.make_state(small_cluster())
    async with h.serve(state, tls) as hook:
        a = await hook.pod(h.admission_pod("train-worker-3"))
    assert a.annotations[wellknown.ANNO_TASK_INDEX] == "3"


@pytest.mark.parametrize(
    "label",
    [
        "training.kubeflow.org/replica-index",
        "batch.kubernetes.io/job-completion-index",
        "jobset.sigs.k8s.io/job-index",
        "leaderworkerset.sigs.k8s.io/worker-index",
        "volcano.sh/task-index",
    ],
)
async def test_framework_index_labels_become_the_task_index(tls: TLSFiles, label: str) -> None:
    state = h.make_state(small_cluster())
    pod = h.admission_pod(None, generate_name="job-x-", labels={label: "5"})
    async with h.serve(state, tls) as hook:
        a = await hook.pod(pod)
        again = await hook.again(a)
    assert a.annotations[wellknown.ANNO_TASK_INDEX] == "5"
    assert a.quota == "q-0"
    assert again.ops == []


async def test_an_index_annotation_counts_like_a_label(tls: TLSFiles) -> None:
    state = h.make_state(small_cluster())
    pod = h.admission_pod(None, generate_name="job-x-", annotations={"batch.kubernetes.io/job-completion-index": "2"})
    async with h.serve(state, tls) as hook:
        a = await hook.pod(pod)
    assert a.annotations[wellknown.ANNO_TASK_INDEX] == "2"


# --- which pods ------------------------------------------------------------------------------------
async def test_a_gpu_pod_in_an_inject_namespace_is_routed_to_us_and_gets_a_quota(tls: TLSFiles) -> None:
    state = h.make_state(small_cluster(), namespaces={"team-a": INJECT})
    pod = h.admission_pod("gpu-0", namespace="team-a", scheduler="default-scheduler", gpu=1, hca=None)
    async with h.serve(state, tls) as hook:
        a = await hook.pod(pod)
        again = await hook.again(a)
    assert a.ops[0] == {"op": "add", "path": "/spec/schedulerName", "value": wellknown.SCHEDULER_NAME}
    assert a.pod["spec"]["schedulerName"] == wellknown.SCHEDULER_NAME
    assert a.quota == "q-0"
    assert again.ops == []


async def test_an_rdma_only_pod_in_an_inject_namespace_is_routed_to_us(tls: TLSFiles) -> None:
    state = h.make_state(small_cluster(), namespaces={"team-a": INJECT})
    pod = h.admission_pod("rdma-0", namespace="team-a", scheduler="default-scheduler", gpu=None, hca=1)
    async with h.serve(state, tls) as hook:
        a = await hook.pod(pod)
    assert a.pod["spec"]["schedulerName"] == wellknown.SCHEDULER_NAME


async def test_a_spot_pod_in_an_inject_namespace_is_routed_to_us_without_a_quota(tls: TLSFiles) -> None:
    state = h.make_state(small_cluster(), namespaces={"team-a": INJECT})
    spot = {wellknown.RESOURCE_SPOT_GPU: "1"}
    pod = h.admission_pod("spot-x", namespace="team-a", scheduler="", gpu=None, hca=None, extra=spot)
    async with h.serve(state, tls) as hook:
        a = await hook.pod(pod)
    assert a.ops == [{"op": "add", "path": "/spec/schedulerName", "value": wellknown.SCHEDULER_NAME}]


@pytest.mark.parametrize(
    ("namespace", "scheduler", "gpu", "hca", "why"),
    [
        ("team-a", "default-scheduler", None, None, "inject namespace, CPU only"),
        ("team-a", "volcano", 1, 1, "inject namespace, another scheduler asked for by name"),
        ("plain", "default-scheduler", 1, 1, "GPU pod, namespace not labelled"),
        ("unknown", "default-scheduler", 1, 1, "namespace not known (yet)"),
        ("off", "default-scheduler", 1, 1, "namespace labelled inject=disabled"),
    ],
)
async def test_pods_that_are_not_ours_are_allowed_without_a_patch(
    tls: TLSFiles, namespace: str, scheduler: str, gpu: int | None, hca: int | None, why: str
) -> None:
    namespaces = {"team-a": INJECT, "plain": {}, "off": {wellknown.LABEL_INJECT: "disabled"}}
    state = h.make_state(small_cluster(), namespaces=namespaces)
    pod = h.admission_pod("p-0", namespace=namespace, scheduler=scheduler, gpu=gpu, hca=hca)
    async with h.serve(state, tls) as hook:
        a = await hook.pod(pod)
    assert a.status_code == 200, why
    assert set(a.response) == {"uid", "allowed"}, why
    assert len(state.inflight) == 0


async def test_a_configured_scheduler_name_is_the_one_that_counts(tls: TLSFiles) -> None:
    state = h.make_state(small_cluster(), config=WebhookConfig(scheduler_name="sky-2"))
    async with h.serve(state, tls) as hook:
        ours = await hook.pod(h.admission_pod("a-0", scheduler="sky-2"))
        default = await hook.pod(h.admission_pod("b-0", scheduler=wellknown.SCHEDULER_NAME))
    assert ours.quota == "q-0"
    assert default.ops == []


async def test_a_pod_that_names_its_node_is_left_alone(tls: TLSFiles) -> None:
    state = h.make_state(small_cluster())
    pod = h.admission_pod("pinned-0")
    pod["spec"]["nodeName"] = "N0"
    async with h.serve(state, tls) as hook:
        a = await hook.pod(pod)
    assert a.ops == []


async def test_update_and_delete_of_our_pods_are_allowed_without_a_patch(tls: TLSFiles) -> None:
    state = h.make_state(small_cluster())
    pod = h.admission_pod("p-0")
    async with h.serve(state, tls) as hook:
        update = await hook.admit(h.review(pod, operation="UPDATE", old=pod))
        delete = await hook.admit(h.review(None, operation="DELETE", old=pod))
    assert set(update.response) == {"uid", "allowed"}
    assert set(delete.response) == {"uid", "allowed"}


async def test_other_kinds_and_pod_subresources_are_allowed_without_a_patch(tls: TLSFiles) -> None:
    state = h.make_state(small_cluster())
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "default"}}
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p-0", "namespace": "default"}}
    async with h.serve(state, tls) as hook:
        dep = await hook.admit(
            h.review(deployment, kind=("apps", "v1", "Deployment"), resource=("apps", "v1", "deployments"))
        )
        bind = await hook.admit(
            h.review(binding, kind=("", "v1", "Binding"), resource=("", "v1", "pods"), sub_resource="binding")
        )
    assert set(dep.response) == {"uid", "allowed"}
    assert set(bind.response) == {"uid", "allowed"}


# --- bad input ------------------------------------------------------------------------------------
def _no_trace(r: httpx.Response) -> None:
    assert r.status_code != 500
    assert "Traceback" not in r.text
    assert r.headers["content-type"].startswith("application/json")


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"{not json", "not valid JSON"),
        (b"", "not valid JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}', "no request"),
        (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}', "request.uid"),
        (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": 7}}', "request.uid"),
        (b'{"apiVersion": "v1", "kind": "Pod", "metadata": {}}', "apiVersion must be admission.k8s.io/v1"),
    ],
)
async def test_input_without_a_uid_to_echo_gets_http_400_with_a_json_status(
    tls: TLSFiles, body: bytes, words: str
) -> None:
    state = h.make_state(small_cluster())
    async with h.serve(state, tls) as hook:
        r = await hook.post(body)
    _no_trace(r)
    assert r.status_code == 400
    doc = r.json()
    assert doc["kind"] == "Status" and doc["status"] == "Failure" and doc["code"] == 400
    assert words in doc["message"]


def _mangled(change: str) -> dict[str, Any]:
    doc = h.review(h.admission_pod("p-0"), uid="bad-1")
    req = doc["request"]
    if change == "apiVersion":
        doc["apiVersion"] = "admission.k8s.io/v2"
    elif change == "kind":
        doc["kind"] = "AdmissionRequest"
    elif change == "no object":
        del req["object"]
    elif change == "null object":
        req["object"] = None
    elif change == "object is a Service":
        req["object"] = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}
    elif change == "object is a string":
        req["object"] = "a pod"
    elif change == "object without metadata":
        del req["object"]["metadata"]
    elif change == "bad quantity":
        req["object"]["spec"]["containers"][0]["resources"]["requests"][wellknown.RESOURCE_GPU] = "lots"
    elif change == "no kind":
        del req["kind"]
    elif change == "no operation":
        del req["operation"]
    return doc


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ("apiVersion", "apiVersion must be admission.k8s.io/v1"),
        ("kind", "kind must be AdmissionReview"),
        ("no object", "request.object is missing"),
        ("null object", "request.object is missing"),
        ("object is a Service", "is a 'Service', not a Pod"),
        ("object is a string", "must be a Pod object"),
        ("object without metadata", "no metadata"),
        ("bad quantity", "lots"),
        ("no kind", "request.kind"),
        ("no operation", "request.operation"),
    ],
)
async def test_bad_reviews_with_a_uid_are_allowed_with_a_status_saying_why(
    tls: TLSFiles, change: str, words: str
) -> None:
    state = h.make_state(small_cluster())
    async with h.serve(state, tls) as hook:
        r = await hook.post(_mangled(change))
    _no_trace(r)
    assert r.status_code == 200
    doc = r.json()
    assert doc["kind"] == "AdmissionReview"
    resp = doc["response"]
    assert resp["uid"] == "bad-1"
    assert resp["allowed"] is True
    assert "patch" not in resp
    assert words in resp["status"]["message"]
    assert any(words in w for w in resp["warnings"])
    assert len(state.inflight) == 0


async def test_a_v1beta1_review_is_answered_in_v1beta1_so_the_pod_still_gets_in(tls: TLSFiles) -> None:
    state = h.make_state(small_cluster())
    doc = h.review(h.admission_pod("p-0"), uid="old-1")
    doc["apiVersion"] = "admission.k8s.io/v1beta1"
    async with h.serve(state, tls) as hook:
        r = await hook.post(doc)
    assert r.status_code == 200
    assert r.json()["apiVersion"] == "admission.k8s.io/v1beta1"
    assert r.json()["response"]["uid"] == "old-1"


async def test_an_oversized_body_is_refused_with_413(tls: TLSFiles) -> None:
    state = h.make_state(small_cluster(), config=WebhookConfig(max_body_bytes=2048))
    doc = h.review(h.admission_pod("p-0", annotations={"big": "x" * 4096}))
    async with h.serve(state, tls) as hook:
        r = await hook.post(doc)
        ok = await hook.admit(h.review(h.admission_pod("p-1")))
    _no_trace(r)
    assert r.status_code == 413
    assert r.json()["reason"] == "RequestEntityTooLarge"
    assert ok.quota == "q-0"


async def test_a_failure_inside_the_decision_admits_the_pod_unchanged_and_says_so(tls: TLSFiles) -> None:
    state = h.make_state(small_cluster())

    def broken() -> bool:
        raise RuntimeError("informer exploded")

    state.synced = broken
    async with h.serve(state, tls) as hook:
        r = await hook.post(h.review(h.admission_pod("p-0"), uid="u-1"))
    _no_trace(r)
    resp = r.json()["response"]
    assert resp["allowed"] is True and "patch" not in resp
    assert "informer exploded" in resp["status"]["message"]


# --- TLS ------------------------------------------------------------------------------------------
async def test_a_client_that_does_not_trust_the_ca_is_refused(tls: TLSFiles) -> None:
    state = h.make_state(small_cluster())
    async with h.serve(state, tls) as hook:
        port = hook.server.port
        async with httpx.AsyncClient(verify=ssl.create_default_context()) as stranger:
            with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await stranger.post(f"https://127.0.0.1:{port}{h.URL}", content=b"{}")
        async with httpx.AsyncClient() as plain:
            with pytest.raises(httpx.HTTPError):
                await plain.post(f"http://127.0.0.1:{port}{h.URL}", content=b"{}")


async def test_reloading_tls_serves_a_rotated_certificate(tls: TLSFiles, tmp_path: Any) -> None:
    from extender.simulate.certs import write_self_signed

    state = h.make_state(small_cluster())
    live = write_self_signed(tmp_path / "live", ca_name="first-ca")
    async with h.serve(state, live) as hook:
        rotated = write_self_signed(tmp_path / "rotated", ca_name="second-ca")
        live.cert_file.write_bytes(rotated.cert_file.read_bytes())
        live.key_file.write_bytes(rotated.key_file.read_bytes())
        hook.server.reload_tls()
        async with httpx.AsyncClient(verify=h.ca_context(rotated)) as fresh:
            r = await fresh.post(f"https://127.0.0.1:{hook.server.port}{h.URL}", content=b"{}")
        async with httpx.AsyncClient(verify=h.ca_context(live)) as old_ca:
            with pytest.raises(httpx.ConnectError):
                await old_ca.post(f"https://127.0.0.1:{hook.server.port}{h.URL}", content=b"{}")
    assert r.status_code == 400  # served (an empty review), under the new certificate


# --- metrics ---------------------------------------------------------------------------------------
async def test_each_review_is_timed_in_the_webhooks_own_histogram(tls: TLSFiles) -> None:
    metrics = Metrics()
    state = h.make_state(small_cluster(), metrics=metrics)
    async with h.serve(state, tls) as hook:
        await hook.pod(h.admission_pod("p-0"))
        await hook.post(b"nope")
    count = metrics.registry.get_sample_value("sky_webhook_request_seconds_count", {})
    assert count == 2
    assert metrics.registry.get_sample_value("sky_webhook_requests_total", {"code": "400"}) == 1
    assert metrics.registry.get_sample_value("sky_webhook_requests_total", {"code": "200"}) == 1
    # not filed under the extender's verbs
    assert metrics.registry.get_sample_value("sky_extender_request_seconds_count", {"verb": "mutate"}) is None


def test_the_patch_in_the_sample_response_is_base64_json() -> None:
    # guards the fixture itself: the sample is the documented shape
    resp = h.sample_response()["response"]
    assert json.loads(base64.b64decode(resp["patch"]))[0]["op"] == "add"
