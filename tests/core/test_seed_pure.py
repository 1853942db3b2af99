"""The seed's 8-node example through the real conversion, cache and scheduler (no HTTP)."""

from __future__ import annotations

from extender.cache.cache import ClusterCache
from extender.conf import default_policy
from extender.scheduler import Scheduler
from tests import builders as b


def test_seed_example_binds_q_train_0_to_3_on_n0_to_n3_in_order() -> None:
    cache = ClusterCache(clock=lambda: 1_000_000.0)
    b.feed(cache, b.seed_cluster() + b.training_job("train", 4, quota_prefix="q-train"))
    sched = Scheduler(default_policy())
    result = sched.run_once(cache.snapshot())
    bound = {name: q.node_name for name, q in result.quotas.items()}
    assert bound == {"q-train-0": "n0", "q-train-1": "n1", "q-train-2": "n2", "q-train-3": "n3"}
