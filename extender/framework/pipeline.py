"""Running one bundle's five stages for one item over candidate targets (seed 2.6, QNFns).

``pre_predicate`` once → ``select`` and ``predicate`` per target → ``node_order`` +
``batch_node_order`` scores → ``best_n``; when ``best_n`` abstains, the highest score wins and
ties go to the earlier candidate (candidates come in rank order). The same function serves TQ
(targets are quotas), QN and TN (targets are nodes).

``stop_after`` bounds how many feasible targets are looked for before scoring, like
kube-scheduler's ``percentageOfNodesToScore``; with ``rank_ordered`` set (the bundle's best_n is
decided by a rank-ordered plugin such as topology) the first feasible target in candidate order
is the answer and nothing is scored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, overload

from extender.framework.stages import BoundBundle
from extender.framework.status import SUCCESS, Reason, Status, aggregate

__all__ = ["Placement", "Prejudged", "adaptive_stop_after", "place"]


class Prejudged(Sequence[str]):
    """Candidate node names whose *first* the source has already judged for the item with the
    bundle's ``select`` and ``predicate`` stages — a gang planner judges once per node per quota
    shape, not once per quota. An action may bind there at once (the ledger still re-checks the
    room, ``NodeInfo.add_quota``) and runs the pipeline over the rest only if that bind fails:
    ``rest()`` lists the others only when they are first read."""

    __slots__ = ("_names", "_rest", "first")

    def __init__(self, first: str, rest: Callable[[], list[str]]) -> None:
        self.first = first
        self._rest = rest
        self._names: list[str] | None = None

    def _all(self) -> list[str]:
        if self._names is None:
            self._names = [self.first, *self._rest()]
        return self._names

    def __len__(self) -> int:
        return len(self._all())

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        return self._all()[i]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())


class _Named(Protocol):
    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=_Named)


@dataclass(slots=True)
class Placement(Generic[T]):
    choice: T | None
    status: Status  # SUCCESS when a choice was made, else why not (pre_predicate or aggregate)
    failures: dict[str, Status] = field(default_factory=dict)  # target name → why it was filtered
    ranked: list[tuple[T, float]] = field(default_factory=list)
    evaluated: int = 0


def adaptive_stop_after(total: int, percentage: int = 0) -> int:
    """kube-scheduler's ``numFeasibleNodesToFind``: all below 100 candidates; else a percentage
    (adaptive ``50 − n/125`` with a 5 % floor when ``percentage`` is 0), at least 100."""
    if total < 100 or percentage >= 100:
        return total
    if percentage <= 0:
        percentage = max(5, 50 - total // 125)
    return max(100, total * percentage // 100)


def place(
    bundle: BoundBundle,
    item: Any,
    candidates: Iterable[T],
    *,
    stop_after: int | None = None,
    rank_ordered: bool = False,
) -> Placement[T]:
    pre = bundle.pre_predicate(item)
    if not pre.ok:
        return Placement(None, pre)
    feasible: list[T] = []
    failures: dict[str, Status] = {}
    select, predicate = bundle.select, bundle.predicate
    evaluated = 0
    for target in candidates:
        evaluated += 1
        s = select(item, target)
        if s.ok:
            s = predicate(item, target)
        if not s.ok:
            failures[target.name] = s
            continue
        if rank_ordered:  # candidates come in rank order: the first feasible one is the answer
            return Placement(target, SUCCESS, failures, [(target, 0.0)], evaluated)
        feasible.append(target)
        if stop_after is not None and len(feasible) >= stop_after:
            break
    if not feasible:
        if failures:
            status = aggregate(failures)
        else:
            status = Status.unresolvable(Reason.NODE_NOT_FOUND, "no candidates")
        return Placement(None, status, failures, evaluated=evaluated)
    if len(feasible) == 1 or not bundle.has_scores:
        ranked = [(t, 0.0) for t in feasible]
    else:
        node_order = bundle.node_order
        batch: Mapping[str, float] = bundle.batch_node_order(item, feasible)
        scored = [(t, node_order(item, t) + batch.get(t.name, 0.0)) for t in feasible]
        order = {id(t): i for i, (t, _) in enumerate(scored)}
        ranked = sorted(scored, key=lambda ts: (-ts[1], order[id(ts[0])]))
    choice = bundle.best_n(item, ranked)
    if choice is None:
        choice = ranked[0][0]
    return Placement(choice, SUCCESS, failures, ranked, evaluated)
