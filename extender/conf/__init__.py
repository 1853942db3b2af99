"""Loading the scheduling policy with the project's plugin and action registries."""

from __future__ import annotations

import hashlib
from importlib import resources
from pathlib import Path

from extender.actions import ACTIONS
from extender.framework.policy import Policy, PolicyError, load_policy
from extender.plugins import PLUGINS, sylas

__all__ = [
    "PolicyError",
    "PolicyUnreadable",
    "check_settings",
    "default_policy",
    "default_policy_text",
    "load_policy_bytes",
    "load_policy_file",
    "load_policy_text",
    "policy_sha256",
    "read_policy_file",
]


class PolicyUnreadable(PolicyError):
    """The policy file cannot be read (missing, a directory, no permission): its content is not
    at fault. A :class:`PolicyError`, so that ``serve`` refuses to start on it like on a bad file."""


def default_policy_text() -> str:
    return resources.files("extender.conf").joinpath("default_policy.yaml").read_text(encoding="utf-8")


def load_policy_text(text: str, source: str = "<policy>", *, spot_resource: str | None = None) -> Policy:
    """The policy in ``text``; with ``spot_resource`` (serve's ``--spot-resource``) also checked
    against the settings (:func:`check_settings`)."""
    policy = load_policy(text, plugins=PLUGINS, actions=ACTIONS, source=source)
    if spot_resource is not None:
        check_settings(policy, spot_resource=spot_resource)
    return policy


def check_settings(policy: Policy, *, spot_resource: str) -> None:
    """:class:`PolicyError` when the policy names differently what a setting of ``serve`` names.

    The spot resource has one source of truth, ``--spot-resource`` (Helm
    ``scheduler.serve.spotResource``): it marks spot pods (cache, webhook), it is what the sylas
    pools lend and what the spot zone room counts. The sylas argument ``resource`` predates it;
    it may still be written, naming the same resource, but a policy where it names another one
    would have spot pods marked by one resource and pooled by another (pools silently not
    enforced): refused, at start and on reload alike."""
    plugin = policy.plugins.get(sylas.NAME)
    named = plugin.args.resource if isinstance(plugin, sylas.Plugin) else None
    if named is not None and named != spot_resource:
        raise PolicyError(
            f"{policy.source}: plugins.sylas.resource is {named!r}, but serve --spot-resource "
            f"(Helm scheduler.serve.spotResource) is {spot_resource!r}: spot pods are the pods that "
            "request --spot-resource; remove resource from the sylas arguments or make the two equal"
        )


def default_policy() -> Policy:
    return load_policy_text(default_policy_text(), "default_policy.yaml")


def policy_sha256(data: bytes) -> str:
    """What identifies a policy file's content (hex SHA-256 of its bytes)."""
    return hashlib.sha256(data).hexdigest()


def read_policy_file(path: str | Path) -> bytes:
    """The file's bytes; :class:`PolicyUnreadable` (naming the file and why) when it cannot be read."""
    p = Path(path)
    try:
        return p.read_bytes()
    except OSError as exc:
        raise PolicyUnreadable(f"{p}: cannot read the policy file: {exc.strerror or exc}") from None


def load_policy_bytes(data: bytes, source: str = "<policy>", *, spot_resource: str | None = None) -> Policy:
    """The policy in ``data`` (UTF-8 YAML); :class:`PolicyError` saying where and why if invalid.
    The one loader of policy files: at start (:func:`load_policy_file`) and on every reload."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PolicyError(f"{source}: not UTF-8 text (byte {exc.start})") from None
    return load_policy_text(text, source, spot_resource=spot_resource)


def load_policy_file(path: str | Path, *, spot_resource: str | None = None) -> Policy:
    return load_policy_bytes(read_policy_file(path), str(Path(path)), spot_resource=spot_resource)
