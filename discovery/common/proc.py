"""Running the external tools (lldpcli, rdma, ibnetdiscover): asyncio subprocess with a timeout.

Every failure is an exception carrying one human sentence, so the agents can log it as one line:
:class:`ToolMissing` (not on PATH / not executable), :class:`ToolFailed` (non-zero exit, with the
first line of stderr), :class:`ToolTimeout` (killed after the timeout).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ToolError", "ToolFailed", "ToolMissing", "ToolOutput", "ToolTimeout", "run_tool"]


class ToolError(Exception):
    """A tool could not give its output."""

    def __init__(self, tool: str, message: str) -> None:
        super().__init__(message)
        self.tool = tool


class ToolMissing(ToolError):
    pass


class ToolFailed(ToolError):
    def __init__(self, tool: str, message: str, returncode: int, stderr: str) -> None:
        super().__init__(tool, message)
        self.returncode = returncode
        self.stderr = stderr


class ToolTimeout(ToolError):
    pass


@dataclass(frozen=True, slots=True)
class ToolOutput:
    stdout: str
    stderr: str


_LOG_PREFIX = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\S*\s+(?:\[[^\]]*\]\s*)?")
"""A timestamp (and ``[LEVEL/component]``) that tools such as lldpcli put before their messages;
removed so that the same failure gives the same message every round."""


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return _LOG_PREFIX.sub("", line.strip())
    return ""


async def run_tool(argv: Sequence[str], time_limit: float) -> ToolOutput:
    """Run ``argv`` (no shell), return its output; raise a :class:`ToolError` on any failure."""
    if not argv:
        raise ToolMissing("", "empty command")
    tool = argv[0]
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except FileNotFoundError:
        raise ToolMissing(tool, f"{tool} not found on PATH") from None
    except PermissionError:
        raise ToolMissing(tool, f"{tool} is not executable (permission denied)") from None
    try:
        out, err = await asyncio.wait_for(proc.communicate(), time_limit)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        raise ToolTimeout(tool, f"{tool} did not finish within {time_limit:g}s") from None
    except asyncio.CancelledError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        raise
    stdout = out.decode("utf-8", "replace")
    stderr = err.decode("utf-8", "replace")
    if proc.returncode != 0:
        detail = _first_line(stderr) or _first_line(stdout) or "no output"
        raise ToolFailed(tool, f"{tool} failed (exit {proc.returncode}): {detail}", proc.returncode or 0, stderr)
    return ToolOutput(stdout, stderr)
