"""The chart's pods: probes on the ops endpoints, restricted security contexts, high availability
and placement of the scheduler, the RoCE DaemonSet and the InfiniBand collector."""

from __future__ import annotations

from pathlib import Path

from tests.deploy.chart import (
    ALL_VARIANTS,
    chart_values,
    container,
    one,
    render_variant,
)
from tests.deploy.rendered import discover_parser, parse_strictly, serve_args


def test_serve_probes_use_the_ops_endpoints() -> None:
    objs = render_variant("default")
    serve = container(one(objs, "Deployment", "sky-scheduler"), "sky-scheduler")
    ns = serve_args(objs)
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
    ns = parse_strictly(discover_parser(), c["args"][1:])
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
