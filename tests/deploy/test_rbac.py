"""RBAC: each component's roles grant exactly the (apiGroup, resource, verb) set its code uses.

Where the sets come from:
- serve: the informers of ``extender/service.py`` (list + watch each) and the calls of
  ``extender.kube.calls.API_CALLS`` that serve makes (the writer is the only module that writes);
- discovery agents: their reads, recorded by running ``discovery.common.kube.KubeReader`` against
  a recording client, plus the writer calls they make;
- kube-scheduler: the built-in roles the official "my-scheduler" example binds, plus its own Lease.

``API_CALLS`` is one flat set for every component, so the split below (which component makes
which writer call) is written here — and checked to cover ``API_CALLS`` exactly, so a new call
cannot go unassigned.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Sequence
from typing import Any

import orjson
import pytest

from tests.deploy.chart import NAMESPACE, VARIANTS, Obj, chart_values, find, one, render_variant

GROUP = "scheduling.infini-ai.com"
Grant = tuple[str, str, str, str]
"""(apiGroup, resource or resource/subresource, verb, resourceName or "")."""


def _writer_calls() -> frozenset[Any]:
    from extender.kube.calls import API_CALLS

    return API_CALLS


def _as_grant(call: Any, resource_name: str = "") -> Grant:
    resource = call.resource + (f"/{call.subresource}" if call.subresource else "")
    return (call.group, resource, call.verb, resource_name)


def _call(verb: str, group: str, resource: str, subresource: str = "") -> Any:
    from extender.kube.calls import ApiCall

    return ApiCall(verb, group, resource, subresource)


# Which component makes which KubeWriter call.
def _roce_writer_calls() -> set[Any]:
    # both discovery agents: KubeWriter.apply_node_topology (get, create, update) and
    # .update_node_topology_status (update status: the heartbeat) — the RoCE agent for its own
    # node, the IB collector for every node it maps; never a Node
    return {
        _call("get", GROUP, "nodetopologies"),
        _call("create", GROUP, "nodetopologies"),
        _call("update", GROUP, "nodetopologies"),
        _call("update", GROUP, "nodetopologies", "status"),
    }


def _lease_calls() -> set[Any]:
    # extender.kube.leader.LeaderElector through KubeWriter.get_lease / create_lease / update_lease
    return {_call(v, "coordination.k8s.io", "leases") for v in ("get", "create", "update")}


def _serve_writer_calls() -> set[Any]:
    # quota / podgroup status, bind, annotate, evict, events
    return {
        _call("get", GROUP, "quotas"),
        _call("update", GROUP, "quotas", "status"),
        _call("get", GROUP, "podgroups"),
        _call("update", GROUP, "podgroups", "status"),
        _call("get", GROUP, "queues"),
        _call("update", GROUP, "queues", "status"),
        _call("get", GROUP, "jobqueues"),
        _call("update", GROUP, "jobqueues", "status"),
        _call("create", GROUP, "quotas"),
        _call("update", GROUP, "quotas"),
        _call("delete", GROUP, "quotas"),
        _call("get", "", "pods"),  # a pod that went while no replica watched, read once after the sync
        _call("create", "", "pods", "binding"),
        _call("patch", "", "pods"),
        _call("create", "", "events"),
        _call("patch", "", "events"),
        _call("patch", "", "nodes"),  # the binder leader: NodeTopology zone label → Node
    }


# --------------------------------------------------------------------------------------------
# Reading the rendered RBAC
# --------------------------------------------------------------------------------------------


def _grants(role: Obj) -> set[Grant]:
    out: set[Grant] = set()
    for rule in role.get("rules", []):
        names = rule.get("resourceNames") or [""]
        for g in rule.get("apiGroups", []):
            for r in rule.get("resources", []):
                for v in rule.get("verbs", []):
                    for n in names:
                        out.add((g, r, v, n))
    return out


def _bindings(objs: Sequence[Obj], sa: str) -> list[Obj]:
    out = []
    for b in objs:
        if b["kind"] not in {"RoleBinding", "ClusterRoleBinding"}:
            continue
        for s in b.get("subjects", []):
            if s["kind"] == "ServiceAccount" and s["name"] == sa and s["namespace"] == NAMESPACE:
                out.append(b)
    return out


def _bound(objs: Sequence[Obj], sa: str) -> dict[tuple[str, str, str], set[Grant] | None]:
    """(roleRef kind, name, namespace of the grant) → the rendered role's grants (None: built-in)."""
    out: dict[tuple[str, str, str], set[Grant] | None] = {}
    for b in _bindings(objs, sa):
        ref = b["roleRef"]
        scope = b["metadata"].get("namespace", "*") if b["kind"] == "RoleBinding" else "*"
        if ref["kind"] == "ClusterRole":
            rendered = find(objs, "ClusterRole", ref["name"])
        else:
            rendered = [r for r in find(objs, "Role", ref["name"]) if r["metadata"]["namespace"] == scope]
        out[(ref["kind"], ref["name"], scope)] = _grants(rendered[0]) if rendered else None
    return out


