"""The binder's synchronous part and very large requests run off the event loop, and the cache
does not change under them (``extender/cache/gate.py``).

Checked without clocks: which thread ran the work, that the event loop kept turning while it
ran, that writers (informer deliveries, the extender's bind) wait for it and then apply in order,
and that the answers are those of the same work done on the loop.
"""

from __future__ import annotations

import asyncio
import copy
import threading
from collections.abc import Callable, Mapping
from typing import Any

import orjson
import pytest

from extender.api import extender as api
from extender.binder.loop import BinderLoop
from extender.binder.plan import plan_writes
from extender.cache.cache import ClusterCache
from extender.conf import default_policy
from extender.scheduler import Scheduler
from extender.service import _CacheHandler
from extender.state import ServiceState
from tests import builders as b

pytestmark = pytest.mark.anyio

Obj = dict[str, Any]
NOW = 1_000_000.0


def _objects() -> list[Obj]:
    objs: list[Obj] = []
    for leaf in range(4):
        for i in range(8):
            name = f"n{leaf * 8 + i}"
            objs += [b.node(name), b.topology(name, [f"leaf-{leaf}"])]
    for j in range(12):
        objs += b.training_job(f"job{j}", 4, gpu=(1, 2)[j % 2], hca=1)
    return objs


def _cache(objs: list[Obj] | None = None) -> ClusterCache:
    c = ClusterCache(clock=lambda: NOW)
    b.feed(c, copy.deepcopy(objs) if objs is not None else _objects())
    return c


class Writer:
    """Applies each write to a copy of the object as the API would, and records it."""

    def __init__(self, cache: ClusterCache) -> None:
        self.cache = cache
        self.quota_statuses: dict[str, Obj] = {}
        self.pod_patches: dict[str, dict[str, str | None]] = {}

    async def update_quota_status(
        self, name: str, mutate: Callable[[Obj], Obj | None], *, current: Obj | None = None
    ) -> Obj | None:
        current = copy.deepcopy(dict(self.cache.quota_object(name) or {}))
        status = mutate(copy.deepcopy(current))
        if status is None:
            return current
        self.quota_statuses[name] = status
        meta = {**current["metadata"], "resourceVersion": str(int(current["metadata"]["resourceVersion"]) + 1)}
        return {**current, "metadata": meta, "status": status}

    async def patch_pod_annotations(
        self, namespace: str, name: str, annotations: Any, *, uid: str | None = None
    ) -> Obj:
        self.pod_patches[f"{namespace}/{name}"] = dict(annotations)
        obj = copy.deepcopy(dict(self.cache.pod(uid or "") or {}))
        anno = {**(obj["metadata"].get("annotations") or {})}
        for k, v in annotations.items():
            if v is None:
                anno.pop(k, None)
            else:
                anno[k] = v
        meta = {**obj["metadata"], "annotations": anno}
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)
        return {**obj, "metadata": meta}

    async def post_event(self, *args: Any) -> None:
        return None

    async def bind_pod(self, *args: Any) -> None:
        return None

    async def patch_podgroup_status(self, *args: Any) -> None:
        return None

    # the rest of the binder loop's Writer protocol: no cycle of these tests reaches them

    async def update_queue_status(self, name: str, mutate: Callable[[Obj], Obj | None]) -> Obj | None:
        raise AssertionError("this test does not write Queues")

    async def update_jobqueue_status(self, name: str, mutate: Callable[[Obj], Obj | None]) -> Obj | None:
        raise AssertionError("this test does not write JobQueues")

    async def apply_quota(self, body: Mapping[str, Any]) -> tuple[Obj, bool]:
        raise AssertionError("this test does not create Quotas")

    async def delete_quota(self, name: str, *, uid: str, resource_version: str) -> bool:
        raise AssertionError("this test does not delete Quotas")

    async def patch_node_labels(self, node: str, labels: Mapping[str, str | None]) -> Obj:
        raise AssertionError("this test does not label nodes")


async def test_the_cycle_runs_on_a_worker_thread_while_the_loop_turns() -> None:
    cache = _cache()
    scheduler = Scheduler(default_policy())
    threads: list[int] = []
    turns_during: list[int] = []
    run_once = scheduler.run_once
    turns = 0

    def spy(snap: Any) -> Any:
        threads.append(threading.get_ident())
        before = turns
        result = run_once(snap)
        # wait (bounded) until the loop has turned while this thread holds the cycle
        for _ in range(2000):
            if turns > before + 2:
                break
            threading.Event().wait(0.001)
        turns_during.append(turns - before)
        return result

    scheduler.run_once = spy  # type: ignore[method-assign]
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal turns
        while not stop.is_set():
            turns += 1
            await asyncio.sleep(0)

    tick = asyncio.create_task(ticker())
    writer = Writer(cache)
    report = await BinderLoop(cache, scheduler, writer).run_cycle()
    stop.set()
    await tick
    assert threads and threads[0] != threading.get_ident()
    assert turns_during[0] > 2  # the event loop ran other work meanwhile
    assert report.quota_writes == 48 and not report.failed
    assert not cache.gate.busy


