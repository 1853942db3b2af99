"""Loading the scheduling policy with the project's plugin and action registries."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from extender.actions import ACTIONS
from extender.framework.policy import Policy, PolicyError, load_policy
from extender.plugins import PLUGINS

__all__ = ["PolicyError", "default_policy", "default_policy_text", "load_policy_file", "load_policy_text"]


def default_policy_text() -> str:
    return resources.files("extender.conf").joinpath("default_policy.yaml").read_text(encoding="utf-8")


def load_policy_text(text: str, source: str = "<policy>") -> Policy:
    return load_policy(text, plugins=PLUGINS, actions=ACTIONS, source=source)


def default_policy() -> Policy:
    return load_policy_text(default_policy_text(), "default_policy.yaml")


def load_policy_file(path: str | Path) -> Policy:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyError(f"{p}: cannot read the policy file: {exc.strerror or exc}") from None
    return load_policy_text(text, str(p))
