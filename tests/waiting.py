"""Waiting in async tests for something another task or process makes true."""

from __future__ import annotations

from collections.abc import Callable

import anyio


async def eventually(predicate: Callable[[], bool], within: float = 10.0, every: float = 0.01) -> None:
    """Wait until ``predicate()`` holds, checking every ``every`` seconds; fail the test after
    ``within`` seconds."""
    with anyio.fail_after(within):
        while True:
            if predicate():
                return
            await anyio.sleep(every)
