"""The chart's network guard: NetworkPolicies (on by default; values open them), the connection
limits reaching serve, and the optional webhook client-certificate authentication."""

from __future__ import annotations

from typing import Any

from tests.deploy.chart import container, find, one, render, render_variant


def _policy(objs: list[Any] | tuple[Any, ...], name: str = "sky-scheduler") -> dict[str, Any]:
    return one(objs, "NetworkPolicy", name)


def _serve_args(objs: Any) -> list[str]:
    return list(container(one(objs, "Deployment", "sky-scheduler"), "sky-scheduler")["args"])


def test_scheduler_pods_accept_only_the_webhook_and_the_monitoring_namespace() -> None:
    objs = render_variant("default")
    pol = _policy(objs)
    dep = one(objs, "Deployment", "sky-scheduler")
    assert pol["spec"]["podSelector"]["matchLabels"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    assert pol["spec"]["policyTypes"] == ["Ingress"]
    webhook, ops = pol["spec"]["ingress"]
    serve = {p["name"]: p["containerPort"] for p in container(dep, "sky-scheduler")["ports"]}
    assert webhook == {"ports": [{"port": serve["webhook"], "protocol": "TCP"}]}  # from anywhere: the API server
    assert ops["ports"] == [{"port": serve["ops"], "protocol": "TCP"}]
    (peer,) = ops["from"]
    assert peer["namespaceSelector"]["matchExpressions"] == [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["monitoring"]}
    ]
    # the extender (127.0.0.1) and kube-scheduler's secure port have no rule: unreachable from the network
    ports = {p["port"] for rule in pol["spec"]["ingress"] for p in rule["ports"]}
    assert ports == {serve["webhook"], serve["ops"]}
    ib = _policy(objs, "sky-scheduler-ib")
    assert ib["spec"]["policyTypes"] == ["Ingress"] and "ingress" not in ib["spec"]


def test_values_open_or_narrow_the_policy() -> None:
    apiserver = [{"ipBlock": {"cidr": "10.0.0.0/24"}}]
    extra = [{"podSelector": {"matchLabels": {"app": "debug"}}}]
    objs = render(
        {"networkPolicy": {"webhook": {"from": apiserver}, "ops": {"namespaces": ["obs", "sre"], "from": extra}}}
    )
    webhook, ops = _policy(objs)["spec"]["ingress"]
    assert webhook["from"] == apiserver
    assert ops["from"][0]["namespaceSelector"]["matchExpressions"][0]["values"] == ["obs", "sre"]
    assert ops["from"][1:] == extra
    closed = render({"networkPolicy": {"ops": {"namespaces": [], "from": []}}})
    assert len(_policy(closed)["spec"]["ingress"]) == 1  # ops port: no peer at all
    assert not find(render({"networkPolicy": {"enabled": False}}), "NetworkPolicy")


def test_connection_limits_reach_serve() -> None:
    args = _serve_args(render({"scheduler": {"serve": {"readTimeoutSeconds": 2.5, "maxConnections": 300}}}))
    assert "--read-timeout=2.5" in args and "--max-connections=300" in args
    default = _serve_args(render_variant("default"))
    assert "--read-timeout=5" in default and "--max-connections=1000" in default


def test_webhook_client_ca_is_mounted_and_passed() -> None:
    assert not [a for a in _serve_args(render_variant("default")) if a.startswith("--webhook-client-ca-file")]
    objs = render({"webhook": {"clientAuth": {"caConfigMap": "apiserver-webhook-client-ca"}}})
    args = _serve_args(objs)
    assert "--webhook-client-ca-file=/etc/sky-scheduler/webhook-client-ca/ca.crt" in args
    pod = one(objs, "Deployment", "sky-scheduler")["spec"]["template"]["spec"]
    (vol,) = [v for v in pod["volumes"] if v["name"] == "webhook-client-ca"]
    assert vol["configMap"] == {"name": "apiserver-webhook-client-ca", "items": [{"key": "ca.crt", "path": "ca.crt"}]}
    mounts = {
        m["name"]: m["mountPath"]
        for m in container(one(objs, "Deployment", "sky-scheduler"), "sky-scheduler")["volumeMounts"]
    }
    assert mounts["webhook-client-ca"] == "/etc/sky-scheduler/webhook-client-ca"
