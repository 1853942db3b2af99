"""The lean filter reply gives kube-scheduler the same answers as the full reply it replaced.

kube-scheduler (``pkg/scheduler/schedule_one.go``, ``findNodesThatPassExtenders`` and
``schedulePod``) takes the passing nodes from ``NodeNames`` (or ``Nodes.items``), copies the two
failure maps into the cycle's ``NodeToStatus`` (``FailedAndUnresolvableNodes`` winning over
``FailedNodes``), and reads those statuses only when no node passes: for the ``FailedScheduling``
event and for preemption. :func:`scheduler_view` computes exactly that from a reply; the test
sends recorded requests (the research note's sample and variants of every situation of the
filter table in docs/extender.md, in both forms) through the real ``/filter`` handler and
through the previous serialiser (``tests/extender/legacy_reply.py``) over the same decision, and
compares what kube-scheduler would make of each.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.api import extender as api
from extender.api import wire
from extender.cache.cache import ClusterCache
from tests import builders as b
from tests.extender import legacy_reply
from tests.extender.test_wire import NODES, _cluster, _sample_pod
from tests.extender.test_wire_paths import INLINE_NODES, SPOT_NODES, _inline_cluster, _solo, _spot_cluster, _spot_pod
from tests.extender.wire import args, args_full, cache_of, state_of

Obj = dict[str, Any]
pytestmark = pytest.mark.anyio

# names whose JSON text holds '",' followed by a quote: the splicing serialiser cut a name there
AWKWARD = ['a",', '",', 'x\\",', 'p"', "q,", ",", '"', "\\", 'ü,"', ""]


def scheduler_view(reply: bytes, candidates: list[str]) -> tuple[list[str], dict[str, tuple[str, str]] | None]:
    """(the nodes kube-scheduler keeps, the statuses it reads — only when it keeps none)."""
    doc = json.loads(reply)  # strict JSON, as Go's decoder
    assert doc["Error"] == ""
    if doc["NodeNames"] is not None:
        kept = [n for n in doc["NodeNames"] if n in set(candidates)]
        assert kept == doc["NodeNames"], "a node that was not a candidate"  # an error in kube-scheduler
    else:
        kept = [i["metadata"]["name"] for i in (doc["Nodes"] or {}).get("items") or []]
    if kept:
        return kept, None
    statuses = {n: ("UnschedulableAndUnresolvable", m) for n, m in doc["FailedAndUnresolvableNodes"].items()}
    for n, m in doc["FailedNodes"].items():
        statuses.setdefault(n, ("Unschedulable", m))
    return kept, statuses


def _legacy(state: Any, body: bytes) -> bytes:
    verbs = api.Verbs(state)
    pod, names, node_list = wire.extender_args(body)
    outcome, rest = verbs._decide(pod, names)
    return legacy_reply.filter_reply(outcome, rest, names, node_list)


def _bodies(pod: Obj, cache: ClusterCache, name_lists: list[list[str]]) -> list[tuple[bytes, list[str]]]:
    out = []
    for names in name_lists:
        out.append((args(pod, names), names))
        objs = [cache.node_object(n) or {"metadata": {"name": n}} for n in names]
        out.append((args_full(pod, objs), names))
    return out


def _sample_cluster() -> ClusterCache:
    c = cache_of(_cluster())
    pod = _sample_pod()
    pod.setdefault("status", {"phase": "Pending"})
    c.on_pod_add(pod)
    return c


def _unbound(c: ClusterCache) -> None:
    q = b.quota("q-llama-sft-1", gpu=8, hca=8)
    q["metadata"]["resourceVersion"] = "99"
    c.on_quota_update(q, q)


def _spot_on_quota_node(c: ClusterCache) -> None:
    for i in range(2):
        c.on_pod_add(
            b.pod(
                f"spot-{i}",
                namespace="batch",
                gpu=4,
                hca=None,
                extra={"scheduling.infini-ai.com/spot-gpu": "4"},
                node="gpu-n01",
                phase="Running",
                uid=f"c3d4e5f6-0000-4000-8000-00000000a00{i + 1}",
            )
        )


def _bind_in_flight(c: ClusterCache) -> None:
    c.assume(_sample_pod()["metadata"]["uid"], "gpu-n01")


SAMPLE_NAMES = [NODES, [n for n in NODES if n != "gpu-n01"], ["gpu-n01"], [], ["gpu-n01", "gpu-n02", "gpu-n01"]]

# (what is set up, the pod as the request carries it, the candidate lists)
Situation = tuple[Callable[[ClusterCache], None] | None, Callable[[Obj], Obj] | None]
SITUATIONS: dict[str, Situation] = {
    "quota bound to a candidate": (None, None),
    "quota not bound": (_unbound, None),
    "quota node short only of spot pods": (_spot_on_quota_node, None),
    "bind in flight": (_bind_in_flight, None),
    "another scheduler's pod": (None, lambda p: {**p, "spec": {**p["spec"], "schedulerName": "default-scheduler"}}),
    "unknown pod": (None, lambda p: {**p, "metadata": {**p["metadata"], "uid": "not-in-the-cache"}}),
}


@pytest.mark.parametrize("situation", list(SITUATIONS))
async def test_the_lean_reply_gives_kube_scheduler_the_same_answers(situation: str) -> None:
    setup, edit = SITUATIONS[situation]
    cache = _sample_cluster()
    if setup is not None:
        setup(cache)
    pod = _sample_pod()
    if edit is not None:
        pod = edit(pod)
    state = state_of(cache)
    verbs = api.Verbs(state)
    compared = 0
    for body, names in _bodies(pod, cache, SAMPLE_NAMES):
        new, old = await verbs.filter(body), _legacy(state, body)
        assert scheduler_view(new, names) == scheduler_view(old, names), (situation, names)
        kept, _ = scheduler_view(new, names)
        if kept:  # a node passes: only it, and no reasons at all
            doc = orjson.loads(new)
            assert doc["FailedNodes"] == doc["FailedAndUnresolvableNodes"] == {}
        compared += 1
    assert compared == 2 * len(SAMPLE_NAMES)


async def test_the_unsynced_cache_answers_the_same() -> None:
    cache = _sample_cluster()
    state = state_of(cache, synced=lambda: False)
    for body, names in _bodies(_sample_pod(), cache, SAMPLE_NAMES):
        new, old = await api.Verbs(state).filter(body), _legacy(state, body)
        view = scheduler_view(new, names)
        assert view == scheduler_view(old, names)
        assert view[1] is not None and all(m.startswith("CacheNotSynced(") for _, m in view[1].values())


@pytest.mark.parametrize(
    ("objs", "pod", "name_lists"),
    [
        (
            [*_inline_cluster(), _solo()],
            None,
            [INLINE_NODES, ["n2", "n3", "gone"], ["n2"], ["n0"], ["n3", "n0", "n2"]],
        ),
        ([*_spot_cluster(), _spot_pod("spot", 2)], _spot_pod("spot", 2), [SPOT_NODES, SPOT_NODES[2:], ["s1", "s4"]]),
        (
            [*_spot_cluster(), _spot_pod("big", 3, "shared")],
            _spot_pod("big", 3, "shared"),
            [["s0", "s1"], ["s0"]],
        ),
    ],
    ids=["inline", "spot", "spot-shared"],
)
async def test_inline_and_spot_paths_give_the_same_answers(
    objs: list[Obj], pod: Obj | None, name_lists: list[list[str]]
) -> None:
    cache = cache_of(objs)
    if pod is None:  # the inline pod as the cache stored it (its UID)
        found = cache.pod_by_name("default", "solo")
        assert found is not None
        pod = dict(found)
    else:
        pod = dict(cache.pod_by_name(pod["metadata"]["namespace"], pod["metadata"]["name"]) or pod)
    state = state_of(cache)
    failed_somewhere = False
    for body, names in _bodies(pod, cache, name_lists):
        new, old = await api.Verbs(state).filter(body), _legacy(state, body)
        assert scheduler_view(new, names) == scheduler_view(old, names), names
        failed_somewhere |= bool(orjson.loads(new)["FailedNodes"])
    assert failed_somewhere or pod["metadata"]["name"] != "solo"  # the inline case reaches FailedNodes


@pytest.mark.parametrize("awkward", AWKWARD)
async def test_awkward_node_names_give_strict_json(awkward: str) -> None:
    """A name ending in ``",`` made the spliced reply invalid JSON; orjson over plain data cannot."""
    cache = _sample_cluster()
    verbs = api.Verbs(state_of(cache))
    failing = [awkward, "gpu-n02", awkward + "x"]
    body = args(_sample_pod(), failing)
    reply = json.loads(await verbs.filter(body))
    message = "QuotaBoundElsewhere(quota q-llama-sft-1 is bound to gpu-n01)"
    assert reply["NodeNames"] == []
    assert reply["FailedAndUnresolvableNodes"] == dict.fromkeys(failing, message)
    # and a passing awkward name comes back exactly (another scheduler's pod: every candidate passes)
    other = _sample_pod()
    other["spec"]["schedulerName"] = "default-scheduler"
    assert json.loads(await verbs.filter(args(other, failing)))["NodeNames"] == failing


