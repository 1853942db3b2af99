"""Kubernetes quantities and resource vectors, in exact integers.

Units, fixed per resource name:

* byte-valued resources (``memory``, ``ephemeral-storage``, ``storage``, ``hugepages-*``): bytes;
* everything else (``cpu``, ``pods``, extended resources such as ``nvidia.com/gpu``): milli-units,
  so ``500m`` CPU is 500 and ``0.01`` GPU is 10 — exact, never a float.

Parsing follows ``k8s.io/apimachinery/pkg/api/resource``: ``<number><suffix>`` where the suffix is
a binary SI suffix (``Ki`` … ``Ei``), a decimal SI suffix (``n u m "" k M G T P E``) or a decimal
exponent (``e3``, ``E-2``). Like ``Quantity.MilliValue()`` / ``Value()``, a value finer than the
unit is rounded up.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, NamedTuple

__all__ = [
    "QuantityError",
    "Resource",
    "Shortfall",
    "format_quantity",
    "gpu_summary",
    "is_byte_resource",
    "parse_quantity",
    "to_units",
]


class QuantityError(ValueError):
    """A quantity string (or a resource list) that Kubernetes would not accept."""


_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"^(?P<sign>[+-]?)(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|[eE](?P<exp>[+-]?[0-9]+)|(?P<dec>[numkMGTPE]?))$"
)


def parse_quantity(value: str | int | float) -> Fraction:
    """Parse a Kubernetes quantity into an exact rational number.

    >>> parse_quantity("500m"), parse_quantity("8Gi"), parse_quantity("1e3")
    (Fraction(1, 2), Fraction(8589934592, 1), Fraction(1000, 1))
    """
    if isinstance(value, bool):
        raise QuantityError(f"quantity {value!r}: a boolean is not a quantity")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"quantity {value!r}: not a finite number")
        # YAML turns `1.5` into a float; its shortest decimal spelling is what the user wrote.
        return parse_quantity(repr(value))
    if not isinstance(value, str):
        raise QuantityError(f"quantity {value!r}: expected a string or a number")
    text = value.strip()
    m = _QUANTITY.match(text)
    if m is None:
        raise QuantityError(
            f"quantity {value!r}: not a Kubernetes quantity (expected <number><suffix>, "
            "suffix one of Ki Mi Gi Ti Pi Ei, n u m k M G T P E, or e<exponent>)"
        )
    number = Fraction(m["num"] + ("0" if m["num"].endswith(".") else ""))
    if m["bin"]:
        number *= _BINARY[m["bin"]]
    elif m["exp"] is not None:
        exponent = int(m["exp"])
        if abs(exponent) > 64:
            raise QuantityError(f"quantity {value!r}: exponent out of range")
        number *= Fraction(10) ** exponent
    else:
        number *= _DECIMAL[m["dec"] or ""]
    return -number if m["sign"] == "-" else number


_BYTE_RESOURCES = frozenset({"memory", "ephemeral-storage", "storage"})


def is_byte_resource(name: str) -> bool:
    """True for resources counted in bytes, False for those counted in milli-units."""
    return name in _BYTE_RESOURCES or name.startswith("hugepages-")


def to_units(name: str, value: object) -> int:
    """Parse ``value`` and express it in the integer unit of resource ``name`` (rounding up).
    Memoised for strings and numbers (a pure function; a cluster spells few distinct
    quantities, and exact rational parsing costs ~10 µs each — 4 to 8 per pod); errors are
    raised every time, never cached, and any other value is refused by :func:`parse_quantity`."""
    if isinstance(value, (str, int, float)):
        return _cached_units(name, value)
    return _units(name, value)


def _units(name: str, value: Any) -> int:
    q = parse_quantity(value)
    scaled = q if is_byte_resource(name) else q * 1000
    return math.ceil(scaled)


_cached_units = functools.lru_cache(maxsize=4096, typed=True)(_units)


def format_quantity(name: str, units: int) -> str:
    """The canonical Kubernetes spelling of ``units`` of resource ``name`` (inverse of to_units)."""
    if is_byte_resource(name):
        if units == 0:
            return "0"
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            base = _BINARY[suffix]
            if units % base == 0:
                return f"{units // base}{suffix}"
        return str(units)
    if units % 1000 == 0:
        return str(units // 1000)
    return f"{units}m"


def _human(name: str, units: int) -> str:
    """A number for messages: whole units where possible, else a short decimal."""
    if is_byte_resource(name):
        return format_quantity(name, units)
    if units % 1000 == 0:
        return str(units // 1000)
    return format(Fraction(units, 1000).__float__(), "g")


class Shortfall(NamedTuple):
    """One resource name that does not fit: how much was asked and how much there is."""

    name: str
    requested: int
    available: int
    missing: bool  # the name does not exist at all on the other side

    def __str__(self) -> str:
        if self.missing:
            return f"{self.name} {_human(self.name, self.requested)} > none"
        return f"{self.name} {_human(self.name, self.requested)} > {_human(self.name, self.available)}"


@dataclass(slots=True, eq=False)
class Resource:
    """A resource vector: resource name → integer units (see module docstring).

    Names with value 0 are kept (a node may advertise ``nvidia.com/gpu: 0``), which matters for
    :meth:`less_equal_with_resource_names`. Equality ignores zero entries.
    """

    q: dict[str, int]

    # --- construction ------------------------------------------------------------------------
    @classmethod
    def empty(cls) -> Resource:
        return cls({})

    @classmethod
    def of(cls, **units: int) -> Resource:
        """Build from keyword units; ``_`` in a keyword stands for ``/`` (``rdma_hca`` → ``rdma/hca``)."""
        return cls({k.replace("__", ".").replace("_", "/"): v for k, v in units.items()})

    @classmethod
    def from_list(cls, resource_list: Mapping[str, object] | None, *, what: str = "resources") -> Resource:
        """Parse a Kubernetes ResourceList (``{"cpu": "500m", "nvidia.com/gpu": 1}``)."""
        out: dict[str, int] = {}
        if not resource_list:
            return cls(out)
        for name, raw in resource_list.items():
            if not isinstance(raw, str | int | float) or isinstance(raw, bool):
                raise QuantityError(f"{what}: {name}: quantity {raw!r} is not a string or number")
            try:
                units = to_units(name, raw)
            except QuantityError as exc:
                raise QuantityError(f"{what}: {name}: {exc}") from None
            if units < 0:
                raise QuantityError(f"{what}: {name}: quantity {raw!r} must not be negative")
            out[name] = units
        return cls(out)

    def to_list(self) -> dict[str, str]:
        """The ResourceList spelling (``{"nvidia.com/gpu": "1"}``), zero entries included."""
        return {k: format_quantity(k, v) for k, v in sorted(self.q.items())}

    def clone(self) -> Resource:
        return Resource(dict(self.q))

    # --- reading -----------------------------------------------------------------------------
    def get(self, name: str) -> int:
        return self.q.get(name, 0)

    def names(self) -> Iterator[str]:
        return iter(self.q)

    def is_empty(self) -> bool:
        return not any(self.q.values())

    def __bool__(self) -> bool:  # pragma: no cover - guard against `if resource:` ambiguity
        raise TypeError("use Resource.is_empty() instead of truthiness")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Resource):
            return NotImplemented
        a = {k: v for k, v in self.q.items() if v}
        b = {k: v for k, v in other.q.items() if v}
        return a == b

    def __hash__(self) -> int:
        return hash(frozenset((k, v) for k, v in self.q.items() if v))

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={format_quantity(k, v)}" for k, v in sorted(self.q.items()))
        return f"Resource({inner})"

    def __str__(self) -> str:
        return ",".join(f"{k}:{format_quantity(k, v)}" for k, v in sorted(self.q.items()) if v) or "0"

    # --- arithmetic (new objects) ------------------------------------------------------------
    def __add__(self, other: Resource) -> Resource:
        out = dict(self.q)
        for k, v in other.q.items():
            out[k] = out.get(k, 0) + v
        return Resource(out)

    def __sub__(self, other: Resource) -> Resource:
        """Difference; may go negative (use :meth:`fits` before subtracting when it must not)."""
        out = dict(self.q)
        for k, v in other.q.items():
            out[k] = out.get(k, 0) - v
        return Resource(out)

    def scaled(self, factor: int) -> Resource:
        return Resource({k: v * factor for k, v in self.q.items()})

    def maximum(self, other: Resource) -> Resource:
        out = dict(self.q)
        for k, v in other.q.items():
            out[k] = max(out.get(k, 0), v)
        return Resource(out)

    # --- arithmetic (in place, for ledgers) --------------------------------------------------
    def iadd(self, other: Resource) -> None:
        q = self.q
        for k, v in other.q.items():
            q[k] = q.get(k, 0) + v

    def isub(self, other: Resource) -> None:
        q = self.q
        for k, v in other.q.items():
            q[k] = q.get(k, 0) - v

    # --- comparison --------------------------------------------------------------------------
    def less_equal(self, other: Resource) -> bool:
        """Every name of ``self`` is ≤ the same name of ``other`` (a missing name counts as 0)."""
        oq = other.q
        return all(v <= oq.get(k, 0) for k, v in self.q.items())

    def less_equal_with_resource_names(self, other: Resource) -> bool:
        """Like :meth:`less_equal`, but a requested (non-zero) name missing from ``other`` fails.

        This is the seed's ``LessEqualWithResourcesName``: a quota asking for a GPU model a node
        does not advertise at all never fits that node.
        """
        oq = other.q
        for k, v in self.q.items():
            if v == 0:
                continue
            have = oq.get(k)
            if have is None or v > have:
                return False
        return True

    def shortfalls(self, other: Resource) -> list[Shortfall]:
        """Names for which ``self`` does not fit ``other`` (same rule as the method above)."""
        out: list[Shortfall] = []
        oq = other.q
        for k, v in sorted(self.q.items()):
            if v == 0:
                continue
            have = oq.get(k)
            if have is None:
                out.append(Shortfall(k, v, 0, True))
            elif v > have:
                out.append(Shortfall(k, v, have, False))
        return out

    def any_negative(self) -> bool:
        return any(v < 0 for v in self.q.values())

    @staticmethod
    def total(resources: Iterable[Resource]) -> Resource:
        out = Resource.empty()
        for r in resources:
            out.iadd(r)
        return out


def gpu_summary(request: Resource, gpu_resources: Iterable[str]) -> str:
    """The GPUs ``request`` holds, per configured GPU resource (``serve --gpu-resources``) in that
    order, e.g. ``8 amd.com/gpu`` or ``4 nvidia.com/gpu, 2 gpu.intel.com/i915``; "" when none."""
    held = [n for n in dict.fromkeys(gpu_resources) if request.q.get(n)]
    return ", ".join(f"{format_quantity(n, request.q[n])} {n}" for n in held)
