"""Shared test configuration.

Async tests use AnyIO's pytest plugin (shipped with anyio, a dependency of httpx and starlette):
mark them ``@pytest.mark.anyio``; they run on asyncio.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from tests.fuzzing import LoopRunner


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --- emulator fixtures: a package that uses them defines ``emu_server`` (a running Emulator) ---
@pytest.fixture
def emu(emu_server: Any) -> Iterator[Any]:
    """The package's emulator with no faults and an empty journal."""
    emu_server.faults.clear()
    emu_server.journal.clear()
    yield emu_server
    emu_server.faults.clear()


@pytest.fixture
async def api(emu: Any) -> AsyncIterator[Any]:
    """A kubernetes-asyncio ApiClient for the emulator, the way production builds one."""
    from extender.kube import client as kube_client

    client = kube_client.from_url(emu.url, token=emu.token)
    yield client
    await client.close()


@pytest.fixture
def ns(emu: Any) -> str:
    """A fresh namespace for the test."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    emu.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


@pytest.fixture(scope="module")
def runner() -> Iterator[LoopRunner]:
    """One event loop on a thread for a module whose hypothesis examples call into async code."""
    r = LoopRunner()
    yield r
    r.close()
