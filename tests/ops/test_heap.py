"""extender.heap: the settle (collect + freeze) and the pause the binder cycle runs under."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from extender import heap


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


@pytest.fixture(autouse=True)
def _restore_gc() -> Iterator[None]:
    was = gc.isenabled()
    yield
    gc.unfreeze()
    if was:
        gc.enable()
    else:
        gc.disable()


def _cycle() -> weakref.ref[_Node]:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_settle_freezes_survivors_and_the_next_settle_collects_frozen_cycles() -> None:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    ref = weakref.ref(a)
    assert heap.settle() >= 0.0
    assert gc.get_freeze_count() > 0
    del a, b  # now garbage, but frozen: a normal collection leaves it alone
    gc.collect()
    assert ref() is not None
    heap.settle()  # unfreezes first: the cycle goes
    assert ref() is None


def test_dropped_frozen_objects_without_cycles_are_freed_at_once() -> None:
    obj = _Node()
    ref = weakref.ref(obj)
    heap.settle()
    del obj
    assert ref() is None  # reference counting does not care about freezing


def test_paused_blocks_automatic_collection_and_restores_the_previous_state() -> None:
    gc.enable()
    with heap.paused():
        assert not gc.isenabled()
        with heap.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner pause restored "disabled"
        ref = _cycle()
    assert gc.isenabled()
    assert ref() is not None  # nothing collected it inside the pause
    gc.collect()
    assert ref() is None
    gc.disable()
    with heap.paused():
        pass
    assert not gc.isenabled()  # a collector the caller disabled stays disabled


def test_paused_restores_the_collector_when_the_section_raises() -> None:
    gc.enable()
    with pytest.raises(RuntimeError), heap.paused():
        raise RuntimeError("boom")
    assert gc.isenabled()
