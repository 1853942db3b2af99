"""``fix_quota_binding`` — self-healing of quota placement (seed 2.6 fixQuotaBinding).

Live pods are the truth, the quota object is the abstraction. Every cycle for the quotas the
cache saw a pod of placed on another node than theirs (``Snapshot.drifted_quotas``, from pod
events: the quota ledger follows the pod at once), and for every quota once per
``min_interval_seconds`` (the full rebuild), the nodes its placed (bound or running) claimants
are on are collected (``QuotaBindingFixPlan``):

* all on one node N, and ``status.nodeName`` is not N → the quota moves to N: the old node's
  ledger gives the request back to ``quota_idle``, N's takes it (even past N's ``quota_idle``:
  the pods are there), and the status is rewritten;
* on several nodes → an error Event on the quota; it is not touched.
"""

from __future__ import annotations

from typing import Final

from pydantic import Field

from extender.framework.plugin import ArgsModel
from extender.framework.session import Session
from extender.model.task import ALIVE

NAME: Final = "fix_quota_binding"


class FixQuotaBindingArgs(ArgsModel):
    min_interval_seconds: float = Field(10.0, ge=0, description="MinFixQuotaInterval")


Args = FixQuotaBindingArgs


class Action:
    NAME: Final = NAME
    Args = FixQuotaBindingArgs

    def __init__(self, args: FixQuotaBindingArgs) -> None:
        self.args = args

    def execute(self, ssn: Session) -> None:
        full = ssn.now - ssn.snap.last_fix >= self.args.min_interval_seconds
        scattered: list[tuple[str, list[str]]] = []
        placed: dict[str, str] = {}
        claimed: set[str] = set()  # the quotas those pods claim: the only ones that can have drifted
        if full:
            ssn.notes[NAME] = {"ran": True, "scattered": scattered}
            # the pods that sit on a node, found once: most claims are of pods that do not
            for j in ssn.jobs():
                for t in j.tasks.values():
                    if t.node and t.status in ALIVE:
                        placed[t.uid] = t.node
                        if t.quota:
                            claimed.add(t.quota)
        else:
            drifted = ssn.snap.drifted_quotas
            if not drifted:
                return
            ssn.notes[NAME] = {"ran": False, "scattered": scattered}
            for q in [q for q in map(ssn.quota, sorted(drifted)) if q is not None]:
                for uid in q.claims:
                    claimant = ssn.task(uid)
                    if claimant is not None and claimant.node and claimant.status in ALIVE:
                        placed[uid] = claimant.node
                claimed.add(q.name)
        for quota in [q for q in map(ssn.quota, sorted(claimed)) if q is not None]:
            nodes = {placed[uid] for uid in quota.claims if uid in placed}
            if not nodes:
                continue
            if len(nodes) > 1:
                scattered.append((quota.name, sorted(nodes)))
                continue
            (actual,) = nodes
            if quota.node_name == actual or ssn.node(actual) is None:
                continue
            stmt = ssn.statement()
            if quota.node_name:
                stmt.release_quota(quota.name, f"its pods run on {actual}")
            stmt.allocate_quota_to_node(quota.name, actual, force=True)
            stmt.commit()
