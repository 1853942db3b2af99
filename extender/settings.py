"""Process settings of ``sky-scheduler serve`` (not the scheduling policy: that is a policy file).

Each field is one command-line flag (``--binder-period``) and one environment variable
(``SKY_BINDER_PERIOD``); the flag wins. The Helm chart sets them as container args.
"""

from __future__ import annotations

import argparse
import os
import socket
from collections.abc import Mapping
from dataclasses import Field, dataclass, field, fields
from typing import Any, get_type_hints

from extender import wellknown
from extender.logs import LEVELS, LOG_FORMATS
from extender.model.topology import format_tier_labels, parse_tier_labels

__all__ = ["ServeSettings", "add_serve_arguments", "flag_default", "settings_from_args"]


def _default_namespace() -> str:
    # the namespace of the pod we run in (downward API / service account), else kube-system
    env = os.environ.get("POD_NAMESPACE")
    if env:
        return env
    try:
        with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace", encoding="utf-8") as f:
            return f.read().strip() or "kube-system"
    except OSError:
        return "kube-system"


@dataclass(frozen=True, slots=True)
class ServeSettings:
    # Kubernetes access
    kubeconfig: str = field(
        default="",
        metadata={"help": "kubeconfig file", "default_doc": "in-cluster configuration, else ~/.kube/config"},
    )
    scheduler_name: str = field(
        default=wellknown.SCHEDULER_NAME, metadata={"help": "pods with this spec.schedulerName are ours"}
    )
    policy: str = field(default="", metadata={"help": "scheduling policy YAML", "default_doc": "the built-in policy"})
    policy_reload_seconds: float = field(
        default=10.0,
        metadata={"help": "seconds between looks at the --policy file; a changed, valid file is applied (0: never)"},
    )
    # extender: plain HTTP on loopback, called by the kube-scheduler container of the same pod
    extender_address: str = field(default="127.0.0.1", metadata={"help": "extender listen address"})
    extender_port: int = field(default=8888, metadata={"help": "extender port (filter/prioritize/bind/preempt)"})
    extender_tls_cert_file: str = field(
        default="", metadata={"help": "serve the extender over HTTPS with this certificate (PEM; separate pods)"}
    )
    extender_tls_key_file: str = field(default="", metadata={"help": "the extender's TLS key (PEM)"})
    extender_client_ca_file: str = field(
        default="",
        metadata={"help": "require extender clients (kube-scheduler) to present a certificate signed by this CA"},
    )
    max_body_bytes: int = field(default=8 * 1024 * 1024, metadata={"help": "refuse larger request bodies"})
    read_timeout: float = field(
        default=5.0,
        metadata={"help": "seconds a request may take to arrive whole (headers and body) on every server"},
    )
    max_connections: int = field(
        default=1000, metadata={"help": "open connections per server; above it requests are answered 503"}
    )
    # webhook: HTTPS, called by kube-apiserver
    webhook_address: str = field(default="0.0.0.0", metadata={"help": "webhook listen address"})
    webhook_port: int = field(default=9443, metadata={"help": "webhook HTTPS port (0: no webhook)"})
    tls_cert_file: str = field(default="", metadata={"help": "webhook serving certificate (PEM)"})
    tls_key_file: str = field(default="", metadata={"help": "webhook serving key (PEM)"})
    webhook_client_ca_file: str = field(
        default="",
        metadata={"help": "require webhook clients (the API server) to present a certificate signed by this CA"},
    )
    # operations: probes, metrics, /diagnose
    ops_address: str = field(default="0.0.0.0", metadata={"help": "ops listen address"})
    ops_port: int = field(default=8080, metadata={"help": "/healthz /readyz /metrics /diagnose port"})
    # binder loop and leader election
    binder_period: float = field(default=1.0, metadata={"help": "seconds between binder cycles"})
    leader_elect: bool = field(default=True, metadata={"help": "run the binder only while holding the Lease"})
    lease_name: str = field(default=wellknown.DEFAULT_BINDER_LEASE, metadata={"help": "binder Lease name"})
    lease_namespace: str = field(
        default_factory=_default_namespace,
        metadata={
            "help": "binder Lease namespace",
            "default_doc": "$POD_NAMESPACE, else the service account's namespace, else kube-system",
        },
    )
    lease_duration: float = field(default=15.0, metadata={"help": "seconds a Lease is valid without renewal"})
    renew_deadline: float = field(default=10.0, metadata={"help": "seconds the leader keeps trying to renew"})
    retry_period: float = field(default=2.0, metadata={"help": "seconds between acquire/renew attempts"})
    identity: str = field(
        default_factory=socket.gethostname,
        metadata={"help": "leader-election identity", "default_doc": "the host name"},
    )
    # model options
    reservation_ttl: float = field(default=600.0, metadata={"help": "seconds a deleted task's reservation lives"})
    gpu_spec_labels: str = field(
        default=",".join(wellknown.DEFAULT_GPU_SPEC_LABELS),
        metadata={"help": "node label keys naming the GPU model (comma-separated, longest wins)"},
    )
    topology_labels: str = field(
        default=format_tier_labels(wellknown.DEFAULT_TIER_LABELS),
        metadata={
            "help": "node label keys naming a node's topology tiers, as TIER=KEY comma-separated (0 NVLink "
            "domain, 1 leaf, 2 spine, 3 core …; within a tier the first key the node has wins; below the "
            "node annotations scheduling.infini-ai.com/tier-N and the NodeTopology tiers)"
        },
    )
    gpu_resources: str = field(
        default=",".join(wellknown.DEFAULT_GPU_RESOURCES),
        metadata={"help": "extended resources that are GPUs, comma-separated (e.g. nvidia.com/gpu,amd.com/gpu)"},
    )
    spot_resource: str = field(
        default=wellknown.RESOURCE_SPOT_GPU,
        metadata={
            "help": "resource that marks spot pods, the one the sylas spot pools lend "
            "(a policy whose sylas.resource names another is refused)"
        },
    )
    gc_refreeze_seconds: float = field(
        default=600.0,
        metadata={"help": "seconds between heap settles (full collection + gc.freeze; 0: never freeze)"},
    )
    log_level: str = field(default="info", metadata={"help": "debug, info, warning, error (any case)"})
    log_format: str = field(
        default="text", metadata={"help": "text, or json: one object per line with quota / job / node fields"}
    )

    def gpu_resource_names(self) -> tuple[str, ...]:
        """``--gpu-resources`` as a tuple of names."""
        return _names(self.gpu_resources)


