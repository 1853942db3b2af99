"""``allocate_job`` re-validates claims that were valid once (issue 5 §2): a quota that shrinks
under its claims, a quota moved to another queue. Placed tasks are facts and keep their claim;
pending ones move, and are re-assigned in the same cycle when there is room elsewhere."""

from __future__ import annotations

import pytest

from tests import builders as b
from tests.hop1.harness import QUOTA, QUOTA_NODE, REASON, annos, hop1_cluster, new_pod, over_claimed

pytestmark = pytest.mark.anyio


async def test_shrunk_quota_keeps_its_placed_claim_and_moves_the_pending_one() -> None:
    bound = {"phase": "QuotaBound", "nodeName": "n0"}
    objs = [*b.seed_cluster(), b.quota("q", gpu=2, hca=None, status=bound), b.quota("spare", gpu=1, hca=None)]
    async with hop1_cluster(objs=objs) as h:
        # the pending claim is the older one: age alone would keep it
        h.emulator.create(new_pod("pending", gpu=1, hca=None, quota="q"))
        running = new_pod("running", gpu=1, hca=None, quota="q", node="n0")
        running["status"] = {"phase": "Running"}
        h.emulator.create(running, with_status=True)
        await h.settle()
        await h.cycles_until_quiet()
        assert annos(h.pod("pending"))[QUOTA] == "q"
        assert annos(h.pod("pending"))[QUOTA_NODE] == "n0"

        h.apply([b.quota("q", gpu=1, hca=None, status=bound)])  # the admin shrinks it
        await h.settle()
        await h.cycle()
        assert over_claimed(h.pods(), h.quotas()) == {}
        assert annos(h.pod("running"))[QUOTA] == "q"
        moved = annos(h.pod("pending"))
        assert moved[QUOTA] == "spare", moved
        assert REASON not in moved
        # its old quota's node is no longer announced; the new quota is not bound yet
        assert QUOTA_NODE not in moved or moved[QUOTA_NODE] == h.quota("spare")["status"].get("nodeName")
        await h.cycles_until_quiet()
        assert [t["name"] for t in h.quota("q")["status"]["tasks"]] == ["running"]
        assert [t["name"] for t in h.quota("spare")["status"]["tasks"]] == ["pending"]
        assert annos(h.pod("pending"))[QUOTA_NODE] == h.quota("spare")["status"]["nodeName"]


async def test_claim_on_a_quota_moved_to_another_queue_is_reassigned_in_its_own_queue() -> None:
    objs = [*b.seed_cluster(), b.quota("q-a", gpu=1, hca=None), b.quota("q-b", gpu=1, hca=None)]
    async with hop1_cluster(objs=objs) as h:
        await h.admit(new_pod("w", gpu=1, hca=None, annotations={"scheduling.infini-ai.com/queue-name": "research"}))
        first = annos(h.pod("w"))[QUOTA]
        other = "q-b" if first == "q-a" else "q-a"
        await h.cycles_until_quiet()
        h.apply([b.quota(first, queue="elsewhere", gpu=1, hca=None)])
        await h.settle()
        await h.cycles_until_quiet()
        assert annos(h.pod("w"))[QUOTA] == other
        assert not h.quota(first)["status"].get("tasks")


async def test_no_room_left_for_the_loser_it_waits_with_a_reason_and_gets_the_next_free_place() -> None:
    bound = {"phase": "QuotaBound", "nodeName": "n0"}
    objs = [*b.seed_cluster(), b.quota("q", gpu=2, hca=None, status=bound), b.quota("later", gpu=1, hca=None)]
    async with hop1_cluster(objs=objs) as h:
        h.apply([b.quota("later", queue="elsewhere", gpu=1, hca=None)])  # not for us, yet
        h.emulator.create(new_pod("p1", gpu=1, hca=None, quota="q"))
        h.emulator.create(new_pod("p2", gpu=1, hca=None, quota="q"))
        await h.settle()
        await h.cycles_until_quiet()
        h.apply([b.quota("q", gpu=1, hca=None, status=bound)])
        await h.settle()
        await h.cycles_until_quiet()
        holders = [n for n in ("p1", "p2") if annos(h.pod(n)).get(QUOTA) == "q"]
        assert len(holders) == 1
        [loser] = [n for n in ("p1", "p2") if n not in holders]
        anns = annos(h.pod(loser))
        assert QUOTA not in anns and QUOTA_NODE not in anns
        assert anns[REASON].startswith("InsufficientQuota(quota q is over-claimed"), anns[REASON]
        # room appears in the queue: the loop gives it to the loser and clears the reason
        h.apply([b.quota("later", gpu=1, hca=None)])
        await h.settle()
        await h.cycles_until_quiet()
        anns = annos(h.pod(loser))
        assert anns[QUOTA] == "later" and REASON not in anns
