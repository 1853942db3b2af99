"""Fixtures for the emulator's tests: one threaded emulator per module, fresh state per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from extender.emulator import Emulator


@pytest.fixture(scope="module")
def emu_server() -> Iterator[Emulator]:
    with Emulator(bookmark_interval=0.2) as emu:
        yield emu
