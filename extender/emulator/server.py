"""``Emulator``: the store, served over HTTP on 127.0.0.1, plus a Python API for the same store.

Two ways to run it::

    with Emulator() as emu:                 # background thread with its own event loop
        subprocess.run(["kubectl", "--kubeconfig", emu.write_kubeconfig(tmp / "kc"), "get", "nodes"])

    async with Emulator() as emu:           # inside the running event loop
        api = await kube.client.from_url(emu.url)

The Python API (``create``/``get``/``list``/``update``/``patch``/``delete``/``bind``/``load``)
goes through the same validation and resourceVersion logic as HTTP and may be called from any
thread; it is never subject to fault injection.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from extender.emulator import errors, patch
from extender.emulator.admission import ADMIN_USER, AdmissionResult, CallRecord, Request, ServiceMap
from extender.emulator.app import EmulatorApp
from extender.emulator.faults import Faults, Journal
from extender.emulator.meta import deep_copy
from extender.emulator.resources import ResourceType
from extender.emulator.selection import Selection
from extender.emulator.store import Store
from extender.emulator.watchstream import install_log_filter
from extender.servers import AppServer

__all__ = ["Emulator"]

Obj = dict[str, Any]
ObjList = list[Obj]
_PATCH_TYPES = {
    "merge": patch.MERGE_PATCH,
    "json": patch.JSON_PATCH,
    "strategic": patch.STRATEGIC_MERGE_PATCH,
}


class Emulator:
    """An in-process Kubernetes API server for tests, the simulator and sandboxes.

    ``history_size``: watch events kept per resource (older ``resourceVersion``\\ s get 410).
    ``bookmark_interval``: seconds between BOOKMARKs on watches that allow them.
    ``seed``: seeds fault-injection draws and ``generateName`` suffixes.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        history_size: int = 1000,
        bookmark_interval: float = 1.0,
        seed: int = 0,
        token: str = "sky-emulator-token",
    ) -> None:
        self.host = host
        self.requested_port = port
        self.token = token
        self.store = Store(history_size=history_size, rng=random.Random(seed))
        self.journal = Journal()
        self.faults = Faults(seed, drop_watches=self._drop_watches)
        self.services = ServiceMap()
        """Where the Services that webhook configurations name are served (no cluster DNS here)."""
        self.app = EmulatorApp(
            self.store,
            self.faults,
            self.journal,
            bookmark_interval=bookmark_interval,
            server_address=lambda: f"{self.host}:{self.port}",
            services=self.services,
        )
        self._http = AppServer(self.app, host=host, port=port, name="emulator", log_level="warning")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------------------------------
    # address

    @property
    def port(self) -> int:
        if not self._http.running:
            raise RuntimeError("the emulator is not running")
        return self._http.port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._http.running

    def kubeconfig(self, *, namespace: str = "default") -> Obj:
        """A kubeconfig (as a dict) for this server: one cluster, one token user, one context."""
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "preferences": {},
            "clusters": [{"name": "sky-emulator", "cluster": {"server": self.url}}],
            "users": [{"name": "sky-emulator", "user": {"token": self.token}}],
            "contexts": [
                {
                    "name": "sky-emulator",
                    "context": {"cluster": "sky-emulator", "user": "sky-emulator", "namespace": namespace},
                }
            ],
            "current-context": "sky-emulator",
        }

    def write_kubeconfig(self, path: str | Path, *, namespace: str = "default") -> Path:
        """Write :meth:`kubeconfig` to ``path`` (mode 0600) and return the path."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(yaml.safe_dump(self.kubeconfig(namespace=namespace), sort_keys=False))
        target.chmod(0o600)
        return target

    # ------------------------------------------------------------------------------------------
    # lifecycle

    async def start_async(self) -> Emulator:
        """Serve from the running event loop (returns once the socket accepts connections)."""
        if self._http.running:
            raise RuntimeError("the emulator is already running")
        install_log_filter()
        await self._http.start()
        self._loop = asyncio.get_running_loop()
        return self

    async def stop_async(self) -> None:
        """End all watches, stop accepting connections and wait for the server to finish."""
        if not self._http.running:
            return
        self.store.end_watches()
        await self._http.stop()

    async def __aenter__(self) -> Emulator:
        return await self.start_async()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop_async()

    def start(self) -> Emulator:
        """Serve from a background thread with its own event loop (for blocking callers)."""
        if self._thread is not None:
            raise RuntimeError("the emulator is already running")
        started = threading.Event()
        failure: list[BaseException] = []
        loop = asyncio.new_event_loop()

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.start_async())
            except BaseException as exc:
                failure.append(exc)
                started.set()
                loop.close()
                return
            started.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        thread = threading.Thread(target=run, name="sky-emulator", daemon=True)
        thread.start()
        started.wait()
        if failure:
            thread.join()
            raise failure[0]
        self._thread = thread
        return self

    def stop(self) -> None:
        """Stop a server started with :meth:`start` (idempotent)."""
        thread, loop = self._thread, self._loop
        if thread is None or loop is None:
            return
        future = asyncio.run_coroutine_threadsafe(self.stop_async(), loop)
        try:
            future.result(timeout=10)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _drop_watches(self, resource: str | None, abort: bool) -> int:
        if resource is None:
            return self.store.end_watches(None, abort=abort)
        keys = {rt.key for rt in self.store.types() if resource in (rt.plural, rt.key)}
        return sum(self.store.end_watches(k, abort=abort) for k in keys)

    # ------------------------------------------------------------------------------------------
    # Python API (thread-safe, no faults, same semantics as HTTP)

    @property
    def resource_version(self) -> int:
        """The current value of the global resourceVersion counter."""
        return self.store.resource_version

    def resource(self, api_version: str, kind_or_plural: str) -> ResourceType:
        return self.store.resolve(api_version, kind_or_plural)

    def _of(self, obj: Any) -> ResourceType:
        if not isinstance(obj, dict) or not obj.get("apiVersion") or not obj.get("kind"):
            raise errors.bad_request("an object needs apiVersion and kind")
        return self.store.resolve(obj["apiVersion"], obj["kind"])

    def create(
        self,
        obj: Obj,
        *,
        namespace: str | None = None,
        with_status: bool = False,
        field_validation: str = "Strict",
    ) -> Obj:
        """Create ``obj`` (its ``apiVersion``/``kind`` pick the resource). ``with_status`` keeps the
        given ``status`` (HTTP create resets it for pods and custom resources with a status
        subresource); unknown fields are rejected unless ``field_validation`` says otherwise."""
        rt = self._of(obj)
        ns = namespace or _meta(obj).get("namespace") or ("default" if rt.namespaced else None)
        stored = self.store.create(rt, ns, obj, field_validation=field_validation, with_status=with_status)
        result: Obj = deep_copy(stored)
        return result

    async def create_admitted(
        self, obj: Obj, *, namespace: str | None = None, user: Mapping[str, Any] | None = None
    ) -> AdmissionResult:
        """Create ``obj`` as an HTTP POST does: through the mutating admission chain (the stored
        MutatingWebhookConfigurations, called from the running event loop), then stored.
        ``user`` is the ``userInfo`` the webhooks see (default: the emulator's admin)."""
        rt = self._of(obj)
        ns = namespace or _meta(obj).get("namespace") or ("default" if rt.namespaced else None)
        result = AdmissionResult(deep_copy(obj))
        if self.store.mutating_webhooks():
            prepared = self.store.admission_object(rt, ns, obj, field_validation="Strict")
            req = Request(rt, prepared["metadata"].get("namespace"), False, user or ADMIN_USER, {})
            result = await self.app.admission.admit_create(req, prepared)
        result.obj = deep_copy(self.store.create(rt, ns, result.obj, field_validation="Strict"))
        return result

    def map_service(self, namespace: str, name: str, port: int, address: str) -> None:
        """Serve the Service ``namespace/name`` port ``port`` at ``address`` (``host:port``) for
        webhook calls: kube-apiserver would dial ``<name>.<namespace>.svc:<port>``; the emulator
        dials ``address`` and still verifies the certificate for ``<name>.<namespace>.svc``."""
        self.services.set(namespace, name, port, address)

    @property
    def admission_calls(self) -> list[CallRecord]:
        """Every webhook call the emulator made, oldest first (the last 1000)."""
        return list(self.app.admission.calls)

    def get(self, api_version: str, resource: str, name: str, namespace: str | None = None) -> Obj:
        rt = self.store.resolve(api_version, resource)
        result: Obj = deep_copy(self.store.get(rt, namespace or ("default" if rt.namespaced else None), name))
        return result

    def try_get(self, api_version: str, resource: str, name: str, namespace: str | None = None) -> Obj | None:
        try:
            return self.get(api_version, resource, name, namespace)
        except errors.ApiError as exc:
            if exc.code == 404:
                return None
            raise

    def list(
        self,
        api_version: str,
        resource: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> ObjList:
        """Objects of a resource (all namespaces unless ``namespace``), in key order."""
        rt = self.store.resolve(api_version, resource)
        selection = Selection.parse(rt, namespace, label_selector, field_selector)
        items, _, _, _ = self.store.list_objects(rt, selection)
        result: ObjList = deep_copy(items)
        return result

    def update(self, obj: Obj, *, subresource: str | None = None, field_validation: str = "Strict") -> Obj:
        """PUT semantics: 409 if ``metadata.resourceVersion`` is set and stale."""
        rt = self._of(obj)
        meta = _meta(obj)
        stored = self.store.update(
            rt,
            meta.get("namespace"),
            meta.get("name", ""),
            obj,
            subresource=subresource,
            field_validation=field_validation,
        )
        result: Obj = deep_copy(stored)
        return result

    def patch(
        self,
        api_version: str,
        resource: str,
        name: str,
        body: Any,
        *,
        namespace: str | None = None,
        patch_type: str = "merge",
        subresource: str | None = None,
    ) -> Obj:
        """``patch_type``: ``merge``, ``json`` or ``strategic`` (or a patch media type)."""
        rt = self.store.resolve(api_version, resource)
        media = _PATCH_TYPES.get(patch_type, patch_type)
        ns = namespace or ("default" if rt.namespaced else None)
        result: Obj = deep_copy(self.store.patch(rt, ns, name, media, body, subresource=subresource))
        return result

    def delete(self, api_version: str, resource: str, name: str, namespace: str | None = None) -> Obj:
        rt = self.store.resolve(api_version, resource)
        obj, _ = self.store.delete(rt, namespace or ("default" if rt.namespaced else None), name)
        result: Obj = deep_copy(obj)
        return result

    def bind(self, namespace: str, name: str, node: str, *, annotations: dict[str, str] | None = None) -> None:
        """``pods/binding`` without HTTP."""
        self.store.bind(
            namespace,
            name,
            {"metadata": {"name": name, "annotations": annotations or {}}, "target": {"kind": "Node", "name": node}},
        )

    def apply(self, obj: Obj, *, with_status: bool = True) -> Obj:
        """Create, or replace the spec of an existing object (and its status with ``with_status``)."""
        rt = self._of(obj)
        meta = _meta(obj)
        ns = meta.get("namespace") or ("default" if rt.namespaced else None)
        try:
            current = self.store.get(rt, ns, meta.get("name", ""))
        except errors.ApiError as exc:
            if exc.code != 404:
                raise
            return self.create(obj, namespace=ns, with_status=with_status)
        body = dict(obj)
        body["metadata"] = dict(meta)
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        body["metadata"]["namespace"] = ns
        stored = self.store.update(rt, ns, meta["name"], body, field_validation="Strict")
        if with_status and rt.has_status and "status" in obj:
            stored = self.store.update(rt, ns, meta["name"], {**stored, "status": obj["status"]}, subresource="status")
        result: Obj = deep_copy(stored)
        return result

    def load(self, objs: Iterable[Obj], *, with_status: bool = True) -> ObjList:
        """Apply many objects: CRDs and namespaces first, then the rest in the given order."""
        ordered = sorted(
            (o for o in objs if o),
            key=lambda o: (
                0 if o.get("kind") == "CustomResourceDefinition" else 1 if o.get("kind") == "Namespace" else 2
            ),
        )
        return [self.apply(o, with_status=with_status) for o in ordered]

    def load_yaml(self, path: str | Path, *, with_status: bool = True) -> ObjList:
        """Apply every document of a YAML file (or of every ``*.yaml``/``*.yml`` file in a directory)."""
        return self.load(read_yaml_objects(path), with_status=with_status)


def _meta(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


# libyaml's safe loader when PyYAML was built with it (the same documents, about ten times faster:
# every simulator, sandbox and emulator start parses the ~100 kB of CRDs)
_SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml_objects(path: str | Path) -> list[Obj]:
    """The objects (``dict`` documents; ``List`` kinds expanded) of a YAML file or directory."""
    p = Path(path)
    files = sorted(f for f in p.iterdir() if f.suffix in (".yaml", ".yml")) if p.is_dir() else [p]
    out: list[Obj] = []
    for f in files:
        for doc in yaml.load_all(f.read_text(), Loader=_SAFE_LOADER):
            if not isinstance(doc, dict):
                continue
            if str(doc.get("kind", "")).endswith("List") and isinstance(doc.get("items"), list):
                out.extend(i for i in doc["items"] if isinstance(i, dict))
            else:
                out.append(doc)
    return out
