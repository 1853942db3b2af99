"""The API calls :class:`~extender.kube.writer.KubeWriter` may make — and so what the Helm chart's
RBAC must grant: data only.

This module does NOT write to the Kubernetes API (only :mod:`extender.kube.writer` does). The
writer refuses any call not declared in :data:`API_CALLS`; a test drives every writer method
against the emulator and compares the emulator's request journal with the list, and the RBAC test
compares the chart's rules with it.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from extender import wellknown
from extender.kube.bodies import COORDINATION

__all__ = ["API_CALLS", "METHOD_OF_VERB", "ApiCall"]


class ApiCall(NamedTuple):
    """One kind of API request: what an RBAC rule has to allow."""

    verb: str
    group: str
    resource: str
    subresource: str = ""


API_CALLS: Final[frozenset[ApiCall]] = frozenset(
    {
        # quota and podgroup status: read-modify-write with optimistic concurrency
        ApiCall("get", wellknown.GROUP, wellknown.QUOTAS),
        ApiCall("update", wellknown.GROUP, wellknown.QUOTAS, "status"),
        ApiCall("get", wellknown.GROUP, wellknown.PODGROUPS),
        ApiCall("update", wellknown.GROUP, wellknown.PODGROUPS, "status"),
        # queue and jobqueue status (the counts the binder leader keeps true)
        ApiCall("get", wellknown.GROUP, wellknown.QUEUES),
        ApiCall("update", wellknown.GROUP, wellknown.QUEUES, "status"),
        ApiCall("get", wellknown.GROUP, wellknown.JOBQUEUES),
        ApiCall("update", wellknown.GROUP, wellknown.JOBQUEUES, "status"),
        # quota pools (Queue spec.quotaPools) and `sky-scheduler quotas create`
        ApiCall("create", wellknown.GROUP, wellknown.QUOTAS),
        ApiCall("update", wellknown.GROUP, wellknown.QUOTAS),
        ApiCall("delete", wellknown.GROUP, wellknown.QUOTAS),
        # pods (get: the pods that went while no replica watched, read once after the sync)
        ApiCall("get", "", "pods"),
        ApiCall("create", "", "pods", "binding"),
        ApiCall("patch", "", "pods"),
        # events (created with a client-chosen name, then aggregated by patching count)
        ApiCall("create", "", "events"),
        ApiCall("patch", "", "events"),
        # RDMA topology discovery
        ApiCall("get", wellknown.GROUP, wellknown.NODETOPOLOGIES),
        ApiCall("create", wellknown.GROUP, wellknown.NODETOPOLOGIES),
        ApiCall("update", wellknown.GROUP, wellknown.NODETOPOLOGIES),
        ApiCall("update", wellknown.GROUP, wellknown.NODETOPOLOGIES, "status"),  # the agents' heartbeat
        ApiCall("patch", "", "nodes"),
        # leader election
        ApiCall("get", COORDINATION, "leases"),
        ApiCall("create", COORDINATION, "leases"),
        ApiCall("update", COORDINATION, "leases"),
    }
)
"""Every (verb, group, resource, subresource) ``KubeWriter`` uses — and nothing else."""

METHOD_OF_VERB: Final = {"get": "GET", "create": "POST", "update": "PUT", "patch": "PATCH", "delete": "DELETE"}
