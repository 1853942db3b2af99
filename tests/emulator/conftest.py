"""Fixtures for the emulator's tests: one threaded emulator per module, fresh state per test."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from extender.emulator import Emulator
from extender.kube import client as kube_client


@pytest.fixture(scope="module")
def emu_server() -> Iterator[Emulator]:
    with Emulator(bookmark_interval=0.2) as emu:
        yield emu


@pytest.fixture
def emu(emu_server: Emulator) -> Iterator[Emulator]:
    """The module's emulator with no faults and an empty journal."""
    emu_server.faults.clear()
    emu_server.journal.clear()
    yield emu_server
    emu_server.faults.clear()


@pytest.fixture
async def api(emu: Emulator) -> AsyncIterator[Any]:
    """A kubernetes-asyncio ApiClient for the emulator, the way production builds one."""
    client = kube_client.from_url(emu.url, token=emu.token)
    yield client
    await client.close()


@pytest.fixture
def ns(emu: Emulator) -> str:
    """A fresh namespace for the test."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    emu.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name
