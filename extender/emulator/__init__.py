"""An in-process Kubernetes API server emulator, served over real HTTP on 127.0.0.1.

Good enough for ``kubernetes-asyncio`` and ``kubectl`` to work against it unmodified: discovery,
OpenAPI v3 (for ``kubectl apply``), CRDs with schema validation and printer columns, list/watch
with resourceVersions, selectors and pagination, optimistic concurrency, the status subresource,
``pods/binding`` and ``pods/eviction``, plus fault injection and a request journal for tests.
See ``docs/emulator.md``.
"""

from extender.emulator.errors import ApiError
from extender.emulator.faults import Fault, Faults, Journal, RequestRecord
from extender.emulator.server import Emulator, read_yaml_objects
from extender.emulator.store import Store

__all__ = [
    "ApiError",
    "Emulator",
    "Fault",
    "Faults",
    "Journal",
    "RequestRecord",
    "Store",
    "read_yaml_objects",
]
