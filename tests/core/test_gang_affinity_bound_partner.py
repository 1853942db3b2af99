"""A gang quota whose ``quotaAffinity`` term selects both a quota bound outside the gang and an
earlier quota of its own gang may go to either's node: the earlier one is bound first (rank
order), and then the term selects its node too.

Before, the planner judged such a quota only on the nodes of the quotas already bound (it plans
before any of the gang is bound, and glued a quota to its earlier partner only when the term
selected no bound quota at all). With the outside partner's node full, the gang was refused
with ``NoZoneFits`` ("no zone has room for any of 2×1 GPU") in every cycle, though binding the
earlier quota and then the other beside it keeps every rule. Now, when the plan on the bound
partners' nodes fails, the planner tries the plan that puts the quota beside its earlier
partner; the first plan still comes first, so a quota that fits only beside the outside partner
still goes there.

Cluster: one leaf n0–n3, 8 GPUs each; ``old`` (team=x) bound to n0 with a running pod of
``old_gpu`` GPUs. The gang ``g``: q-g-0 (team=x, ``first_gpu`` GPUs), q-g-1 (1 GPU, quotaAffinity
team=x).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests import builders as b
from tests.core.scenarios import QUEUE_ANNO, binds, cycle, make_cache

TEAM = {"team": "x"}


def _objects(old_gpu: int, first_gpu: int) -> list[dict[str, Any]]:
    objs = [*b.seed_cluster(leaves=1, per_leaf=4), b.queue("research")]
    objs.append(b.quota("old", gpu=old_gpu, hca=None, labels=TEAM, status={"phase": "QuotaBound", "nodeName": "n0"}))
    objs.append(b.pod("oldpod", quota="old", gpu=old_gpu, hca=None, node="n0", phase="Running", annotations=QUEUE_ANNO))
    affinity = {"quotaAffinity": [{"labelSelector": {"matchLabels": TEAM}}]}
    objs += [
        b.podgroup("g", min_member=2),
        b.quota("q-g-0", gpu=first_gpu, hca=1, labels=TEAM),
        b.quota("q-g-1", gpu=1, hca=1, affinity=affinity),
        b.pod("g-worker-0", group="g", quota="q-g-0", gpu=first_gpu, hca=1, index=0),
        b.pod("g-worker-1", group="g", quota="q-g-1", gpu=1, hca=1, index=1),
    ]
    return objs


def test_a_gang_quota_goes_beside_its_earlier_partner_when_the_bound_one_is_full() -> None:
    placed = binds(cycle(make_cache(_objects(old_gpu=8, first_gpu=1))))
    assert set(placed) == {"q-g-0", "q-g-1"}, placed
    assert placed["q-g-0"] == placed["q-g-1"] != "n0"


@pytest.mark.parametrize("old_gpu", [4, 7])
def test_a_gang_quota_still_goes_beside_the_bound_partner_when_its_own_does_not_take_it(old_gpu: int) -> None:
    """q-g-0 takes a whole node (8 GPUs): beside it there is no room for q-g-1, beside ``old`` on
    n0 there is (4 or 1 GPUs left) — the plan on the bound partners' nodes, as before."""
    placed = binds(cycle(make_cache(_objects(old_gpu=old_gpu, first_gpu=8))))
    assert placed.get("q-g-1") == "n0", placed
    assert placed.get("q-g-0") not in (None, "n0"), placed
