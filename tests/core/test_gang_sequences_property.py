"""Property over time: random clusters (leaves, two GPU models, NotReady nodes, idle quotas left by
finished jobs) and random sequences of gang arrivals, completions (the pods go, their quotas keep
reservations for ``reservation_ttl``), nodes lost (with their pods) or flipping Ready, and time
passing; one binder cycle after each step, its writes fed back as the binder makes them
(``scenarios.write_back`` with ``boundBy`` on binds) and every pod of a bound quota started on
the quota's node.

After every cycle: invariant 1 (Σ requests of the quotas bound to a node ≤ its allocatable), and
every gang bound in the cycle is bound whole, on one GPU model, and spans several leaves only if
no leaf of its model could hold it — judged on the state after the cycle (which only has less
room than the gang saw, since idle quotas go back before hop ② plans), with the quotas
``release_quota`` gave back at the end of the cycle counted as still holding their room."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from extender.cache.cache import ClusterCache
from extender.framework.intents import BindQuota, ReleaseQuota
from extender.framework.policy import Policy
from extender.model.quota import QuotaInfo
from extender.model.resources import Resource
from extender.plugins.topology.fitmemo import capacity_for
from extender.scheduler import CycleResult, Scheduler
from tests import builders as b
from tests.core.props import PROPERTY
from tests.core.scenarios import NOW, POLICY, bumped, policy_without, write_back

Node = tuple[str, str, bool]  # GPU model, leaf, ready
Step = tuple[str, int, int]  # ("arrive", workers, GPUs each) | ("finish", which, 0) | ("advance", seconds, 0)
# | ("lose", node, 0): the node is deleted with its pods | ("flip", node, 0): its Ready condition flips
IDLE_REASONS = ("no task claims it", "no longer exists")  # release_idle's reasons: before hop ②


def released_late(result: CycleResult) -> list[QuotaInfo]:
    """The quotas the cycle released at its end (a stuck job's, not an idle one's given back
    before hop ②): they held room while the gangs were planned."""
    before = result.session.snap.quotas
    return [
        before[i.quota]
        for i in result.intents
        if isinstance(i, ReleaseQuota) and i.quota in before and not any(r in i.reason for r in IDLE_REASONS)
    ]


def start_bound_pods(cache: ClusterCache) -> None:
    """Every pod of a bound quota runs on the quota's node (as kube-scheduler and the kubelet
    would make it)."""
    for job in list(cache.jobs.values()):
        for t in list(job.tasks.values()):
            q = cache.quotas.get(t.quota) if t.quota and not t.node else None
            old = cache.pod(t.uid) if q is not None and q.node_name else None
            if q is None or old is None:
                continue
            new = bumped(old)
            new["spec"]["nodeName"] = q.node_name
            new["status"] = {**(new.get("status") or {}), "phase": "Running"}
            cache.on_pod_update(old, new)


def placed(cache: ClusterCache, gang: str, workers: int) -> bool:
    """Every one of the gang's ``workers`` pods claims a bound quota: its own (``q-<gang>-<k>``, as
    ``builders.training_job`` names them), or one another job left bound and idle, which hop ①
    gives a pending pod before an empty one."""
    job = cache.jobs.get(f"default/{gang}")
    claimed = [t.quota for t in job.tasks.values() if t.quota] if job is not None else []
    return len(claimed) >= workers and all(q in cache.quotas and cache.quotas[q].node_name for q in claimed)


def set_ready(cache: ClusterCache, node: Mapping[str, Any], ready: bool) -> None:
    """The node's Ready condition turns ``ready`` (an informer's update of it)."""
    new = bumped(dict(node))
    for condition in new["status"]["conditions"]:
        if condition["type"] == "Ready":
            condition["status"] = "True" if ready else "False"
    cache.on_node_update(node, new)


@st.composite
def worlds(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[str, Node], list[Step]]:
    objs: list[dict[str, Any]] = []
    nodes: dict[str, Node] = {}
    models = ["A100", "H100"][: draw(st.integers(1, 2))]
    for leaf in range(draw(st.integers(1, 3))):
        for _ in range(draw(st.integers(2, 4))):
            name = f"n{len(nodes)}"
            model, ready = draw(st.sampled_from(models)), draw(st.integers(0, 9)) > 0
            objs += [b.node(name, gpu_model=model, ready=ready), b.topology(name, [f"s{leaf}"])]
            nodes[name] = (model, f"s{leaf}", ready)
            if draw(st.integers(0, 4)) == 0:  # a finished job's quota, bound by the scheduler, idle
                status = {"phase": "QuotaBound", "nodeName": name}
                gpus = draw(st.integers(1, 8))
                objs.append(b.quota(f"idle-{name}", queue="other", gpu=gpus, hca=None, status=status))
    step = st.one_of(
        st.tuples(st.just("arrive"), st.integers(1, 6), st.sampled_from([1, 2, 4, 8])),
        st.tuples(st.just("finish"), st.integers(0, 9), st.just(0)),
        st.tuples(st.just("advance"), st.sampled_from([1, 100, 700]), st.just(0)),
        st.tuples(st.just("lose"), st.integers(0, 11), st.just(0)),
        st.tuples(st.just("flip"), st.integers(0, 11), st.just(0)),
    )
    return objs, nodes, draw(st.lists(step, min_size=2, max_size=10))


def check_cycle(cache: ClusterCache, result: CycleResult, nodes: dict[str, Node], gangs: dict[str, int]) -> None:
    """The properties of the module docstring for one cycle (AssertionError names the break)."""
    on: defaultdict[str, Resource] = defaultdict(Resource.empty)
    for q in cache.quotas.values():
        if q.node_name:
            on[q.node_name].iadd(q.request)
    for name, total in on.items():
        if name not in cache.nodes:
            continue
        assert total.less_equal(cache.nodes[name].allocatable), f"invariant 1 broken on {name}: {total}"
    bound = {i.quota for i in result.intents if isinstance(i, BindQuota)}
    late = released_late(result)
    for gang, workers in gangs.items():
        mine = [f"q-{gang}-{k}" for k in range(workers)]
        if not bound & set(mine):
            continue
        placed = [cache.quotas[m].node_name for m in mine]
        assert all(placed), f"{gang} is bound in part: {placed}"
        models = {nodes[n][0] for n in placed}
        assert len(models) == 1, f"{gang} mixes GPU models: {placed}"
        leaves = {nodes[n][1] for n in placed}
        if len(leaves) == 1:
            continue
        request, fits = cache.quotas[mine[0]].request, defaultdict[str, int](int)
        for name, (model, leaf, ready) in nodes.items():
            if model not in models or not ready:
                continue
            held = Resource.empty()
            for q in [*cache.quotas.values(), *late]:
                if q.node_name == name and q.name not in mine:
                    held.iadd(q.request)
            fits[leaf] += capacity_for(request, cache.nodes[name].allocatable - held)
        assert all(v < workers for v in fits.values()), f"{gang} spans {sorted(leaves)}; per leaf it fits {dict(fits)}"


def run(objs: list[dict[str, Any]], nodes: dict[str, Node], steps: list[Step], policy: Policy) -> int:
    """Play ``steps``, checking every cycle; returns how many gangs were placed."""
    nodes = dict(nodes)  # as nodes go or flip
    now = NOW
    cache = ClusterCache(clock=lambda: now)
    b.feed(cache, objs)
    sched = Scheduler(policy)
    gangs: dict[str, int] = {}
    bound_gangs = 0
    for n, (kind, x, gpu) in enumerate(steps):
        if kind == "arrive":
            b.feed(cache, b.training_job(f"j{n}", x, gpu=gpu, hca=1))
            gangs[f"j{n}"] = x
        elif kind == "finish":
            running = [g for g, w in gangs.items() if placed(cache, g, w)]
            if running:
                gang = running[x % len(running)]
                job = cache.jobs[f"default/{gang}"]
                for pod in [cache.pod(uid) for uid in list(job.tasks)]:
                    if pod is not None:
                        cache.on_pod_delete(pod)
                del gangs[gang]
        elif kind == "lose":
            name = f"n{x}"
            obj = cache.node_object(name)
            if name in cache.nodes and obj is not None:
                # its pods go with it
                for job in list(cache.jobs.values()):
                    for t in list(job.tasks.values()):
                        if t.node == name and (pod := cache.pod(t.uid)) is not None:
                            cache.on_pod_delete(pod)
                cache.on_node_delete(obj)
                nodes[name] = (nodes[name][0], nodes[name][1], False)
        elif kind == "flip":
            name = f"n{x}"
            obj = cache.node_object(name)
            if name in cache.nodes and obj is not None:
                ready = not nodes[name][2]
                set_ready(cache, obj, ready)
                nodes[name] = (nodes[name][0], nodes[name][1], ready)
        else:
            now += x
        result = sched.run_once(cache.snapshot(now))
        write_back(cache, result, bound_by=True)
        start_bound_pods(cache)
        check_cycle(cache, result, nodes, gangs)
        bound_gangs += len({i.quota.rsplit("-", 1)[0] for i in result.intents if isinstance(i, BindQuota)})
    return bound_gangs


@PROPERTY
@given(worlds())
def test_gangs_over_time_keep_invariant_1_and_span_no_more_leaves_than_needed(
    world: tuple[list[dict[str, Any]], dict[str, Node], list[Step]],
) -> None:
    run(*world, POLICY)


def test_the_checker_catches_a_gang_planned_around_an_idle_quota_given_back_late() -> None:
    """The property can fail: with idle quotas given back only at the end of the cycle (a policy
    without release_idle_quota), a 2 × 8-GPU gang takes n0 and n2 while leaf s1 (n1, n2) holds it
    once n1's idle quota is gone."""
    idle = b.quota("idle-n1", queue="other", gpu=1, hca=None, status={"phase": "QuotaBound", "nodeName": "n1"})
    objs = [idle]
    nodes: dict[str, Node] = {}
    for i, leaf in enumerate(["s0", "s1", "s1"]):
        objs += [b.node(f"n{i}"), b.topology(f"n{i}", [leaf])]
        nodes[f"n{i}"] = ("A100", leaf, True)
    steps: list[Step] = [("arrive", 2, 8)]
    assert run(objs, nodes, steps, POLICY) == 1
    try:
        run(objs, nodes, steps, policy_without("release_idle_quota"))
    except AssertionError as exc:
        assert "spans ['s0', 's1']" in str(exc)
    else:
        raise AssertionError("the checker passed a gang spanning two leaves where one held it")
