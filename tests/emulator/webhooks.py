"""A real HTTPS admission webhook for the emulator's admission tests: records every call, answers
what the test programs (a JSON Patch, a denial, an error status, a delay, a wrong uid …)."""

from __future__ import annotations

import base64
import inspect
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from extender.servers import AppServer
from extender.simulate.certs import TLSFiles, write_self_signed

Obj = dict[str, Any]
Scope = MutableMapping[str, Any]
Answer = Callable[[Obj], Awaitable[tuple[int, Any]] | tuple[int, Any]]


@dataclass
class Call:
    path: str
    query: str
    review: Obj


def allow(review: Obj, patch: list[Obj] | None = None, **response: Any) -> Obj:
    """An AdmissionReview answer allowing the request, with ``patch`` if given."""
    out: Obj = {"uid": review["request"]["uid"], "allowed": True, **response}
    if patch:
        out["patchType"] = "JSONPatch"
        out["patch"] = base64.b64encode(orjson.dumps(patch)).decode()
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": out}


def annotate(key: str, value: str) -> Callable[[Obj], tuple[int, Obj]]:
    """A webhook that adds (or overwrites) one annotation."""

    def answer(review: Obj) -> tuple[int, Obj]:
        meta = review["request"]["object"]["metadata"]
        ops: list[Obj] = [] if "annotations" in meta else [{"op": "add", "path": "/metadata/annotations", "value": {}}]
        ops.append({"op": "add", "path": f"/metadata/annotations/{key.replace('/', '~1')}", "value": value})
        return 200, allow(review, ops)

    return answer


@dataclass
class RecordingWebhook:
    """An HTTPS server: ``routes`` maps a path to its answer; every call is kept in ``calls``."""

    directory: Path
    hosts: tuple[str, ...] = ("127.0.0.1", "hook.webhooks.svc")
    routes: dict[str, Answer] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    tls: TLSFiles | None = None
    server: AppServer | None = None

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        review = orjson.loads(body)
        self.calls.append(Call(scope["path"], scope.get("query_string", b"").decode(), review))
        answer = self.routes.get(scope["path"])
        result = (404, {"error": "no route"}) if answer is None else answer(review)
        if inspect.isawaitable(result):
            result = await result
        status, doc = result
        raw = orjson.dumps(doc)
        await send(
            {"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]}
        )
        await send({"type": "http.response.body", "body": raw})

    async def start(self) -> RecordingWebhook:
        self.tls = write_self_signed(self.directory, hosts=self.hosts)
        self.server = AppServer(self, certfile=self.tls.cert_file, keyfile=self.tls.key_file, name="test-webhook")
        await self.server.start()
        return self

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop()

    @property
    def address(self) -> str:
        assert self.server is not None
        return f"127.0.0.1:{self.server.port}"

    @property
    def ca_bundle(self) -> str:
        assert self.tls is not None
        return base64.b64encode(self.tls.ca_file.read_bytes()).decode()

    def paths(self) -> list[str]:
        return [c.path for c in self.calls]
