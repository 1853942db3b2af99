"""Quota pools: a Queue's ``spec.quotaPools`` turned into the Quota objects it asks for (pure).

For each pool ``{name, count, request, nodeSelector, tolerations}`` of queue ``Q``, the leader
keeps exactly ``count`` Quota objects named ``Q-<pool>-<i>`` (``i`` = 0 … count−1), labelled
``scheduling.infini-ai.com/queue: Q`` and ``scheduling.infini-ai.com/quota-pool: <pool>``:

* a missing one is created (unless a quota of that name exists that is not the pool's: it is
  never taken over; the pool's status says so);
* a pool quota whose spec differs from the pool's is brought to it, only while no task claims
  it and it is not bound (a claimed or bound quota keeps its spec until it is free);
* a surplus one (index ≥ count, or a name outside the pattern) is deleted only once no task
  claims it, it is not bound to a node and no reservation holds it — highest index first;
  the delete carries the quota's uid and resourceVersion, so a claim or binding that lands in
  between makes it fail instead of losing the claim.

Only pools declared in the spec are managed: quotas labelled with another pool (e.g. made by
``sky-scheduler quotas create``) are left alone until a pool of that name is declared (then
they are adopted). The same :func:`pool_quota` builds the objects the CLI prints or applies.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from extender import wellknown
from extender.model.capacity import unholdable
from extender.model.quota import QuotaInfo
from extender.model.resources import Resource

__all__ = ["LABEL_POOL", "LABEL_QUEUE", "PoolPlan", "PoolSpec", "plan_pool", "pool_quota", "pools_of"]

LABEL_QUEUE: Final = wellknown.PREFIX + "queue"
LABEL_POOL: Final = wellknown.PREFIX + "quota-pool"

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class PoolSpec:
    queue: str
    name: str
    count: int
    request: Mapping[str, str]
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: Sequence[Mapping[str, Any]] = ()

    def quota_name(self, index: int) -> str:
        return f"{self.queue}-{self.name}-{index}"

    def index_of(self, quota_name: str) -> int | None:
        """The pool index a quota name carries, or None when it is not ``<queue>-<pool>-<i>``."""
        m = re.fullmatch(re.escape(f"{self.queue}-{self.name}-") + r"(0|[1-9][0-9]*)", quota_name)
        return int(m.group(1)) if m else None


def pools_of(queue: Mapping[str, Any]) -> list[PoolSpec]:
    """The pools a Queue object declares (entries the CRD schema would refuse are skipped)."""
    name = str((queue.get("metadata") or {}).get("name") or "")
    out = []
    for p in (queue.get("spec") or {}).get("quotaPools") or ():
        if not isinstance(p, Mapping) or not p.get("name") or not isinstance(p.get("count"), int):
            continue
        request = p.get("request")
        if not isinstance(request, Mapping) or not request:
            continue
        out.append(
            PoolSpec(
                queue=name,
                name=str(p["name"]),
                count=max(0, int(p["count"])),
                request={str(k): str(v) for k, v in request.items()},
                node_selector={str(k): str(v) for k, v in (p.get("nodeSelector") or {}).items()},
                tolerations=tuple(dict(t) for t in p.get("tolerations") or () if isinstance(t, Mapping)),
            )
        )
    return out


def pool_quota(pool: PoolSpec, index: int) -> Obj:
    """The Quota object of ``pool`` at ``index`` (what the leader creates, the CLI prints)."""
    spec: Obj = {"queueName": pool.queue, "request": dict(pool.request)}
    if pool.node_selector:
        spec["nodeSelector"] = dict(pool.node_selector)
    if pool.tolerations:
        spec["tolerations"] = [dict(t) for t in pool.tolerations]
    return {
        "apiVersion": wellknown.API_VERSION,
        "kind": wellknown.KIND_QUOTA,
        "metadata": {"name": pool.quota_name(index), "labels": {LABEL_QUEUE: pool.queue, LABEL_POOL: pool.name}},
        "spec": spec,
    }


@dataclass(slots=True)
class PoolPlan:
    create: list[Obj] = field(default_factory=list)
    update: list[Obj] = field(default_factory=list)  # desired objects of unclaimed, unbound drifted members
    delete: list[tuple[str, str, str]] = field(default_factory=list)  # (name, uid, resourceVersion)
    status: Obj = field(default_factory=dict)  # the pool's entry of Queue status.quotaPools


def _free(q: QuotaInfo | None, now: float) -> bool:
    return q is not None and not q.claims and not q.node_name and all(r.expired(now) for r in q.reserved)


def plan_pool(
    pool: PoolSpec,
    quota_objs: Mapping[str, Mapping[str, Any]],
    quotas: Mapping[str, QuotaInfo],
    largest: dict[str, int],
    now: float,
) -> PoolPlan:
    """What to create, update and delete so that ``pool`` holds exactly ``count`` quotas, and
    its status entry. ``quota_objs``: every Quota object by name; ``quotas``: their cache view;
    ``largest``: the largest allocatable per resource (:func:`~extender.model.capacity.largest_allocatable`)."""
    plan = PoolPlan()
    members: dict[str, Mapping[str, Any]] = {}
    for name, obj in quota_objs.items():
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if labels.get(LABEL_QUEUE) == pool.queue and labels.get(LABEL_POOL) == pool.name:
            members[name] = obj
    taken: list[str] = []
    for i in range(pool.count):
        want = pool_quota(pool, i)
        name = want["metadata"]["name"]
        member = members.get(name)
        if member is None:
            if name in quota_objs:
                taken.append(name)  # someone else's quota: never taken over
            else:
                plan.create.append(want)
        elif member.get("spec") != want["spec"] and _free(quotas.get(name), now):
            plan.update.append(want)
    surplus = [n for n in members if (idx := pool.index_of(n)) is None or idx >= pool.count]
    surplus.sort(key=lambda n: (-(pool.index_of(n) or 0), n))
    for name in surplus:
        if _free(quotas.get(name), now):
            meta = members[name].get("metadata") or {}
            plan.delete.append((name, str(meta.get("uid") or ""), str(meta.get("resourceVersion") or "")))
    views = [q for q in (quotas.get(n) for n in members) if q is not None]
    status: Obj = {
        "name": pool.name,
        "count": pool.count,
        "present": len(members),
        "bound": sum(1 for q in views if q.node_name),
        "claimed": sum(1 for q in views if q.claims),
    }
    try:
        why = unholdable(Resource.from_list(dict(pool.request)), largest)
    except ValueError as exc:  # the CRD's quantity pattern refuses these; an old object may not
        why = f"request: {exc}"
    if why:
        status["unholdable"] = why
    if taken:
        status["message"] = f"names taken by quotas that are not the pool's: {', '.join(taken)}"
    plan.status = status
    return plan
