"""The QN stages compose freely (issue 16 item 1) — also for what a waiting gang holds: the memo
judges a node for a quota shape once (``fitmemo.py``) and treats a refusal *only* for want of
room as "eligible, room counted apart". Under ``and(...)`` the first refusal ends the judgement,
so a room refusal listed first must not hide a refusal that follows it (a taint): the node would
count as one the gang can use once it empties, and a hold could be taken on it.

The cluster of ``test_holds``: leaf s1 = n0–n3, s2 = n4–n5, 8 GPUs each; one-pod jobs fill n0,
n4 and half of n5; the gang ``big`` of four whole-node workers waits. n0 is tainted here: s1 can
never hold the gang (three usable nodes), so the hold covers n1–n3 and n4, the node whose job
ends first. Whatever the order of the ``qn.predicate`` participants, the hold and what follows
are the same: when n4's job ends, a single 8-GPU job is kept off n4 and the gang runs on n1–n4.
"""

from __future__ import annotations

import pytest
import yaml

from extender.conf import default_policy_text, load_policy_text
from extender.framework.policy import Policy
from extender.scheduler import Scheduler
from tests.core.test_holds import Cluster

TAINT = [{"key": "maintenance", "value": "true", "effect": "NoSchedule"}]
ORDERS = [
    "joint(predicates, quotapredicates, quotaaffinity, storage)",
    "and(predicates, quotapredicates, quotaaffinity, storage)",
    "and(quotapredicates, predicates, quotaaffinity, storage)",
    "and(quotapredicates, quotaaffinity, storage, predicates)",
]


def policy(qn_predicate: str) -> Policy:
    doc = yaml.safe_load(default_policy_text())
    doc["plugins"]["topology"]["reserve_after_cycles"] = 1
    doc["stages"]["qn.predicate"] = qn_predicate
    return load_policy_text(yaml.safe_dump(doc), f"default policy with qn.predicate {qn_predicate}")


@pytest.mark.parametrize("qn_predicate", ORDERS)
def test_a_gang_holds_only_nodes_it_could_use_whatever_the_order_of_the_predicates(qn_predicate: str) -> None:
    c = Cluster(reserve_after_cycles=1)
    c.scheduler = Scheduler(policy(qn_predicate))
    c.replace_node("n0", taints=TAINT)
    for _ in range(3):
        c.cycle()
    assert c.holds() == {"default/big": ("n1", "n2", "n3", "n4")}
    c.finish("n4")
    c.submit_single("solo")
    c.cycle()
    assert c.node_of("q-solo") == ""  # n4 is held for the gang
    assert sorted(c.node_of(f"q-big-{i}") for i in range(4)) == ["n1", "n2", "n3", "n4"]
