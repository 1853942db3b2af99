"""The informer over real HTTP: sync, watch, and relists that neither lose nor double an effect."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from extender import wellknown
from extender.emulator import Emulator
from extender.kube import client as kube_client
from extender.kube.informer import Backoff, Informer, Resource, object_key
from tests.waiting import eventually

pytestmark = pytest.mark.anyio

CONFIGMAPS = Resource("", "v1", "configmaps")


class Recorder:
    """A handler that rebuilds the object set from callbacks and flags every impossible call."""

    def __init__(self) -> None:
        self.state: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []
        self.violations: list[str] = []

    def on_add(self, obj: dict[str, Any]) -> None:
        key = object_key(obj)
        if key in self.state:
            self.violations.append(f"add of known {key}")
        self.state[key] = obj
        self.calls.append(("add", key))

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        key = object_key(new)
        known = self.state.get(key)
        if known is None:
            self.violations.append(f"update of unknown {key}")
        elif known["metadata"]["resourceVersion"] != old["metadata"]["resourceVersion"]:
            self.violations.append(f"update of {key}: old is not what was delivered before")
        if int(new["metadata"]["resourceVersion"]) <= int(old["metadata"]["resourceVersion"]):
            self.violations.append(f"update of {key} that goes back in time")
        self.state[key] = new
        self.calls.append(("update", key))

    def on_delete(self, obj: dict[str, Any]) -> None:
        key = object_key(obj)
        if self.state.pop(key, None) is None:
            self.violations.append(f"delete of unknown {key}")
        self.calls.append(("delete", key))

    def versions(self) -> dict[str, str]:
        return {k: v["metadata"]["resourceVersion"] for k, v in self.state.items()}


def truth(emu: Emulator, api_version: str, resource: str, namespace: str | None = None, **kw: Any) -> dict[str, str]:
    """A fresh list, as key -> resourceVersion."""
    return {
        object_key(o): o["metadata"]["resourceVersion"]
        for o in emu.list(api_version, resource, namespace=namespace, **kw)
    }


@asynccontextmanager
async def running(informer: Informer) -> AsyncIterator[Informer]:
    informer.start()
    try:
        with anyio.fail_after(10):
            await informer.synced.wait()
        yield informer
    finally:
        await informer.stop()


def cm(name: str, ns: str, value: str = "0", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "data": {"v": value},
    }


async def test_initial_list_then_watch_keeps_store_and_handler_in_step(emu: Emulator, api: Any, ns: str) -> None:
    for i in range(25):
        emu.create(cm(f"c{i:02d}", ns))
    rec = Recorder()
    inf = Informer(api, CONFIGMAPS, rec, namespace=ns, page_size=10)
    async with running(inf):
        assert rec.versions() == truth(emu, "v1", "configmaps", ns)
        assert inf.resource_version is not None and int(inf.resource_version) > 0
        emu.create(cm("new", ns))
        emu.patch("v1", "configmaps", "c00", {"data": {"v": "1"}}, namespace=ns)
        emu.delete("v1", "configmaps", "c01", namespace=ns)
        await eventually(lambda: rec.versions() == truth(emu, "v1", "configmaps", ns))
        assert {k: v["metadata"]["resourceVersion"] for k, v in inf.store.items()} == rec.versions()
    assert rec.violations == []
    assert rec.calls[-3:] == [("add", f"{ns}/new"), ("update", f"{ns}/c00"), ("delete", f"{ns}/c01")]
    assert inf.stats.lists == 1


async def _relist_scenario(
    emu: Emulator, api: Any, ns: str, *, break_watch: Callable[[], None]
) -> tuple[Recorder, Informer]:
    for i in range(10):
        emu.create(cm(f"c{i}", ns))
    rec = Recorder()
    inf = Informer(api, CONFIGMAPS, rec, namespace=ns, backoff=Backoff(initial=0.05, maximum=0.2))
    async with running(inf):
        await eventually(lambda: emu.store.open_watches("configmaps") > 0)
        before = len(rec.calls)
        break_watch()
        # while the informer is not watching: modify 3, delete 3, create 3, leave 4 alone
        for i in range(3):
            emu.patch("v1", "configmaps", f"c{i}", {"data": {"v": "changed"}}, namespace=ns)
        for i in range(3, 6):
            emu.delete("v1", "configmaps", f"c{i}", namespace=ns)
        for i in range(3):
            emu.create(cm(f"n{i}", ns))
        emu.faults.clear()
        await eventually(lambda: inf.stats.lists >= 2 and rec.versions() == truth(emu, "v1", "configmaps", ns))
        await eventually(lambda: emu.store.open_watches("configmaps") > 0)
        # and the new watch works
        emu.create(cm("after", ns))
        await eventually(lambda: f"{ns}/after" in rec.state)
    missed = sorted(rec.calls[before:-1])
    assert missed == sorted(
        [("update", f"{ns}/c{i}") for i in range(3)]
        + [("delete", f"{ns}/c{i}") for i in range(3, 6)]
        + [("add", f"{ns}/n{i}") for i in range(3)]
    ), "exactly the missed changes, each once, and nothing for the untouched objects"
    assert rec.violations == []
    assert {k: v["metadata"]["resourceVersion"] for k, v in inf.store.items()} == truth(emu, "v1", "configmaps", ns)
    return rec, inf


async def test_relist_after_a_dropped_connection_delivers_exactly_what_was_missed(
    emu: Emulator, api: Any, ns: str
) -> None:
    def cut() -> None:
        # keep the informer out while we mutate: its relists and re-watches fail until cleared
        emu.faults.add("list", "configmaps", code=503)
        emu.faults.add("watch", "configmaps", code=503)
        assert emu.faults.drop_watches("configmaps", abort=True) >= 1

    _, inf = await _relist_scenario(emu, api, ns, break_watch=cut)
    assert inf.stats.errors >= 1


async def test_relist_after_410_gone_delivers_exactly_what_was_missed() -> None:
    async with Emulator(history_size=4, bookmark_interval=60) as emu:
        api = kube_client.from_url(emu.url)
        try:
            ns = "default"

            def end_cleanly() -> None:
                # the stream ends normally: the informer re-watches from its resourceVersion, which
                # the mutations below (more than the history holds) push out of the history
                assert emu.faults.drop_watches("configmaps", abort=False) >= 1

            _, inf = await _relist_scenario(emu, api, ns, break_watch=end_cleanly)
            assert inf.stats.expired == 1
            assert inf.stats.errors == 0
        finally:
            await api.close()


async def test_label_selector_transitions_are_deletes_and_adds(emu: Emulator, api: Any, ns: str) -> None:
    emu.create(cm("a", ns, app="x"))
    emu.create(cm("b", ns, app="y"))
    rec = Recorder()
    inf = Informer(api, CONFIGMAPS, rec, namespace=ns, label_selector="app=x")
    async with running(inf):
        assert set(rec.state) == {f"{ns}/a"}
        emu.patch("v1", "configmaps", "a", {"metadata": {"labels": {"app": "y"}}}, namespace=ns)
        emu.patch("v1", "configmaps", "b", {"metadata": {"labels": {"app": "x"}}}, namespace=ns)
        await eventually(lambda: set(rec.state) == {f"{ns}/b"})
    assert rec.violations == []
    assert rec.calls == [("add", f"{ns}/a"), ("delete", f"{ns}/a"), ("add", f"{ns}/b")]


async def test_custom_resources_cluster_scoped_and_all_namespaces(emu: Emulator, api: Any, ns: str) -> None:
    quota = {"apiVersion": wellknown.API_VERSION, "kind": "Quota", "metadata": {"name": f"q-{ns}"}, "spec": {}}
    emu.create(quota)
    rec = Recorder()
    inf = Informer(api, Resource(wellknown.GROUP, wellknown.VERSION, wellknown.QUOTAS), rec)
    async with running(inf):
        assert f"q-{ns}" in rec.state
        emu.patch(wellknown.API_VERSION, "quotas", f"q-{ns}", {"status": {"phase": "QuotaBound"}}, subresource="status")
        await eventually(lambda: rec.state[f"q-{ns}"].get("status") == {"phase": "QuotaBound"})
    pods = Recorder()
    inf = Informer(api, Resource("", "v1", "pods"), pods, field_selector=f"metadata.namespace={ns}")
    emu.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": ns},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
        }
    )
    async with running(inf):
        assert set(pods.state) == {f"{ns}/p"}


async def test_informer_waits_for_a_resource_that_does_not_exist_yet(emu: Emulator, api: Any) -> None:
    group = f"late{uuid.uuid4().hex[:8]}.example.com"
    rec = Recorder()
    inf = Informer(api, Resource(group, "v1", "things"), rec, backoff=Backoff(initial=0.02, maximum=0.05))
    inf.start()
    try:
        await eventually(lambda: inf.stats.errors >= 2)
        assert not inf.synced.is_set()
        free = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        emu.create(
            {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": f"things.{group}"},
                "spec": {
                    "group": group,
                    "scope": "Cluster",
                    "names": {"plural": "things", "kind": "Thing"},
                    "versions": [
                        {
                            "name": "v1",
                            "served": True,
                            "storage": True,
                            "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": free}}},
                        }
                    ],
                },
            }
        )
        emu.create({"apiVersion": f"{group}/v1", "kind": "Thing", "metadata": {"name": "t"}})
        with anyio.fail_after(10):
            await inf.synced.wait()
        assert set(rec.state) == {"t"}
    finally:
        await inf.stop()


async def test_a_failing_handler_does_not_stop_the_informer(emu: Emulator, api: Any, ns: str) -> None:
    class Flaky(Recorder):
        def on_add(self, obj: dict[str, Any]) -> None:
            super().on_add(obj)
            if obj["metadata"]["name"] == "boom":
                raise RuntimeError("handler bug")

    rec = Flaky()
    inf = Informer(api, CONFIGMAPS, rec, namespace=ns)
    async with running(inf):
        emu.create(cm("boom", ns))
        emu.create(cm("fine", ns))
        await eventually(lambda: f"{ns}/fine" in rec.state)
    assert inf.stats.lists == 1


async def test_async_handlers_and_clean_stop(emu: Emulator, api: Any, ns: str) -> None:
    seen: list[str] = []

    class AsyncHandler:
        async def on_add(self, obj: dict[str, Any]) -> None:
            await anyio.lowlevel.checkpoint()
            seen.append(obj["metadata"]["name"])

        async def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
            seen.append("update")

        async def on_delete(self, obj: dict[str, Any]) -> None:
            seen.append("delete")

    emu.create(cm("a", ns))
    watches_before = emu.store.open_watches("configmaps")
    inf = Informer(api, CONFIGMAPS, AsyncHandler(), namespace=ns)
    async with running(inf):
        await eventually(lambda: emu.store.open_watches("configmaps") > watches_before)
        emu.create(cm("b", ns))
        await eventually(lambda: seen == ["a", "b"])
    assert inf._task is not None and inf._task.done()
    await eventually(lambda: emu.store.open_watches("configmaps") == watches_before)
