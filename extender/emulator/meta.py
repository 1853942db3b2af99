"""Object metadata helpers: timestamps, name and label validation, copies, human ages."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import orjson

from extender.emulator.errors import Cause

__all__ = [
    "deep_copy",
    "format_time",
    "human_duration",
    "now_rfc3339",
    "parse_time",
    "validate_dns_label",
    "validate_dns_subdomain",
    "validate_label_key",
    "validate_label_value",
    "validate_metadata_maps",
]

Obj = dict[str, Any]

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def deep_copy(obj: Any) -> Any:
    """A deep copy of a JSON value (orjson round trip: several times faster than ``copy.deepcopy``)."""
    return orjson.loads(orjson.dumps(obj))


def format_time(dt: datetime) -> str:
    """RFC 3339 with a ``Z`` and whole seconds, as ``metav1.Time`` serialises."""
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_rfc3339() -> str:
    return format_time(datetime.now(UTC))


def parse_time(text: str) -> datetime | None:
    """Parse an RFC 3339 time (``Z`` or offset, optional fraction); None when malformed."""
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return None


def human_duration(seconds: float) -> str:
    """``duration.HumanDuration`` of apimachinery: ``5s``, ``3m20s``, ``2h``, ``4d5h``, ``3y``."""
    s = int(seconds)
    s = max(s, 0)
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rest = s % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 192:
        rest = hours % 24
        return f"{hours // 24}d{rest}h" if rest else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = hours // 24
        rest = days % 365
        return f"{days // 365}y{rest}d" if rest else f"{days // 365}y"
    return f"{hours // 24 // 365}y"


def validate_dns_subdomain(value: str, field: str) -> list[Cause]:
    if len(value) > 253:
        return [Cause(field, "FieldValueInvalid", f'Invalid value: "{value}": must be no more than 253 characters')]
    if not _DNS_SUBDOMAIN.match(value):
        return [
            Cause(
                field,
                "FieldValueInvalid",
                f'Invalid value: "{value}": a lowercase RFC 1123 subdomain must consist of lower case '
                "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            )
        ]
    return []


def validate_dns_label(value: str, field: str) -> list[Cause]:
    if len(value) > 63 or not _DNS_LABEL.match(value):
        return [
            Cause(
                field,
                "FieldValueInvalid",
                f'Invalid value: "{value}": a lowercase RFC 1123 label must consist of lower case alphanumeric '
                "characters or '-', and must start and end with an alphanumeric character (at most 63 characters)",
            )
        ]
    return []


def validate_label_key(key: str, field: str) -> list[Cause]:
    prefix, slash, name = key.rpartition("/")
    bad = not slash and not key
    if slash and (not prefix or validate_dns_subdomain(prefix, field)):
        bad = True
    if not name or len(name) > 63 or not _QUALIFIED_NAME.match(name):
        bad = True
    if bad:
        return [
            Cause(
                field,
                "FieldValueInvalid",
                f"Invalid value: \"{key}\": name part must consist of alphanumeric characters, '-', '_' or '.', "
                "and must start and end with an alphanumeric character, with an optional DNS subdomain prefix "
                "and '/' (e.g. 'example.com/MyName')",
            )
        ]
    return []


def validate_label_value(value: str, field: str) -> list[Cause]:
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        return [
            Cause(
                field,
                "FieldValueInvalid",
                f'Invalid value: "{value}": a valid label must be an empty string or consist of alphanumeric '
                "characters, '-', '_' or '.', and must start and end with an alphanumeric character "
                "(at most 63 characters)",
            )
        ]
    return []


def validate_metadata_maps(meta: Obj) -> list[Cause]:
    """Label keys/values and annotation keys (their values may be any string)."""
    causes: list[Cause] = []
    for key, value in (meta.get("labels") or {}).items():
        causes += validate_label_key(key, f"metadata.labels[{key}]") or validate_label_value(
            value, f"metadata.labels[{key}]"
        )
    for key in meta.get("annotations") or {}:
        causes += validate_label_key(key.lower(), f"metadata.annotations[{key}]")
    return causes