def _cluster_grants(objs: Sequence[Obj], sa: str) -> set[Grant]:
    return {
        g
        for (kind, _, scope), grants in _bound(objs, sa).items()
        if grants is not None and scope == "*"
        for g in grants
    }


def _namespace_grants(objs: Sequence[Obj], sa: str, namespace: str = NAMESPACE) -> set[Grant]:
    return {
        g
        for (kind, _, scope), grants in _bound(objs, sa).items()
        if grants is not None and scope == namespace
        for g in grants
    }


def _lease_role(lease: str) -> set[Grant]:
    return {
        ("coordination.k8s.io", "leases", "create", ""),
        ("coordination.k8s.io", "leases", "get", lease),
        ("coordination.k8s.io", "leases", "update", lease),
    }


# --------------------------------------------------------------------------------------------
# What the code uses
# --------------------------------------------------------------------------------------------


def test_the_writer_calls_are_all_assigned_to_a_component() -> None:
    calls = set(_writer_calls())
    assigned = _serve_writer_calls() | _roce_writer_calls() | _lease_calls()
    assert assigned == calls, (
        f"KubeWriter.API_CALLS changed: unassigned {sorted(calls - assigned)}, gone {sorted(assigned - calls)}; "
        "assign each call to its component here and grant it in the chart"
    )


def _serve_expected() -> set[Grant]:
    import inspect

    from extender.service import INFORMED, Runtime

    informed = [(r.group, r.plural) for r, _ in INFORMED]
    # the webhook's namespace-label informer is started next to INFORMED
    assert 'Resource("", "v1", "namespaces")' in inspect.getsource(Runtime.start)
    informed.append(("", "namespaces"))
    grants = {(g, r, v, "") for g, r in informed for v in ("list", "watch")}
    return grants | {_as_grant(c) for c in _serve_writer_calls()}


def test_serve_cluster_role_is_exactly_what_serve_calls() -> None:
    for variant in VARIANTS:
        objs = render_variant(variant)
        # kube-scheduler's cluster-wide permissions are the built-in roles (not rendered, not here)
        granted = _cluster_grants(objs, "sky-scheduler")
        expected = _serve_expected()
        assert granted == expected, (
            f"{variant}: missing {sorted(expected - granted)}, not used by the code {sorted(granted - expected)}"
        )
        lease = chart_values()["scheduler"]["serve"]["leaderElection"]["leaseName"]
        serve_role = one(objs, "Role", "sky-scheduler-serve")
        assert _grants(serve_role) == _lease_role(lease)


def test_scheduler_pod_identity_holds_exactly_these_roles() -> None:
    """Both containers of the scheduler pod run as its one ServiceAccount (a pod has one identity)."""
    objs = render_variant("default")
    bound = _bound(objs, "sky-scheduler")
    assert set(bound) == {
        ("ClusterRole", "system:kube-scheduler", "*"),
        ("ClusterRole", "system:volume-scheduler", "*"),
        ("Role", "extension-apiserver-authentication-reader", "kube-system"),
        ("Role", "sky-scheduler-kube-scheduler", NAMESPACE),
        ("ClusterRole", "sky-scheduler-serve", "*"),
        ("Role", "sky-scheduler-serve", NAMESPACE),
    }
    for builtin in (
        ("ClusterRole", "system:kube-scheduler", "*"),
        ("ClusterRole", "system:volume-scheduler", "*"),
        ("Role", "extension-apiserver-authentication-reader", "kube-system"),
    ):
        assert bound[builtin] is None, f"{builtin} must be the built-in role, not a rendered one"
    ks_lease = chart_values()["scheduler"]["kubeScheduler"]["leaderElection"]["leaseName"]
    assert bound[("Role", "sky-scheduler-kube-scheduler", NAMESPACE)] == _lease_role(ks_lease)
    cfg_lease = one(objs, "ConfigMap", "sky-scheduler-config")["data"]["scheduler-config.yaml"]
    assert f"resourceName: {ks_lease}" in cfg_lease