def test_the_spliced_reply_broke_on_a_name_ending_in_a_quote_and_comma() -> None:
    """The defect the lean reply removes, shown on the previous serialiser: the test above can fail."""
    cache = _sample_cluster()
    state = state_of(cache)
    with pytest.raises(json.JSONDecodeError):
        json.loads(_legacy(state, args(_sample_pod(), ['a",', "gpu-n02"])))


@settings(max_examples=150, deadline=None)
@given(names=st.lists(st.sampled_from([*AWKWARD, "gpu-n01", "gpu-n02", "gpu-n03"]) | st.text(max_size=6), max_size=8))
def test_any_candidate_list_answers_strict_json_with_the_right_view(names: list[str]) -> None:
    import asyncio

    cache = _sample_cluster()
    verbs = api.Verbs(state_of(cache))
    reply = asyncio.run(verbs.filter(args(_sample_pod(), names)))
    kept, statuses = scheduler_view(reply, names)
    if "gpu-n01" in names:
        assert (kept, statuses) == (["gpu-n01"], None)
        assert orjson.loads(reply)["FailedAndUnresolvableNodes"] == {}
    else:
        message = "QuotaBoundElsewhere(quota q-llama-sft-1 is bound to gpu-n01)"
        assert kept == [] and statuses == dict.fromkeys(names, ("UnschedulableAndUnresolvable", message))
