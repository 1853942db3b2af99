"""``JobInfo.needs_rdma`` is remembered between reads; the cache's pod events must make it
forget: a job turns topology-scheduled when an RDMA pod joins it, and back when that pod goes."""

from __future__ import annotations

from extender.cache.cache import ClusterCache
from tests import builders as b


def test_needs_rdma_follows_the_pods_the_cache_adds_and_removes() -> None:
    cache = ClusterCache(clock=lambda: 1_800_000_000.0)
    b.feed(cache, [b.queue("research"), b.podgroup("train", min_member=2), b.pod("train-0", group="train", hca=None)])
    job = cache.jobs["default/train"]
    assert not job.needs_rdma and not job.topology  # read (and remembered) before the RDMA pod
    rdma_pod = b.pod("train-1", group="train", hca=1)
    cache.on_pod_add(rdma_pod)
    job = cache.jobs["default/train"]
    assert job.needs_rdma and job.topology
    assert job.clone().needs_rdma  # a session's copy says the same
    cache.on_pod_delete(rdma_pod)
    job = cache.jobs["default/train"]
    assert not job.needs_rdma and not job.topology
