"""The placement table's JOBS column names every job whose pods a node's quotas hold — a quota
shared by pods of two jobs shows both (it showed whichever pod came last)."""

from __future__ import annotations

import pytest

from extender.simulate.render import render_text
from extender.simulate.runner import Simulation
from extender.simulate.scenario import Scenario

HALF = {"nvidia.com/gpu": 4, "rdma/hca": 4}

SCENARIO = {
    "name": "shared-quota",
    "leaves": [{"name": "s1", "nodes": ["n0", "n1"]}],
    "queues": [{"name": "research"}],
    "quotas": [{"name": "q-shared", "queue": "research", "request": {"nvidia.com/gpu": 8, "rdma/hca": 8}}],
    "steps": [
        {
            "title": "two one-pod jobs claim the one 8-GPU quota",
            "jobs": [
                {"name": "a", "workers": 1, "request": HALF, "quota": "q-shared"},
                {"name": "b", "workers": 1, "request": HALF, "quota": "q-shared"},
            ],
        },
    ],
}


@pytest.mark.anyio
async def test_a_node_whose_quota_two_jobs_share_lists_both_jobs() -> None:
    async with Simulation(Scenario.model_validate(SCENARIO)) as sim:
        result = await sim.run()
    placed = {k: v["nodes"] for k, v in result.jobs.items()}
    assert placed["default/a"] == placed["default/b"], placed  # both pods in the one quota's node
    node = placed["default/a"][0]
    table = render_text(result).split("placement (", 1)[1].split("\njobs\n", 1)[0]
    row = next(line.split() for line in table.splitlines() if f" {node} " in f" {line} ")
    assert row[-2:] == ["default/a", "default/b"], row
