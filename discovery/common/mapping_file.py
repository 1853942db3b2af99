"""Operator files that are one YAML (or JSON) mapping: the RoCE fabric map, the IB switch names."""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["load_mapping"]


def load_mapping(text: str, source: str, error: type[ValueError], expected: str) -> dict[Any, Any]:
    """The mapping in ``text``, every scalar a string (no YAML type guessing); ``{}`` for an empty
    file. Else ``error`` naming ``source``: not YAML or JSON, or not a mapping (``expected`` says
    what was; ``{type}`` in it is replaced by the type found)."""
    try:
        doc = yaml.load(text, Loader=yaml.BaseLoader)
    except yaml.YAMLError as e:
        raise error(f"{source}: not YAML or JSON: {e}") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise error(f"{source}: " + expected.replace("{type}", type(doc).__name__))
    return doc