def _names(value: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in value.split(",") if n.strip())


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def flag_default(f: Field[Any]) -> str:
    """The default of a setting as ``--help`` and docs/configuration.md show it: the value, or for
    one that depends on where the process runs, the rule (metadata ``default_doc``)."""
    if "default_doc" in f.metadata:
        return str(f.metadata["default_doc"])
    value = f.default
    if isinstance(value, bool):
        return "true" if value else "false"
    return '""' if value == "" else str(value)


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    hints = get_type_hints(ServeSettings)
    for f in fields(ServeSettings):
        typ = hints[f.name]
        env = "SKY_" + f.name.upper()
        help_text = f"{f.metadata.get('help', '')} (default: {flag_default(f)}; env {env})"
        if typ is bool:
            parser.add_argument(
                _flag(f.name), dest=f.name, action=argparse.BooleanOptionalAction, default=None, help=help_text
            )
        else:
            parser.add_argument(_flag(f.name), dest=f.name, type=typ, default=None, help=help_text)


def settings_from_args(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> ServeSettings:
    """Flags win over environment variables, which win over defaults. Bad values raise ValueError."""
    env = os.environ if env is None else env
    hints = get_type_hints(ServeSettings)
    values: dict[str, Any] = {}
    for f in fields(ServeSettings):
        given = getattr(args, f.name, None)
        if given is not None:
            values[f.name] = given
            continue
        raw = env.get("SKY_" + f.name.upper())
        if raw is None:
            continue
        typ = hints[f.name]
        try:
            if typ is bool:
                if raw.lower() not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError(raw)
                values[f.name] = raw.lower() in ("true", "1", "yes")
            else:
                values[f.name] = typ(raw)
        except ValueError:
            raise ValueError(
                f"environment variable SKY_{f.name.upper()}={raw!r} is not a valid {typ.__name__}"
            ) from None
    settings = ServeSettings(**values)
    _validate(settings)
    return settings


def spot_resource_problem(name: str, gpu_resources: tuple[str, ...]) -> str:
    """What is wrong with ``name`` as the spot resource ("" when nothing). It decides which pods
    skip quotas and may be evicted, so it must be an extended resource (``domain/name``, outside
    kubernetes.io, as Kubernetes requires of device-plugin resources) that only spot pods
    request: not a GPU resource (every GPU pod would be spot), not an RDMA resource (every spot
    pod would be an RDMA pod)."""
    domain, slash, short = name.partition("/")
    if not slash or not domain or not short or "/" in short or domain.endswith("kubernetes.io"):
        return "is not an extended resource (domain/name, outside kubernetes.io), e.g. example.com/spot-gpu"
    if name in gpu_resources:
        return "is one of --gpu-resources: every GPU pod would be a spot pod, skip quotas and be evictable"
    if name.startswith(wellknown.RDMA_RESOURCE_PREFIX):
        return f"is an RDMA resource ({wellknown.RDMA_RESOURCE_PREFIX}*): every spot pod would count as an RDMA pod"
    return ""


def _validate(s: ServeSettings) -> None:
    problems = []
    if s.binder_period <= 0:
        problems.append("--binder-period must be > 0")
    if s.gc_refreeze_seconds < 0:
        problems.append("--gc-refreeze-seconds must be >= 0")
    if not s.policy_reload_seconds >= 0:  # NaN too
        problems.append("--policy-reload-seconds must be >= 0")
    if not 0 < s.renew_deadline < s.lease_duration:
        problems.append("--renew-deadline must be > 0 and < --lease-duration")
    if s.retry_period <= 0 or s.retry_period >= s.renew_deadline:
        problems.append("--retry-period must be > 0 and < --renew-deadline")
    if s.webhook_port and not (s.tls_cert_file and s.tls_key_file):
        problems.append("the webhook needs --tls-cert-file and --tls-key-file (or --webhook-port 0 to disable it)")
    for port_name in ("extender_port", "webhook_port", "ops_port"):
        port = getattr(s, port_name)
        if not 0 <= port <= 65535:
            problems.append(f"{_flag(port_name)} {port} is not a port")
    if bool(s.extender_tls_cert_file) != bool(s.extender_tls_key_file):
        problems.append("--extender-tls-cert-file and --extender-tls-key-file go together")
    if s.extender_client_ca_file and not s.extender_tls_cert_file:
        problems.append("--extender-client-ca-file needs the extender on TLS (--extender-tls-cert-file)")
    if not s.gpu_resource_names():
        problems.append("--gpu-resources must name at least one resource")
    spot = spot_resource_problem(s.spot_resource, s.gpu_resource_names())
    if spot:
        problems.append(f"--spot-resource {s.spot_resource!r} {spot}")
    if not s.read_timeout > 0:
        problems.append("--read-timeout must be > 0")
    if s.max_connections < 1:
        problems.append("--max-connections must be at least 1")
    if s.max_body_bytes < 1024:
        problems.append("--max-body-bytes must be at least 1024")
    if s.log_level.strip().lower() not in LEVELS:
        problems.append("--log-level must be debug, info, warning or error (any case)")
    if s.log_format not in LOG_FORMATS:
        problems.append("--log-format must be text or json")
    try:
        parse_tier_labels(s.topology_labels)
    except ValueError as e:
        problems.append(f"--topology-labels: {e}")
    if problems:
        raise ValueError("; ".join(problems))
