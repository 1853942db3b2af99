"""What the KubeWriter tests share: a writer with fast retries, a Quota and a Pod created in the
emulator, and a status mutation that counts."""

from __future__ import annotations

import uuid
from typing import Any

from extender import wellknown
from extender.emulator import Emulator
from extender.kube.writer import KubeWriter

QUOTA_STATUS_PATH = "quotas/status"


def writer(api: Any, **kw: Any) -> KubeWriter:
    kw.setdefault("backoff", 0.001)
    kw.setdefault("backoff_max", 0.01)
    kw.setdefault("request_timeout", 2.0)
    return KubeWriter(api, **kw)


def quota(emu: Emulator, status: dict[str, Any] | None = None) -> str:
    name = f"q-{uuid.uuid4().hex[:8]}"
    body = {
        "apiVersion": wellknown.API_VERSION,
        "kind": wellknown.KIND_QUOTA,
        "metadata": {"name": name},
        "spec": {"request": {"nvidia.com/gpu": "8"}},
    }
    if status is not None:
        body["status"] = status
    emu.create(body, with_status=status is not None)
    return name


def pod(emu: Emulator, ns: str, name: str = "p") -> dict[str, Any]:
    return emu.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"containers": [{"name": "c", "image": "i"}], "schedulerName": "sky-scheduler"},
        }
    )


def bump(counter: str) -> Any:
    def mutate(q: dict[str, Any]) -> dict[str, Any]:
        status = dict(q.get("status") or {})
        status[counter] = int(status.get(counter, 0)) + 1
        return status

    return mutate
