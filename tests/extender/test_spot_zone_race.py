"""A spot job that requests RDMA stays in one zone although kube-scheduler binds asynchronously
(issue 16 item 5, research note §2.5): a sibling may be filtered before the extender hears the
first pod's bind, and the cache may change in between (another pod bound elsewhere). The zone the
first pod was let into is remembered for the job, and its siblings are held to it while it still
holds them."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from extender import wellknown
from extender.conf import default_policy
from extender.state import SPOT_ZONE_SECONDS, ServiceState
from tests import builders as b
from tests.extender.wire import JSON, NOW, RecordingWriter, args, binding, cache_of, served, state_of

Obj = dict[str, Any]
LEAVES = ["s1", "s1", "s1", "s2", "s2", "s2", "s2"]  # s1: n0–n2, s2: n3–n6
NAMES = [f"n{i}" for i in range(len(LEAVES))]

pytestmark = pytest.mark.anyio


def spot(name: str, group: str, node: str | None = None) -> Obj:
    return b.pod(
        name,
        group=group,
        gpu=8,
        hca=1,
        node=node,
        phase="Running" if node else "Pending",
        extra={wellknown.RESOURCE_SPOT_GPU: "8"},
    )


def cluster() -> tuple[list[Obj], Obj, Obj]:
    objs: list[Obj] = [b.queue("research"), b.podgroup("sp", min_member=1), b.podgroup("other", min_member=1)]
    for name, leaf in zip(NAMES, LEAVES, strict=True):
        objs += [b.node(name, extra_allocatable={wellknown.RESOURCE_SPOT_GPU: "8"}), b.topology(name, [leaf])]
    first, second = spot("sp-0", "sp"), spot("sp-1", "sp")
    return [*objs, first, second], first, second


async def passed(client: httpx.AsyncClient, pod: Obj) -> list[str]:
    """The nodes the extender's filter verb passes, asked over HTTP as kube-scheduler asks it."""
    answer = await client.post("/filter", content=args(pod, NAMES), headers=JSON)
    reply = answer.json()
    assert answer.status_code == 200 and not reply["Error"], reply
    return list(reply["NodeNames"])


@pytest.mark.parametrize(
    ("stolen", "zone", "first_binds"), [(["n3", "n4"], NAMES[:3], True), (["n0", "n1"], NAMES[3:], False)]
)
async def test_a_sibling_filtered_before_the_first_bind_goes_to_the_first_pod_s_zone(
    stolen: list[str], zone: list[str], first_binds: bool
) -> None:
    """The first pod of a 2-pod job is let into s1 (room 3, the best fit over s2's 4). Before its
    bind reaches the extender, another job's pods start on two nodes. On s2 (``n3``, ``n4``): s2's
    room drops to 2 and would now be the best fit, but s1 still holds the job, so the sibling
    goes to s1 too and the first pod's bind (re-checked) is not refused. On s1 (``n0``, ``n1``):
    s1 keeps room for one pod only — the first one — and the sibling goes where the whole job
    fits again, s2; the first pod's bind is refused, and kube-scheduler retries it there, rather
    than split the job."""
    objs, first, second = cluster()
    cache = cache_of(objs)
    async with served(state_of(cache, writer=RecordingWriter(cache))) as client:
        assert await passed(client, first) == NAMES[:3]
        for i, node in enumerate(stolen):
            cache.on_podgroup_add(b.podgroup(f"other-{i}", min_member=1))
            cache.on_pod_add(spot(f"other-{i}", f"other-{i}", node=node))
        assert await passed(client, second) == zone
        error = (await client.post("/bind", content=binding(first, "n2"), headers=JSON)).json()["Error"]
    assert (error == "") is first_binds, error


async def test_the_remembered_zone_is_forgotten_after_spot_zone_seconds() -> None:
    """A job whose first pod was let in but never bound (deleted, refused elsewhere) is not held
    to that zone for ever: after ``SPOT_ZONE_SECONDS`` the best fit decides again."""
    objs, first, second = cluster()
    cache = cache_of(objs)
    now = [NOW]
    async with served(ServiceState(cache=cache, policy=default_policy(), clock=lambda: now[0])) as client:
        assert await passed(client, first) == NAMES[:3]
        for i, node in enumerate(["n3", "n4"]):
            cache.on_podgroup_add(b.podgroup(f"other-{i}", min_member=1))
            cache.on_pod_add(spot(f"other-{i}", f"other-{i}", node=node))
        assert await passed(client, second) == NAMES[:3]
        now[0] += SPOT_ZONE_SECONDS + 1
        assert await passed(client, second) == NAMES[5:]


async def test_a_spot_pod_s_refusals_are_unresolvable_for_it_never_preempts() -> None:
    """Over HTTP, as kube-scheduler calls the filter verb. It runs a preemption dry run over
    ``FailedNodes`` (research note §2.6), and ``reclaim`` refuses every spot preemptor: so no node
    refused a spot pod — by its zone here, the TN topology stage — goes there, each in
    ``FailedAndUnresolvableNodes`` with its reason. (Asked of s2's nodes only: s1 is the best fit,
    so no candidate passes and the reply lists them all.)"""
    objs, first, _ = cluster()
    cache = cache_of(objs)
    async with served(state_of(cache, writer=RecordingWriter(cache))) as client:
        answer = await client.post("/filter", content=args(first, NAMES[3:]), headers=JSON)
    assert answer.status_code == 200
    reply = answer.json()
    assert reply["NodeNames"] == []
    assert reply["FailedNodes"] == {}
    assert sorted(reply["FailedAndUnresolvableNodes"]) == NAMES[3:]
