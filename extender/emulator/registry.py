"""The served resource types: the built-in kinds plus those of the stored CustomResourceDefinitions.

For each type (group, version, plural) it keeps the compiled schema (custom resources) and the
table converter, and a ``generation`` bumped whenever the set of served types changes, which
discovery and OpenAPI answers are cached by. A CRD's types are replaced as a whole on every write
of the CRD and removed with it; a CRD whose plural or kind another CRD already serves is refused.
The registry has no lock: the store's lock guards it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from extender.emulator import errors
from extender.emulator.errors import Cause
from extender.emulator.resources import ResourceType, from_crd
from extender.emulator.schema import CompiledSchema
from extender.emulator.tables import TableConverter

__all__ = ["TypeRegistry"]

Obj = dict[str, Any]


class TypeRegistry:
    """Resource types by (group, version, plural), with their schemas and table converters."""

    def __init__(self, builtin: Iterable[ResourceType]) -> None:
        self._types: dict[tuple[str, str, str], ResourceType] = {}
        self._schemas: dict[tuple[str, str], CompiledSchema] = {}
        self._tables: dict[tuple[str, str], TableConverter] = {}
        self.generation = 0
        """Bumped whenever the set of served resources changes (CRD created, updated, deleted)."""
        for rt in builtin:
            self._add(rt)

    def _add(self, rt: ResourceType) -> None:
        self._types[(rt.group, rt.version, rt.plural)] = rt
        if rt.schema is not None:
            self._schemas[(rt.key, rt.version)] = CompiledSchema(rt.schema)
        self._tables[(rt.key, rt.version)] = TableConverter(rt)

    def types(self) -> list[ResourceType]:
        return list(self._types.values())

    def find(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._types.get((group, version, plural))

    def resolve(self, api_version: str, name: str) -> ResourceType:
        """A resource type by ``apiVersion`` and kind, plural, singular or short name (404 if none)."""
        group, _, version = api_version.rpartition("/")
        lowered = name.lower()
        for rt in self._types.values():
            if (
                rt.group == group
                and rt.version == version
                and (lowered in (rt.plural, rt.singular, rt.kind.lower()) or lowered in rt.short_names)
            ):
                return rt
        raise errors.ApiError(404, "NotFound", f"no resource {name!r} in {api_version!r}")

    def table_converter(self, rt: ResourceType) -> TableConverter:
        return self._tables[(rt.key, rt.version)]

    def schema(self, rt: ResourceType) -> CompiledSchema | None:
        """The compiled schema of a custom resource's version; None for built-in kinds."""
        return self._schemas.get((rt.key, rt.version))

    def serve_crd(self, crd: Obj) -> list[ResourceType]:
        """Replace the types of ``crd`` by those it now defines; returns them."""
        name = crd["metadata"]["name"]
        for k, rt in list(self._types.items()):
            if rt.crd_name == name:
                del self._types[k]
        added = from_crd(crd)
        for rt in added:
            self._add(rt)
        self.changed()
        return added

    def unserve_crd(self, crd: Obj) -> set[str]:
        """Remove the types of ``crd``; returns their resource keys. The caller calls
        :meth:`changed` once their objects are gone."""
        name = crd["metadata"]["name"]
        keys = {rt.key for rt in self._types.values() if rt.crd_name == name}
        for k, rt in list(self._types.items()):
            if rt.crd_name == name:
                del self._types[k]
        return keys

    def changed(self) -> None:
        self.generation += 1

    def name_conflicts(self, crd: Obj) -> list[Cause]:
        """Why ``crd`` may not be served: its plural or kind is served by another CRD (or built in)."""
        spec = crd.get("spec") or {}
        group = spec.get("group")
        names = spec.get("names") or {}
        key = f"{names.get('plural')}.{group}"
        for rt in self._types.values():
            if rt.key == key and rt.crd_name != crd["metadata"]["name"]:
                return [
                    Cause(
                        "spec.names.plural",
                        "FieldValueInvalid",
                        f'Invalid value: "{names.get("plural")}": already served',
                    )
                ]
            if rt.group == group and rt.kind == names.get("kind") and rt.crd_name != crd["metadata"]["name"]:
                return [Cause("spec.names.kind", "FieldValueInvalid", f'Invalid value: "{rt.kind}": already served')]
        return []