async def test_the_cycle_writes_what_the_same_cycle_on_the_loop_plans() -> None:
    objs = _objects()  # one set of objects (their UIDs) for both caches
    reference = _cache(objs)
    result = Scheduler(default_policy()).run_once(reference.snapshot())
    plan = plan_writes(reference, result, extra_quotas=reference.take_dirty_quotas())
    expected = {w.name: {k: v for k, v in w.status.items() if v not in (None, "", [], {})} for w in plan.quotas}

    cache = _cache(objs)
    writer = Writer(cache)
    await BinderLoop(cache, Scheduler(default_policy()), writer).run_cycle()
    written = {
        name: {k: v for k, v in s.items() if k != "lastTransitionTime"} for name, s in writer.quota_statuses.items()
    }
    assert written == {name: {k: v for k, v in s.items() if k != "lastTransitionTime"} for name, s in expected.items()}
    assert len(written) == 48


async def test_writers_wait_for_an_off_loop_reader_and_apply_in_order() -> None:
    cache = _cache()
    release = threading.Event()
    seen: list[int] = []

    def reader() -> int:
        release.wait(30)
        return len(cache.quotas)  # what the reader saw: the cache as it was when it started

    reading = asyncio.create_task(cache.gate.off_loop(reader))
    await asyncio.sleep(0)
    assert cache.gate.busy
    handler = _CacheHandler(cache, "quota")
    first, second = b.quota("late-1", gpu=1, hca=None), b.quota("late-2", gpu=1, hca=None)
    for i, q in enumerate((first, second)):
        q["metadata"].update(uid=f"u-late-{i}", resourceVersion=str(900 + i))
    pending = [handler.on_add(first), handler.on_add(second)]
    assert all(p is not None for p in pending)  # deferred, not applied
    applied = asyncio.gather(*(p for p in pending if p is not None))
    await asyncio.sleep(0.01)
    assert "late-1" not in cache.quotas and "late-2" not in cache.quotas
    seen.append(len(cache.quotas))
    release.set()
    assert await reading == seen[0]
    await applied
    assert {"late-1", "late-2"} <= set(cache.quotas)
    assert handler.on_add(b.quota("late-3", gpu=1, hca=None)) is None  # the gate is open: at once
    assert "late-3" in cache.quotas


async def test_a_cancelled_reader_keeps_the_writers_waiting_until_its_thread_is_done() -> None:
    cache = _cache()
    release = threading.Event()
    reading = asyncio.create_task(cache.gate.off_loop(lambda: release.wait(30)))
    await asyncio.sleep(0.01)
    reading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reading
    assert cache.gate.busy  # the thread still reads
    waiter = asyncio.create_task(cache.gate.writable())
    await asyncio.sleep(0.01)
    assert not waiter.done()
    release.set()
    await asyncio.wait_for(waiter, 30)
    assert not cache.gate.busy


async def test_held_keeps_the_writers_waiting_from_the_reader_s_end_until_the_steps_are_done() -> None:
    """``ReadGate.held`` entered right after ``off_loop`` returns: a writer woken by the reader's
    end still waits until the held steps are done — no writer gets in between."""
    cache = _cache()
    release = threading.Event()
    order: list[str] = []

    async def binder() -> None:  # as BinderLoop.run_cycle: the reader awaited, then held at once
        await cache.gate.off_loop(lambda: release.wait(30))
        async with cache.gate.held():
            for step in range(3):
                order.append(f"step {step}")
                await asyncio.sleep(0.01)  # the loop turns: the writer is ready to run, and waits

    async def writer() -> None:
        await cache.gate.writable()
        order.append("writer")

    steps = asyncio.create_task(binder())
    await asyncio.sleep(0.01)
    waiting = asyncio.create_task(writer())
    await asyncio.sleep(0.01)
    release.set()
    await asyncio.wait_for(asyncio.gather(steps, waiting), 30)
    assert order == ["step 0", "step 1", "step 2", "writer"]
    assert not cache.gate.busy


async def test_a_very_large_request_is_answered_off_the_loop_with_the_same_reply(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cache = _cache()
    state = ServiceState(cache=cache, policy=default_policy(), clock=lambda: NOW)
    verbs = api.Verbs(state)
    threads: list[int] = []
    decide = verbs._decide

    def spy(pod: Any, names: list[str]) -> Any:
        threads.append(threading.get_ident())
        return decide(pod, names)

    monkeypatch.setattr(verbs, "_decide", spy)
    stored = cache.pod_by_name("default", "job0-worker-0")
    assert stored is not None
    pod = dict(stored)
    names = [f"n{i}" for i in range(32)] + [f"absent-{i}" for i in range(80_000)]
    body = orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})
    assert len(body) >= api.OFF_LOOP_BODY_BYTES
    scope = {"type": "http", "method": "POST", "path": "/filter", "headers": []}
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    for verb in ("filter", "prioritize"):
        sent = False
        answered = await verbs.answer(verb, scope, receive)
        assert answered is not None
        status, off_loop = answered
        assert status == 200 and threads[-1] != threading.get_ident()
        on_loop = await verbs.handlers[verb](body)  # the same verb, on the loop
        assert threads[-1] == threading.get_ident()
        assert off_loop == on_loop
    assert orjson.loads(off_loop)[0]["Host"] == "n0"
