"""The binder's writes keep to their share of the event loop (``extender/binder/pacing.py``), and
a paced coroutine behaves exactly as the same coroutine awaited directly.

The share is checked on a fake clock that the coroutines themselves advance (a step "takes" the
time it adds), so the rule — loop time used ≤ share × time elapsed + burst + one step, over
the whole run — is checked without measuring anything."""

from __future__ import annotations

import asyncio

import pytest

from extender.binder.pacing import LoopShare

pytestmark = pytest.mark.anyio


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


@pytest.mark.parametrize("share", [0.25, 0.5, 1.0])
async def test_steps_use_at_most_their_share_of_the_loop(share: float) -> None:
    t = FakeTime()
    pacer = LoopShare(share, burst=0.002, clock=t.clock, sleep=t.sleep)
    step = 0.0007

    async def work(n: int) -> int:
        for _ in range(n):
            t.now += step  # this step's work
            await asyncio.sleep(0)  # an await: the next step is paced
        return n

    done = await asyncio.gather(*(pacer.run(work(50)) for _ in range(8)))
    assert done == [50] * 8
    assert pacer.spent == pytest.approx(8 * 50 * step)
    elapsed = t.now
    assert pacer.spent <= share * elapsed + pacer.burst + step + 1e-9
    if share < 1:
        assert t.slept, "work beyond the share waits"
        # and it waits no more than it must: the loop is not left idle for nothing
        assert pacer.spent >= share * elapsed - pacer.burst - step


async def test_a_paced_coroutine_answers_and_raises_as_awaited_directly() -> None:
    pacer = LoopShare(0.5)

    async def fails_then_recovers() -> str:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_soon(fut.set_exception, KeyError("k"))
        try:
            await fut
        except KeyError as exc:  # what an awaited future raises reaches the coroutine
            return f"recovered from {exc}"
        return "not reached"

    async def raises() -> None:
        await asyncio.sleep(0)
        raise ValueError("bad")

    assert await pacer.run(fails_then_recovers()) == "recovered from 'k'"
    with pytest.raises(ValueError, match="bad"):
        await pacer.run(raises())


async def test_a_cancelled_paced_coroutine_unwinds() -> None:
    t = FakeTime()
    pacer = LoopShare(0.1, burst=0.001, clock=t.clock)  # the real sleep: the task waits on it
    unwound: list[str] = []
    started = asyncio.Event()

    async def long_work() -> None:
        try:
            while True:
                started.set()
                t.now += 0.01  # far beyond the share: the pacer makes it sleep
                await asyncio.sleep(0)
        finally:
            unwound.append("finally ran")

    async def paced() -> None:
        await pacer.run(long_work())

    task = asyncio.create_task(paced())
    await started.wait()
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert unwound == ["finally ran"]


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="share"):
        LoopShare(0)
    with pytest.raises(ValueError, match="share"):
        LoopShare(1.5)
    with pytest.raises(ValueError, match="burst"):
        LoopShare(0.5, burst=0)
