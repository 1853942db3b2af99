"""The webhook's score-first search picks exactly what ``place`` over all candidates picks."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from extender import wellknown
from extender.cache import convert
from extender.cache.cache import ClusterCache
from extender.framework.pipeline import place
from extender.framework.session import Session
from tests import builders as b
from tests.webhooks import helpers as h
from webhooks.overlay import overlay_snapshot
from webhooks.search import search

NS = "ml"
TEAM_A = {"podAffinity": {"podSelector": {"matchLabels": {"team": "a"}}}}


@st.composite
def worlds(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    objs: list[dict[str, Any]] = [b.node(f"N{i}") for i in range(4)]
    objs.append(b.podgroup("j", namespace=NS, queue="research"))
    n = draw(st.integers(1, 8))
    for i in range(n):
        gpu = draw(st.sampled_from([1, 2]))
        queue = draw(st.sampled_from(["research", "research", "prod"]))
        shared = ["research"] if queue == "prod" and draw(st.booleans()) else None
        node = draw(st.one_of(st.none(), st.sampled_from(["N0", "N1", "N2", "N3"])))
        static = draw(st.one_of(st.none(), st.sampled_from(["N2", "N3"]))) if node is None else None
        reserved = draw(st.sampled_from([None, "index", "name"]))
        status: dict[str, Any] = h.bound(node) if node else {"phase": "QuotaEmpty"}
        if reserved is not None:
            status["reservedTasks"] = [
                h.reservation(
                    job=f"{NS}/j",
                    index=draw(st.integers(0, 3)) if reserved == "index" else None,
                    namespace=NS,
                    pod_name="old-pod" if reserved == "name" else "gone",
                    gpu=1,
                )
            ]
        affinity = TEAM_A if draw(st.integers(0, 4)) == 0 else None
        name = f"q-{i}"
        objs.append(
            b.quota(
                name,
                queue=queue,
                gpu=gpu,
                shared_queues=shared,
                static_bind_node=static,
                affinity=affinity,
                status=status,
            )
        )
        if draw(st.booleans()):  # a sibling already claims it
            objs.append(
                b.pod(
                    f"j-worker-{10 + i}",
                    namespace=NS,
                    group="j",
                    quota=name,
                    index=10 + i,
                    node=node,
                    phase="Running" if node else "Pending",
                )
            )
    annotations = {}
    if draw(st.booleans()):
        annotations[wellknown.ANNO_INHERIT_RESOURCE_FROM] = "old-pod"
    pod = b.pod(
        "j-worker-new",
        namespace=NS,
        group="j" if draw(st.booleans()) else None,
        gpu=draw(st.sampled_from([1, 2])),
        index=draw(st.integers(0, 3)),
        labels={"team": "a"} if draw(st.booleans()) else {},
        annotations={**annotations, wellknown.ANNO_QUEUE_NAME: "research"},
    )
    return objs, pod


@given(world=worlds())
@settings(max_examples=200, deadline=None)
def test_search_chooses_what_place_over_all_candidates_chooses(
    world: tuple[list[dict[str, Any]], dict[str, Any]],
) -> None:
    objs, pod = world
    cache = ClusterCache(clock=h.Clock())
    b.feed(cache, objs)
    task = convert.task_from_api(pod, cache.opts)
    ssn = Session(overlay_snapshot(cache.snapshot(), task, [], None, cache.opts), h.policy())
    job = ssn.job(task.job)
    assert job is not None
    candidates = list(ssn.quotas_of_queue(job.queue))
    expected = place(ssn.tq, task, candidates).choice
    got = search(ssn, task, candidates).choice
    assert (got.name if got else None) == (expected.name if expected else None)
