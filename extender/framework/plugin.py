"""What a plugin and an action are.

A plugin is constructed once per policy version with its typed ``Args``. At each session open,
:meth:`Plugin.open` derives whatever per-session state it needs from the session (never from I/O,
a clock or randomness: ``ssn.now`` is the clock) and returns its stage functions keyed by stage id
(``"qn.predicate"``), plus optionally ``"events"`` → a handler of statement events. It must return
exactly the stage ids it declares in ``STAGES``. A plugin whose handler follows only some kinds of
event says which in a class attribute ``EVENT_KINDS`` (a set of ``EventKind``) and is called for
those only — like kube-scheduler's ``EventsToRegister``; without it, the handler sees every event.

An action is constructed once per policy version too; ``execute(ssn)`` runs it over a session.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from extender.framework.session import Session

__all__ = ["Action", "ArgsModel", "NoArgs", "Plugin"]


class ArgsModel(BaseModel):
    """Base of every plugin's and action's typed arguments: frozen, unknown keys rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class NoArgs(ArgsModel):
    pass


class Plugin(Protocol):
    @property
    def NAME(self) -> str: ...
    @property
    def STAGES(self) -> frozenset[str]: ...
    @property
    def args(self) -> ArgsModel: ...

    def open(self, ssn: Session) -> Mapping[str, Callable[..., Any]]: ...


class Action(Protocol):
    @property
    def NAME(self) -> str: ...

    def execute(self, ssn: Session) -> None: ...


class PluginClass(Protocol):
    """A plugin class as the registry holds it (class attributes read through the class)."""

    @property
    def NAME(self) -> str: ...
    @property
    def STAGES(self) -> frozenset[str]: ...
    @property
    def Args(self) -> type[ArgsModel]: ...

    def __call__(self, args: Any) -> Plugin: ...


class ActionClass(Protocol):
    @property
    def NAME(self) -> str: ...
    @property
    def Args(self) -> type[ArgsModel]: ...

    def __call__(self, args: Any) -> Action: ...
