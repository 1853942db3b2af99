"""kube-scheduler's DefaultPreemption as the simulator's kube-scheduler stand-in runs it: the
victims a node would give up (``SelectVictimsOnNode``) and the one node chosen among the
candidates the extender's ``/preempt`` answer leaves (``pickOneNodeForPreemption``). Pure
functions of the API objects given; ``now`` stands for the clock.

The rules, as kube-scheduler has them (``pkg/scheduler/framework/preemption``,
``plugins/defaultpreemption``):

* **Victims on a node**: every pod of lower priority than the preemptor is removed; if the
  preemptor then does not fit, the node is no candidate. Else the removed pods are reprieved one
  by one, the most important first (higher priority, then the earlier start), each put back when
  the preemptor still fits with it; the rest are the victims, most important first. A node that
  needs no victim is no candidate either.
* **Which node** (among the candidates, in order, each rule deciding only among the nodes tied
  by the ones before): the fewest PodDisruptionBudget violations; the lowest priority of the
  first victim (kube-scheduler's victims are ordered most important first, so: the highest
  victim priority); the least sum of the victims' priorities, each counted above the lowest
  priority there is (``priority + 2**31``, so that a negative priority adds no less than
  nothing); the fewest victims; the latest start time among the highest-priority victims
  (``GetEarliestPodStartTime``: the earliest of those, the later the better). A pod that has not
  started counts as starting ``now``.

Where the stand-in differs: kube-scheduler breaks the last tie by its candidate map's order
(arbitrary); here the node name decides. It counts no PodDisruptionBudget itself (the emulator
runs no disruption controller): a node's violations are what the extender answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from extender.cache.convert import parse_time, pod_request
from extender.model.resources import Resource

__all__ = ["Victims", "pick_node", "priority", "select_victims", "start_time"]

Obj = dict[str, Any]
Victims = tuple[Sequence[Obj], int]  # (victim pods, most important first; PDB violations)
_LOWEST = 2**31  # MaxInt32 + 1: every priority counted from the lowest one there is


def priority(pod: Mapping[str, Any]) -> int:
    """The pod's ``spec.priority`` (0 when unset: ``corev1helpers.PodPriority``)."""
    return int((pod.get("spec") or {}).get("priority") or 0)


def start_time(pod: Mapping[str, Any], now: float) -> float:
    """``status.startTime`` (``GetPodStartTime``): ``now`` for a pod that has not started."""
    started = parse_time((pod.get("status") or {}).get("startTime"))
    return started or now


def _importance(pod: Mapping[str, Any], now: float) -> tuple[int, float]:
    """``MoreImportantPod`` as a sort key: higher priority first, then the earlier start."""
    return (-priority(pod), start_time(pod, now))


def select_victims(need: Resource, prio: int, free: Resource, pods: Sequence[Obj], now: float) -> list[Obj] | None:
    """``SelectVictimsOnNode`` over resources: the pods of ``pods`` (the node's, ``free`` being
    its room now) a preemptor of priority ``prio`` asking ``need`` evicts, most important first;
    None when evicting every lower-priority pod would not make room (or none needs to go)."""
    lower = sorted((p for p in pods if priority(p) < prio), key=lambda p: _importance(p, now))
    room = free.clone()
    for p in lower:
        room.iadd(pod_request(p))
    if not need.less_equal(room):
        return None
    victims = []
    for p in lower:  # reprieve the most important first
        room.isub(pod_request(p))
        if not need.less_equal(room):
            room.iadd(pod_request(p))
            victims.append(p)
    return victims or None


def pick_node(candidates: Mapping[str, Victims], now: float) -> str | None:
    """``pickOneNodeForPreemption`` (the rules of the module docstring) over ``candidates``: node
    → its victims (kube-scheduler's order: the extender's answer, most important first as the dry
    run proposed them) and PDB violations; the node name breaks the last tie. None: no candidate."""

    def key(name: str) -> tuple[int, int, int, int, float, str]:
        pods, violations = candidates[name]
        top = max(priority(p) for p in pods)
        earliest = min(start_time(p, now) for p in pods if priority(p) == top)
        total = sum(priority(p) + _LOWEST for p in pods)
        return (violations, priority(pods[0]), total, len(pods), -earliest, name)

    named = [n for n, (pods, _) in candidates.items() if pods]
    return min(named, key=key) if named else None
