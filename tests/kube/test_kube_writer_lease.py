"""KubeWriter against the emulator: the Lease operations of leader election."""

from __future__ import annotations

from typing import Any

import pytest

from extender.emulator import Emulator
from extender.kube.errors import (
    AlreadyExists,
    Conflict,
)

from .writes import writer

pytestmark = pytest.mark.anyio


async def test_lease_operations(emu: Emulator, api: Any, ns: str) -> None:
    w = writer(api)
    assert await w.get_lease(ns, "l") is None
    lease = await w.create_lease(ns, "l", {"holderIdentity": "a", "leaseDurationSeconds": 15})
    with pytest.raises(AlreadyExists):
        await w.create_lease(ns, "l", {})
    updated = await w.update_lease({**lease, "spec": {**lease["spec"], "holderIdentity": "b"}})
    assert updated["spec"]["holderIdentity"] == "b"
    with pytest.raises(Conflict):
        await w.update_lease({**lease, "spec": {"holderIdentity": "c"}})  # stale resourceVersion
    got = await w.get_lease(ns, "l")
    assert got is not None and got["spec"]["holderIdentity"] == "b"
