"""Requests no node could ever hold (extender.model.capacity)."""

from __future__ import annotations

from extender.cache.cache import ClusterCache
from extender.model.capacity import largest_allocatable, unholdable
from extender.model.resources import Resource
from tests import builders as b


def test_unholdable_names_the_resource_and_the_largest_node() -> None:
    cache = ClusterCache(clock=lambda: 1_800_000_000.0)
    b.feed(cache, [b.node("small", gpu=4, hca=0), b.node("big", gpu=8, hca=8)])
    largest = largest_allocatable(cache.nodes.values())
    fits = Resource.from_list({"nvidia.com/gpu": "8", "rdma/hca": "8"})
    assert unholdable(fits, largest) == ""  # one node holds all of it
    too_many = Resource.from_list({"nvidia.com/gpu": "16"})
    assert unholdable(too_many, largest) == "no node has more than 8 nvidia.com/gpu (asks 16)"
    absent = Resource.from_list({"example.com/fpga": "1"})
    assert unholdable(absent, largest) == "no node has any example.com/fpga (asks 1)"
    assert unholdable(too_many, {}) == ""  # no nodes known yet: nothing is claimed
