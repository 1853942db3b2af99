"""The Helm chart: helm lint and helm template over every value variant, the objects of a default
install, and the CRDs and policy the chart ships (byte-for-byte copies of the sources)."""

from __future__ import annotations

import pytest

from tests.deploy.chart import (
    ALL_VARIANTS,
    CHART,
    NAMESPACE,
    REPO,
    VARIANTS,
    find,
    helm_lint,
    helm_template,
    one,
    parse_documents,
    render,
    render_variant,
)


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
