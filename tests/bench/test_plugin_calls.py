"""bench/plugin_calls.py: one real cycle's filter and score calls, recorded and replayed.

The counts are the design's promises (issue 16 item 1): the QN filters run once per node per
quota shape, not once per quota; the TQ filters once per claim; a node is scored at most once per
shape until a bind changes it."""

from __future__ import annotations

import pytest

from bench.binder_cycle import build
from bench.plugin_calls import counts, record_cycle, replay_seconds
from extender.conf import default_policy
from extender.framework.session import Session


@pytest.mark.parametrize(("nodes", "jobs"), [(8, 2), (16, 4), (24, 6)])
def test_one_cycle_calls_the_filters_once_per_node_and_shape_and_scores_a_node_again_only_after_a_bind(
    nodes: int, jobs: int
) -> None:
    cache = build(nodes, leaves=2, jobs=jobs, workers=4)  # GPUs per worker 1, 2, 2, 1, …: two shapes
    shapes = len({q.request for q in cache.quotas.values()})
    assert shapes == 2
    bind_stage = Session._bind_stage
    ssn, calls = record_cycle(cache, default_policy())
    assert Session._bind_stage is bind_stage, "the recording hook outlived the recording"
    binds = sum(1 for q in ssn.quotas() if q.node_name)
    assert binds == len(cache.quotas)  # every gang fits: the counts below are a whole cycle's
    made = counts(calls)
    assert made["qn.select"] == made["qn.predicate"] == nodes * shapes
    assert made["tq.select"] == made["tq.predicate"] == len(cache.quotas)
    assert 0 < made["qn.node_order"] <= nodes * shapes + binds
    assert replay_seconds(ssn, calls) > 0