# --- discovery: reads recorded from the real reader --------------------------------------------

_PATH = re.compile(
    r"^/(?:api/v1|apis/(?P<group>[^/]+)/[^/]+)(?:/namespaces/[^/]+)?/(?P<resource>[^/]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>[^/]+))?$"
)


def _recorded_reads(run: Any) -> set[Grant]:
    """Run ``run(reader)`` with a client that records each request as an RBAC grant."""
    from discovery.common import kube as dkube
    from extender.kube import client as kube_client
    from extender.kube.client import RawResponse

    seen: set[Grant] = set()

    async def fake_request(api: Any, method: str, path: str, **kw: Any) -> RawResponse:
        m = _PATH.match(path)
        assert m, path
        resource = m["resource"] + (f"/{m['sub']}" if m["sub"] else "")
        verb = {"GET": "get" if m["name"] else "list", "POST": "create", "PUT": "update", "PATCH": "patch"}[method]
        if kw.get("query") and dict(kw["query"]).get("watch"):
            verb = "watch"
        seen.add((m["group"] or "", resource, verb, ""))
        if m["name"] is None:
            return RawResponse(200, orjson.dumps({"items": [{"metadata": {"name": "n0"}}], "metadata": {}}), {})
        if m["resource"] == "nodes":
            return RawResponse(200, orjson.dumps({"metadata": {"name": m["name"], "labels": {}}}), {})
        return RawResponse(404, b"{}", {})

    mp = pytest.MonkeyPatch()
    mp.setattr(kube_client, "request", fake_request)  # the module discovery.common.kube calls through
    try:
        asyncio.run(run(dkube.KubeReader(api=None)))
    finally:
        mp.undo()
    return seen


def _roce_expected() -> set[Grant]:
    async def run(reader: Any) -> None:
        await reader.read("n0")  # its NodeTopology (with the zone label it wrote)

    return _recorded_reads(run) | {_as_grant(c) for c in _roce_writer_calls()}


def _ib_expected() -> set[Grant]:
    async def run(reader: Any) -> None:
        await reader.list_nodes()  # hostname → node
        await reader.read("n0")

    return _recorded_reads(run) | {_as_grant(c) for c in _roce_writer_calls()}


def test_roce_agent_role_is_exactly_what_it_calls() -> None:
    objs = render_variant("default")
    granted = _cluster_grants(objs, "sky-scheduler-roce")
    expected = _roce_expected()
    assert granted == expected, f"missing {sorted(expected - granted)}, unused {sorted(granted - expected)}"
    assert set(_bound(objs, "sky-scheduler-roce")) == {("ClusterRole", "sky-scheduler-roce", "*")}


def test_ib_collector_roles_are_exactly_what_it_calls() -> None:
    objs = render_variant("default")
    granted = _cluster_grants(objs, "sky-scheduler-ib")
    expected = _ib_expected()
    assert granted == expected, f"missing {sorted(expected - granted)}, unused {sorted(granted - expected)}"
    lease = chart_values()["discovery"]["ib"]["leaseName"]
    assert _namespace_grants(objs, "sky-scheduler-ib") == _lease_role(lease)
    assert set(_bound(objs, "sky-scheduler-ib")) == {
        ("ClusterRole", "sky-scheduler-ib", "*"),
        ("Role", "sky-scheduler-ib", NAMESPACE),
    }


def test_recorded_reads_are_what_the_reader_does() -> None:
    """The recorder itself: a GET by name is `get`, a collection GET is `list`."""
    assert not {g for g in _roce_expected() if g[1] == "nodes"}  # the RoCE agent never touches a Node
    # the IB collector only lists the Nodes (hostname → node); it neither reads nor writes one
    assert {g for g in _ib_expected() if g[1] == "nodes"} == {("", "nodes", "list", "")}
    assert (GROUP, "nodetopologies", "get", "") in _roce_expected()


# --------------------------------------------------------------------------------------------
# Nothing broad
# --------------------------------------------------------------------------------------------

