"""Task identity across pod re-creation: which pod takes the place of which."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Claimant", "is_stand_in", "replaces"]


@dataclass(frozen=True, slots=True)
class Claimant:
    """Who a claim is for: what :func:`replaces` compares."""

    namespace: str
    name: str
    job: str
    index: int | None
    inherit_from: str = ""


def replaces(new: Claimant, old: Claimant) -> bool:
    """``new`` takes the place of ``old`` (the same task of the same job, recreated): same
    namespace and job and either the same task index or the same pod name — or ``new`` inherits
    from ``old`` by name. The rule of :meth:`~extender.model.quota.ReservedTask.admits`.

    A ``generateName`` pod at admission has no name yet: it stands in as its prefix followed by
    ``*`` (and a lone one's job is named so too), which every pod of that owner shares — a name
    that identifies no pod, so it never makes one pod the replacement of another."""
    if new.namespace != old.namespace:
        return False
    if new.inherit_from and new.inherit_from == old.name:
        return True
    if new.job != old.job:
        return False
    if new.index is not None and new.index == old.index:
        return True
    return bool(new.name) and not is_stand_in(new.name) and new.name == old.name


def is_stand_in(name: str) -> bool:
    """``name`` is the stand-in of a pod whose name the apiserver has not generated yet."""
    return name.endswith("*")
