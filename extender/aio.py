"""Small asyncio helpers shared by the long-running components."""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["cancel_and_wait"]


async def cancel_and_wait(task: asyncio.Task[Any] | None) -> None:
    """Cancel ``task`` and wait until it has finished unwinding.

    The task's own ``CancelledError`` is absorbed; a cancellation of the *caller* while it waits
    is not (``Task.cancelling()``), so stopping a component never hides a shutdown from above.
    """
    if task is None or task.done():
        return
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise
