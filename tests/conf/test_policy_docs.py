"""examples/policy.yaml documents every key of the policy and matches the built-in policy."""

from __future__ import annotations

from pathlib import Path

import yaml

from extender.actions import ACTIONS
from extender.conf import default_policy, load_policy_file
from extender.framework.plugin import ActionClass, PluginClass
from extender.plugins import PLUGINS

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "policy.yaml"


def test_the_documented_policy_is_the_built_in_one() -> None:
    doc, built_in = load_policy_file(EXAMPLE), default_policy()
    assert doc.action_names == built_in.action_names
    assert {k: v.expression for k, v in doc.stages.items()} == {k: v.expression for k, v in built_in.stages.items()}
    assert {n: p.args for n, p in doc.plugins.items()} == {n: p.args for n, p in built_in.plugins.items()}


def test_every_plugin_action_and_argument_is_documented() -> None:
    raw = yaml.safe_load(EXAMPLE.read_text())
    assert set(raw["plugins"]) == set(PLUGINS)
    actions = {a if isinstance(a, str) else next(iter(a)) for a in raw["actions"]}
    assert actions == set(ACTIONS)
    text = EXAMPLE.read_text()
    classes: list[tuple[str, PluginClass | ActionClass]] = [*PLUGINS.items(), *ACTIONS.items()]
    for name, cls in classes:
        for field in cls.Args.model_fields:
            assert f"{field}:" in text, f"{name}.{field} is not documented in examples/policy.yaml"