FORBIDDEN_VERBS = {"*", "escalate", "bind", "impersonate", "deletecollection"}
SENSITIVE_RESOURCES = {
    "secrets",
    "serviceaccounts/token",
    "configmaps",
    "clusterroles",
    "roles",
    "clusterrolebindings",
    "rolebindings",
}
BROAD_ROLES = {"cluster-admin", "admin", "edit", "view", "system:masters"}


def _all_roles(objs: Iterable[Obj]) -> list[Obj]:
    return [o for o in objs if o["kind"] in {"Role", "ClusterRole"}]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_no_wildcards_no_escalation_no_secrets(variant: str) -> None:
    objs = render_variant(variant)
    for role in _all_roles(objs):
        for g, r, v, _ in _grants(role):
            where = f"{role['kind']} {role['metadata']['name']}: {(g, r, v)}"
            assert "*" not in (g, r, v), where
            assert v not in FORBIDDEN_VERBS, where
            assert r not in SENSITIVE_RESOURCES, where
        assert not role.get("aggregationRule"), role["metadata"]["name"]
    for b in objs:
        if b["kind"] in {"RoleBinding", "ClusterRoleBinding"}:
            assert b["roleRef"]["name"] not in BROAD_ROLES, b["metadata"]["name"]
            for s in b["subjects"]:
                assert s["kind"] == "ServiceAccount" and s["namespace"] == NAMESPACE, b["metadata"]["name"]
                assert one(objs, "ServiceAccount", s["name"])


def test_every_workload_runs_as_its_own_service_account() -> None:
    objs = render_variant("default")
    sas = {}
    for o in objs:
        if o["kind"] in {"Deployment", "DaemonSet"}:
            sas[o["metadata"]["name"]] = o["spec"]["template"]["spec"]["serviceAccountName"]
    assert sas == {
        "sky-scheduler": "sky-scheduler",
        "sky-scheduler-roce": "sky-scheduler-roce",
        "sky-scheduler-ib": "sky-scheduler-ib",
    }


