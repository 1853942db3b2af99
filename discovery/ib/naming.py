"""The ``--switch-names`` file of the InfiniBand collector, and the rule of unique switch names
(applied by :func:`discovery.ib.parse.switch_names`).

A switch's identity is its GUID; its node description is not unique: switches nobody renamed
all report the factory description (``Quantum Mellanox Technologies``, ``SwitchIB Mellanox
Technologies``). The name a switch gets in ``spec.net.ib[].switchName`` (and so in zone keys,
the ``zone`` label and ``spec.tiers``) is, in this order:

1. the name given for its GUID in the ``--switch-names`` file;
2. its description, when no other switch of the fabric has that description and no switch was
   given that name in the file;
3. ``"<description> (<guid>)"``, e.g. ``Quantum Mellanox Technologies (0x0c42a10301b00001)``;
   a switch whose description is unknown (``???``) is ``S-<guid>`` (16 hex digits).

Adding a switch with the same description to the fabric renames the one that was unique; a names
file keeps names stable whatever the fabric holds.

The names file is YAML (JSON is valid YAML): one mapping of GUID to name, GUIDs written as in
``ibnetdiscover`` (``0x`` prefix optional, leading zeros optional)::

    0x0c42a10301b00001: leaf-r01
    "0c42a10301b00002": leaf-r02

Values are read as plain strings (no YAML type guessing), so a GUID of only digits stays a GUID.
"""

from __future__ import annotations

from pathlib import Path

from discovery.common.mapping_file import load_mapping
from discovery.ib.parse import ParseError, normalize_guid

__all__ = ["SwitchNamesError", "load_switch_names", "parse_switch_names"]


class SwitchNamesError(ValueError):
    """A ``--switch-names`` file that cannot be used (the message names the file and the entry)."""


def parse_switch_names(text: str, source: str = "switch names") -> dict[str, str]:
    """Normalised GUID → name from the file's text; :class:`SwitchNamesError` on anything else
    (not a mapping, a key that is not a GUID, an empty name, a GUID given twice, a name given to
    two GUIDs)."""
    doc = load_mapping(text, source, SwitchNamesError, "expected a mapping of switch GUID to name, got {type}")
    out: dict[str, str] = {}
    owner: dict[str, str] = {}
    for raw_guid, raw_name in doc.items():
        try:
            guid = normalize_guid(str(raw_guid))
        except ParseError:
            raise SwitchNamesError(f"{source}: {raw_guid!r} is not a switch GUID (e.g. 0x0c42a10301b00001)") from None
        if not isinstance(raw_name, str) or not raw_name.strip():
            raise SwitchNamesError(f"{source}: switch {guid}: the name must be a non-empty string")
        name = raw_name.strip()
        if guid in out:
            raise SwitchNamesError(f"{source}: switch {guid} is named twice ({out[guid]!r}, {name!r})")
        if name in owner:
            raise SwitchNamesError(f"{source}: name {name!r} is given to two switches ({owner[name]}, {guid})")
        out[guid] = name
        owner[name] = guid
    return out


def load_switch_names(path: Path) -> dict[str, str]:
    """:func:`parse_switch_names` of a file; :class:`SwitchNamesError` when it cannot be read."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SwitchNamesError(f"cannot read switch names file {path}: {e}") from None
    return parse_switch_names(text, str(path))
