"""The enum base of the model and framework enums."""

from __future__ import annotations

import enum

__all__ = ["Enum"]


class Enum(enum.Enum):
    """``enum.Enum``, hashed by identity.

    Members are singletons and compare by identity, so the identity hash is consistent with
    equality. ``enum.Enum.__hash__`` is a Python function (``hash(self._name_)``), called for every
    set membership and dict lookup: task statuses checked against ``ALIVE`` and event kinds
    dispatched to their handlers paid it over 100,000 times per binder cycle at scale.
    """

    __hash__ = object.__hash__