def test_disabled_components_leave_no_rbac_behind() -> None:
    objs = render_variant("no-discovery")
    names = {
        o["metadata"]["name"]
        for o in objs
        if o["kind"] in {"ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}
    }
    assert not {n for n in names if "roce" in n or n.endswith("-ib")}


# --------------------------------------------------------------------------------------------
# Effective rights per ServiceAccount, per layout
# --------------------------------------------------------------------------------------------

External = tuple[str, str, str]
"""A bound role the chart does not render (built into Kubernetes): (kind, name, where)."""
Scoped = tuple[str, Grant]
"""A grant and where it holds: "*" (cluster-wide) or a namespace."""

KUBE_SCHEDULER_BUILTINS: frozenset[External] = frozenset(
    {
        ("ClusterRole", "system:kube-scheduler", "*"),
        ("ClusterRole", "system:volume-scheduler", "*"),
        ("Role", "extension-apiserver-authentication-reader", "kube-system"),
    }
)


def _effective(objs: Sequence[Obj], sa: str) -> tuple[frozenset[Scoped], frozenset[External]]:
    """Everything ``sa`` may do: the rendered roles' grants (by scope) and the built-in roles bound."""
    grants: set[Scoped] = set()
    external: set[External] = set()
    for (kind, name, scope), rendered in _bound(objs, sa).items():
        if rendered is None:
            external.add((kind, name, scope))
        else:
            grants |= {(scope, g) for g in rendered}
    return frozenset(grants), frozenset(external)


def _needs(container_name: str) -> tuple[frozenset[Scoped], frozenset[External]]:
    """What a container's code calls (API_CALLS split, informers, recorded reads, Leases)."""
    values = chart_values()
    if container_name == "sky-scheduler":
        lease = values["scheduler"]["serve"]["leaderElection"]["leaseName"]
        grants = {("*", g) for g in _serve_expected()} | {(NAMESPACE, g) for g in _lease_role(lease)}
        return frozenset(grants), frozenset()
    if container_name == "kube-scheduler":
        lease = values["scheduler"]["kubeScheduler"]["leaderElection"]["leaseName"]
        return frozenset((NAMESPACE, g) for g in _lease_role(lease)), KUBE_SCHEDULER_BUILTINS
    if container_name == "agent":
        return frozenset(("*", g) for g in _roce_expected()), frozenset()
    if container_name == "collector":
        lease = values["discovery"]["ib"]["leaseName"]
        grants = {("*", g) for g in _ib_expected()} | {(NAMESPACE, g) for g in _lease_role(lease)}
        return frozenset(grants), frozenset()
    if container_name == "lldpd":
        return frozenset(), frozenset()  # talks only to its own socket
    raise AssertionError(f"container {container_name}: say here what it calls")


@pytest.mark.parametrize("variant", ["default", "separate", "separate-cert-manager", "no-webhook"])
def test_every_pods_identity_holds_exactly_what_its_containers_call(variant: str) -> None:
    """A pod's ServiceAccount may do exactly the union of what its containers' code calls."""
    objs = render_variant(variant)
    for workload in objs:
        if workload["kind"] not in {"Deployment", "DaemonSet"}:
            continue
        pod = workload["spec"]["template"]["spec"]
        grants: set[Scoped] = set()
        external: set[External] = set()
        for c in pod["containers"]:
            g, e = _needs(c["name"])
            grants |= g
            external |= e
        got_grants, got_external = _effective(objs, pod["serviceAccountName"])
        where = f"{variant}: {workload['kind']} {workload['metadata']['name']} as {pod['serviceAccountName']}"
        assert got_external == external, f"{where}: built-in roles {sorted(got_external)}, expected {sorted(external)}"
        assert got_grants == grants, (
            f"{where}: missing {sorted(grants - got_grants)}, not called {sorted(got_grants - grants)}"
        )


def test_separate_layout_gives_serve_no_kube_scheduler_role() -> None:
    """The point of the separate layout: serve's token carries serve's rules only, and the
    kube-scheduler token none of serve's (no quota, eviction or Node writes)."""
    objs = render_variant("separate")
    serve_grants, serve_external = _effective(objs, "sky-scheduler")
    assert not serve_external
    ks_grants, ks_external = _effective(objs, "sky-scheduler-kube-scheduler")
    assert ks_external == KUBE_SCHEDULER_BUILTINS
    assert {g for _, g in ks_grants} <= _lease_role("sky-scheduler")
    assert not {g for _, g in serve_grants if g[1] == "leases" and g[3] == "sky-scheduler"}
    # the same-pod layout, by contrast, unites them in one identity (documented)
    same_grants, same_external = _effective(render_variant("default"), "sky-scheduler")
    assert same_external == KUBE_SCHEDULER_BUILTINS and serve_grants | ks_grants == same_grants


def test_ib_collector_runs_non_root_without_capabilities() -> None:
    """The IB collector: a non-root UID, no capability, the umad device through its group."""
    objs = render_variant("default")
    dep = one(objs, "Deployment", "sky-scheduler-ib")
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    sc = c["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["runAsUser"] != 0 and sc["runAsGroup"] != 0
    assert sc["capabilities"] == {"drop": ["ALL"]} and sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    from tests.deploy.chart import render

    grouped = one(render({"discovery": {"ib": {"supplementalGroups": [1234]}}}), "Deployment", "sky-scheduler-ib")
    assert grouped["spec"]["template"]["spec"]["securityContext"]["supplementalGroups"] == [1234]
    root = one(render({"discovery": {"ib": {"runAsUser": 0}}}), "Deployment", "sky-scheduler-ib")
    root_sc = root["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    assert root_sc["runAsNonRoot"] is False and root_sc["capabilities"] == {"drop": ["ALL"]}


TOKEN_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def test_only_containers_that_call_the_api_get_a_token() -> None:
    """The lldpd sidecar (root, parsing LLDP frames from the network) calls no API: the RoCE pod
    does not automount the token, and only the agent mounts the projected one."""
    for variant in ("default", "host-lldpd"):
        ds = one(render_variant(variant), "DaemonSet", "sky-scheduler-roce")
        pod = ds["spec"]["template"]["spec"]
        assert pod["automountServiceAccountToken"] is False
        (volume,) = [v for v in pod["volumes"] if "projected" in v]
        sources = volume["projected"]["sources"]
        assert {"path": "token", "expirationSeconds": 3607} in [s.get("serviceAccountToken") for s in sources]
        assert any(s.get("configMap", {}).get("name") == "kube-root-ca.crt" for s in sources)
        for c in pod["containers"]:
            mounts = [m for m in c.get("volumeMounts", []) if m["name"] == volume["name"]]
            grants, external = _needs(c["name"])
            if grants or external:
                assert [m["mountPath"] for m in mounts] == [TOKEN_DIR] and mounts[0]["readOnly"], c["name"]
            else:
                assert not mounts, f"{c['name']} calls no API but gets a token"
