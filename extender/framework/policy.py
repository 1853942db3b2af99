"""The scheduling policy file: actions in order, plugins with typed args, stage expressions.

::

    apiVersion: scheduling.infini-ai.com/v1alpha1   # optional for now
    kind: SchedulingPolicy                          # optional for now
    actions:                       # run in this order every cycle
      - allocate_job
      - allocate_zone
      - allocate_quota
      - release_quota: {unschedulable_cycles: 10}
    plugins:                       # enabled plugins and their arguments
      gang: {}
      topology: {namedzone_weight: 100, continuity_weight: 0}
    stages:                        # optional: how a stage combines its plugins
      qn.predicate: joint(predicates, quotapredicates, quotaaffinity)
      qn.node_order: sum(100*topology, binpack)

The file is a configuration API, versioned like Kubernetes' own (``KubeSchedulerConfiguration``):
``apiVersion`` / ``kind`` name the schema; a file without them is read as the current version,
an unknown version or kind is a load error naming the ones this build reads — so a file written
for a later schema is refused, never half understood.

Everything is checked once, at load: an unknown action, plugin, stage, operator or argument is
a :class:`PolicyError` that names the culprit. A loaded :class:`Policy` is immutable; plugins and
actions are constructed once per policy and reused by every session.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pydantic
import yaml

from extender.framework.expr import (
    DEFAULT_OPERATOR,
    Call,
    Compiled,
    ExprError,
    Kind,
    Ref,
    check,
    compile_expr,
    plugins_of,
)
from extender.framework.expr import parse as parse_expr
from extender.framework.plugin import Action, ActionClass, Plugin, PluginClass
from extender.framework.stages import EVENT_HOOK, STAGES

__all__ = [
    "POLICY_API_VERSION",
    "POLICY_KIND",
    "CompiledStage",
    "Policy",
    "PolicyError",
    "load_policy",
    "parse_policy",
]


class PolicyError(ValueError):
    """The policy file is invalid; the message says where and why."""


@dataclass(frozen=True, slots=True)
class CompiledStage:
    stage: str
    kind: Kind
    expression: str  # as written, or the generated default
    participants: tuple[str, ...]
    binder: Compiled | None  # None: no plugin takes part


@dataclass(frozen=True, slots=True)
class Policy:
    actions: tuple[Action, ...]
    plugins: Mapping[str, Plugin]
    stages: Mapping[str, CompiledStage]
    source: str = "<policy>"

    @property
    def action_names(self) -> tuple[str, ...]:
        return tuple(a.NAME for a in self.actions)


def _format_pydantic(err: pydantic.ValidationError) -> str:
    parts = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"]) or "(root)"
        parts.append(f"{loc}: {e['msg']}")
    return "; ".join(parts)


def _parse_actions(raw: Any, registry: Mapping[str, ActionClass], where: str) -> tuple[Action, ...]:
    if not isinstance(raw, list) or not raw:
        raise PolicyError(f"{where}: 'actions' must be a non-empty list of action names")
    out: list[Action] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        args: Any
        if isinstance(item, str):
            name, args = item, {}
        elif isinstance(item, dict) and len(item) == 1:
            ((name, args),) = item.items()
            args = args or {}
        else:
            raise PolicyError(f"{where}: actions[{i}] must be a name or a one-key map {{name: {{args}}}}")
        if name not in registry:
            raise PolicyError(f"{where}: actions[{i}]: unknown action {name!r} (known: {', '.join(sorted(registry))})")
        if name in seen:
            raise PolicyError(f"{where}: actions[{i}]: action {name!r} is listed twice")
        seen.add(name)
        cls = registry[name]
        if not isinstance(args, dict):
            raise PolicyError(f"{where}: actions[{i}] ({name}): arguments must be a map")
        try:
            typed = cls.Args.model_validate(args)
        except pydantic.ValidationError as exc:
            raise PolicyError(f"{where}: action {name}: {_format_pydantic(exc)}") from None
        out.append(cls(typed))
    return tuple(out)


def _parse_plugins(raw: Any, registry: Mapping[str, PluginClass], where: str) -> dict[str, Plugin]:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise PolicyError(f"{where}: 'plugins' must be a map of plugin name → arguments")
    out: dict[str, Plugin] = {}
    for name, given in raw.items():
        if name not in registry:
            raise PolicyError(f"{where}: plugins: unknown plugin {name!r} (known: {', '.join(sorted(registry))})")
        cls = registry[name]
        args = given or {}
        if not isinstance(args, dict):
            raise PolicyError(f"{where}: plugins.{name}: arguments must be a map")
        try:
            typed = cls.Args.model_validate(args)
        except pydantic.ValidationError as exc:
            raise PolicyError(f"{where}: plugin {name}: {_format_pydantic(exc)}") from None
        out[name] = cls(typed)
    return out


def _compile_stages(raw: Any, plugins: Mapping[str, Plugin], where: str) -> dict[str, CompiledStage]:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise PolicyError(f"{where}: 'stages' must be a map of stage id → expression")
    for stage in raw:
        if stage not in STAGES:
            raise PolicyError(f"{where}: stages: unknown stage {stage!r} (known: {', '.join(sorted(STAGES))})")
    out: dict[str, CompiledStage] = {}
    for stage, kind in STAGES.items():
        implementers = [n for n, p in plugins.items() if stage in p.STAGES]
        text = raw.get(stage)
        if text is None:
            if not implementers:
                out[stage] = CompiledStage(stage, kind, "", (), None)
                continue
            node: Ref | Call = (
                Ref(implementers[0], 1.0, 0)
                if len(implementers) == 1
                else Call(DEFAULT_OPERATOR[kind], tuple(Ref(n, 1.0, 0) for n in implementers), 0)
            )
            text = implementers[0] if len(implementers) == 1 else f"{DEFAULT_OPERATOR[kind]}({', '.join(implementers)})"
        else:
            if not isinstance(text, str):
                raise PolicyError(f"{where}: stages.{stage}: the expression must be a string")
            available = {n: stage in p.STAGES for n, p in plugins.items()}
            try:
                node = parse_expr(text)
                check(text, node, kind, available)
            except ExprError as exc:
                raise PolicyError(f"{where}: stages.{stage}: {exc}") from None
        out[stage] = CompiledStage(stage, kind, text, tuple(plugins_of(node)), compile_expr(node, kind))
    return out


_TOP_KEYS = frozenset({"apiVersion", "kind", "actions", "plugins", "stages"})
POLICY_API_VERSION = "scheduling.infini-ai.com/v1alpha1"
POLICY_KIND = "SchedulingPolicy"
_API_VERSIONS = (POLICY_API_VERSION,)


def _check_version(doc: Mapping[str, Any], source: str) -> None:
    """``apiVersion`` and ``kind``, when present, must be ones this build reads."""
    version, kind = doc.get("apiVersion"), doc.get("kind")
    if version is not None and version not in _API_VERSIONS:
        raise PolicyError(
            f"{source}: apiVersion {version!r} is not a policy version this build reads "
            f"(known: {', '.join(_API_VERSIONS)}); was the file written for a newer sky-scheduler?"
        )
    if kind is not None and kind != POLICY_KIND:
        raise PolicyError(f"{source}: kind {kind!r} is not {POLICY_KIND!r}")


def parse_policy(
    doc: Any,
    *,
    plugins: Mapping[str, PluginClass],
    actions: Mapping[str, ActionClass],
    source: str = "<policy>",
) -> Policy:
    """Validate and compile a policy document (already parsed from YAML)."""
    if not isinstance(doc, dict):
        raise PolicyError(f"{source}: the policy must be a map with keys actions, plugins, stages")
    unknown = set(doc) - _TOP_KEYS
    if unknown:
        names = ", ".join(sorted(map(str, unknown)))
        raise PolicyError(f"{source}: unknown key(s) {names} (known: apiVersion, kind, actions, plugins, stages)")
    _check_version(doc, source)
    for name, cls in plugins.items():
        bad = set(cls.STAGES) - set(STAGES) - {EVENT_HOOK}
        if bad:  # a programming error in a plugin, caught at load rather than mid-cycle
            raise PolicyError(f"plugin {name} declares unknown stage(s) {sorted(bad)}")
    acts = _parse_actions(doc.get("actions"), actions, source)
    plugs = _parse_plugins(doc.get("plugins"), plugins, source)
    stages = _compile_stages(doc.get("stages"), plugs, source)
    return Policy(acts, plugs, stages, source)


def load_policy(
    text: str,
    *,
    plugins: Mapping[str, PluginClass],
    actions: Mapping[str, ActionClass],
    source: str = "<policy>",
) -> Policy:
    """Parse YAML text and build the policy (see :func:`parse_policy`)."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PolicyError(f"{source}: not valid YAML: {exc}") from None
    return parse_policy(doc, plugins=plugins, actions=actions, source=source)


StageFn = Callable[..., Any]
