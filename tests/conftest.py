"""Shared test configuration.

Async tests use AnyIO's pytest plugin (shipped with anyio, a dependency of httpx and starlette):
mark them ``@pytest.mark.anyio``; they run on asyncio.
"""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
