"""The pure half of bench/placement.py: the minimum number of leaves, the three baselines, the
FIFO-with-backfill loop and the metrics, on small cases checked by hand (and the minimum against
a brute force over every set of leaves)."""

from __future__ import annotations

import itertools
import json

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.placement_model import (
    Cluster,
    Gang,
    Placement,
    Trace,
    bench_cluster,
    busy_window,
    fits_one_model,
    metrics,
    min_leaves,
    place_bestfit,
    place_spread,
    place_tree,
    run_fifo_backfill,
    workload,
)
from extender.conf import default_policy_text, load_policy_text
from extender.framework.policy import Policy


def cluster(leaves: list[list[str]], gpus: int = 8) -> Cluster:
    """One inner list per leaf: the GPU model of each of its nodes (nodes numbered in order)."""
    leaf = tuple(s for s, models in enumerate(leaves) for _ in models)
    model = tuple(m for models in leaves for m in models)
    return Cluster(leaf, model, (gpus,) * len(model))


ONE_MODEL = cluster([["A", "A"], ["A", "A"], ["A", "A"]])
TWO_MODELS = cluster([["A", "A"], ["A", "H"], ["H", "H"]])


# --- min_leaves ------------------------------------------------------------------------------------


def test_min_leaves_counts_workers_per_node_not_nodes() -> None:
    free = [8, 8, 8, 0, 4, 4]  # leaf 0: 4 workers of 4 GPUs, leaf 1: 2, leaf 2: 2
    assert min_leaves(ONE_MODEL, free, 3, 4) == 1
    assert min_leaves(ONE_MODEL, free, 4, 4) == 1
    assert min_leaves(ONE_MODEL, free, 5, 4) == 2
    assert min_leaves(ONE_MODEL, free, 8, 4) == 3
    assert min_leaves(ONE_MODEL, free, 9, 4) is None
    assert min_leaves(ONE_MODEL, free, 3, 8) == 2  # only n0, n1, n2 hold 8 GPUs


def test_min_leaves_keeps_one_model_and_falls_back_to_mixing_only_when_no_model_holds_the_gang() -> None:
    free = [8] * 6
    assert min_leaves(TWO_MODELS, free, 2, 8) == 1  # leaf 0 (A) or leaf 2 (H)
    assert min_leaves(TWO_MODELS, free, 3, 8) == 2  # 3 A nodes span leaves 0, 1; 3 H nodes span 1, 2
    assert min_leaves(TWO_MODELS, free, 4, 8) == 2  # no model has 4 nodes: mixed, leaves of 2 nodes
    assert min_leaves(TWO_MODELS, free, 5, 8) == 3
    assert min_leaves(TWO_MODELS, free, 7, 8) is None


@settings(max_examples=300, deadline=None)
@given(
    frees=st.lists(st.integers(0, 8), min_size=6, max_size=6),
    workers=st.integers(1, 12),
    gpu=st.sampled_from([1, 2, 4, 8]),
)
def test_min_leaves_equals_a_brute_force_over_every_set_of_leaves(frees: list[int], workers: int, gpu: int) -> None:
    def holds(leaves: tuple[int, ...], model: str | None) -> bool:
        room = sum(
            f // gpu
            for i, f in enumerate(frees)
            if TWO_MODELS.leaf[i] in leaves and (model is None or TWO_MODELS.model[i] == model)
        )
        return room >= workers

    def fewest(model: str | None) -> int | None:
        for k in (1, 2, 3):
            if any(holds(s, model) for s in itertools.combinations(range(3), k)):
                return k
        return None

    one_model = [k for k in (fewest("A"), fewest("H")) if k is not None]
    expected = min(one_model) if one_model else fewest(None)
    assert min_leaves(TWO_MODELS, frees, workers, gpu) == expected


def test_fits_one_model_is_the_placement_rule_not_the_mixed_fallback() -> None:
    free = [8] * 6
    assert fits_one_model(TWO_MODELS, free, 3, 8)  # 3 A nodes over leaves 0 and 1
    assert not fits_one_model(TWO_MODELS, free, 4, 8) and min_leaves(TWO_MODELS, free, 4, 8) == 2
    assert fits_one_model(TWO_MODELS, [8, 4, 0, 0, 0, 0], 3, 4)  # a node takes free // gpu workers
    assert not fits_one_model(TWO_MODELS, [8, 4, 0, 0, 0, 0], 4, 4)


# --- the baselines ---------------------------------------------------------------------------------


def test_spread_puts_each_worker_on_the_least_allocated_node() -> None:
    c = cluster([["A", "A", "A"]])
    free = [8, 4, 6]
    assert place_spread(c, free, 2, 4) == [0, 2]  # 8 → n0 (left 4), then 6 → n2
    assert place_spread(c, free, 3, 4) == [0, 0, 2]  # n0, n2 (6), then n0/n1 tie at 4: lower index
    assert free == [8, 4, 6]  # not changed
    assert place_spread(c, free, 5, 4) is None  # 2 + 1 + 1 workers of 4 GPUs at most


def test_bestfit_puts_each_worker_on_the_fullest_node_that_fits() -> None:
    c = cluster([["A", "A", "A"]])
    free = [8, 4, 6]
    assert place_bestfit(c, free, 2, 4) == [1, 2]  # n1 (4), then n2 (6) before n0 (8)
    assert place_bestfit(c, free, 1, 8) == [0]
    assert place_bestfit(c, free, 2, 8) is None


def test_bestfit_and_spread_are_blind_to_leaves_and_models() -> None:
    free = [0, 8, 8, 0, 8, 0]  # n1 (leaf 0, A), n2 (leaf 1, A), n4 (leaf 2, H)
    assert place_bestfit(TWO_MODELS, free, 3, 8) == [1, 2, 4]


def test_tree_picks_the_best_fit_leaf_by_free_room_not_by_size() -> None:
    """The issue's example: free nodes 5 / 8 / 1 in three leaves of 8. A 5-worker gang takes the
    leaf with 5 free nodes; a later 9-worker gang then takes the 8 and the 1."""
    c = cluster([["A"] * 8, ["A"] * 8, ["A"] * 8])
    free = [8] * 5 + [0] * 3 + [8] * 8 + [8] + [0] * 7
    first = place_tree(c, free, 5, 8)
    assert first == [0, 1, 2, 3, 4]
    for i in first:
        free[i] -= 8
    assert place_tree(c, free, 9, 8) == [*range(8, 16), 16]


def test_tree_uses_the_fewest_leaves_and_the_best_fit_one_for_the_rest() -> None:
    c = cluster([["A"] * 4, ["A"] * 4, ["A"] * 4])
    free = [8, 8, 8, 0, 8, 8, 0, 0, 8, 8, 8, 8]  # leaf 0 | leaf 1 | leaf 2
    # 5 workers: no leaf holds them; the biggest leaf (4) + for the last worker the fullest leaf
    # with room for it (leaf 1: 16 free GPUs, before leaf 0: 24)
    assert place_tree(c, free, 5, 8) == [4, 8, 9, 10, 11]


def test_tree_fills_a_leaf_best_fit_and_stacks_workers_on_a_node() -> None:
    c = cluster([["A", "A", "A"]])
    assert place_tree(c, [8, 2, 4], 1, 2) == [1]
    assert place_tree(c, [8, 2, 4], 3, 2) == [1, 2, 2]  # n1 takes 1, n2 takes 2
    assert place_tree(c, [8, 0, 0], 4, 2) == [0, 0, 0, 0]


def test_tree_never_mixes_gpu_models() -> None:
    free = [8] * 6
    assert place_tree(TWO_MODELS, free, 3, 8) == [0, 1, 2]  # the A nodes (leaves 0, 1)
    assert place_tree(TWO_MODELS, free, 4, 8) is None  # 3 A and 3 H nodes: not with one model
    # leaf 0 (A) and leaf 2 (H) both hold 2 workers with 16 free GPUs: the tie goes to model A
    assert place_tree(TWO_MODELS, free, 2, 8) == [0, 1]
    # leaf 0 (A, 16 free) against leaf 2 (H, 12 free): best fit across models is the H leaf, and
    # inside it the only node with 8 free GPUs
    free = [8, 8, 0, 0, 4, 8]
    assert place_tree(TWO_MODELS, free, 1, 8) == [5]


# --- the step loop -----------------------------------------------------------------------------------


def test_fifo_backfill_lets_a_later_gang_start_while_an_earlier_one_waits() -> None:
    c = cluster([["A", "A"]])
    gangs = [Gang("a", 1, 8, 0, 5), Gang("b", 2, 8, 1, 2), Gang("c", 1, 8, 2, 3)]
    trace = run_fifo_backfill(c, gangs, place_tree, 100)
    assert {n: p.step for n, p in trace.placements.items()} == {"a": 0, "c": 2, "b": 5}
    assert trace.allocated == [8, 8, 16, 16, 16, 16]  # b starts at 5, the loop stops: all placed


def test_fifo_backfill_frees_gpus_when_the_duration_elapsed() -> None:
    c = cluster([["A", "A"]])
    gangs = [Gang("a", 2, 8, 0, 3), Gang("b", 1, 8, 0, 1), Gang("c", 1, 4, 1, 1)]
    trace = run_fifo_backfill(c, gangs, place_tree, 100)
    assert {n: (p.step, p.nodes) for n, p in trace.placements.items()} == {
        "a": (0, (0, 1)),
        "b": (3, (0,)),
        "c": (3, (1,)),
    }
    assert trace.allocated == [16, 16, 16, 12]


def test_fifo_backfill_records_the_minimum_before_the_gang_is_placed() -> None:
    c = cluster([["A", "A"], ["A", "A"]])
    gangs = [Gang("a", 3, 8, 0, 9), Gang("b", 1, 8, 0, 9)]
    trace = run_fifo_backfill(c, gangs, place_spread, 100)
    assert trace.placements["a"].min_leaves == 2
    assert trace.placements["b"].min_leaves == 1


# --- metrics --------------------------------------------------------------------------------------------


def test_busy_window_starts_when_the_arrivals_could_fill_the_cluster() -> None:
    c = cluster([["A", "A"]])  # 16 GPUs
    gangs = [Gang("a", 1, 8, 0, 1), Gang("b", 1, 4, 2, 1), Gang("c", 1, 4, 4, 1), Gang("d", 1, 1, 7, 1)]
    assert busy_window(c, gangs) == (4, 7)


def test_metrics_by_hand() -> None:
    c = cluster([["A", "H"], ["A", "A"]])  # 32 GPUs
    gangs = [Gang("a", 2, 8, 0, 9), Gang("b", 2, 8, 0, 9), Gang("c", 1, 8, 1, 9), Gang("d", 20, 1, 1, 9)]
    trace = Trace(
        placements={
            "a": Placement("a", 0, (0, 2), 1),  # 2 leaves where 1 would do
            "b": Placement("b", 1, (0, 1), 1),  # mixed models
            "c": Placement("c", 3, (3,), 1),
        },
        allocated=[16, 24, 24, 32],
    )
    m = metrics(c, gangs, trace)
    # window: the arrivals of step 0 already ask for 32 GPUs; the last arrival is at 1 → steps 0, 1
    assert m["gpu_allocation_mean"] == 0.625 and m["gpu_allocation_p10"] == 0.5
    assert m["share_over_min_leaves"] == 1 / 3
    assert m["mean_leaves_per_job"] == round(4 / 3, 4)
    assert m["gpu_model_mixed_jobs"] == 1
    assert m["unplaced_jobs"] == 1
    assert m["wait_steps_by_workers"] == {
        "1": {"jobs": 1, "total": 2, "max": 2},
        "2": {"jobs": 2, "total": 1, "max": 1},
    }


def test_workload_is_seeded_and_offers_the_asked_load() -> None:
    c = bench_cluster()
    a, b = workload(7, c), workload(7, c)
    assert a == b and a != workload(8, c)
    assert len(a) == 450 and all(1 <= g.workers <= 32 and g.gpu in (1, 2, 4, 8) for g in a)
    span = max(g.arrival for g in a) + 1
    offered = sum(g.gpus * g.duration for g in a) / (c.total_gpus * span)
    assert 0.85 <= offered <= 1.05
    assert [g.arrival for g in a] == sorted(g.arrival for g in a)


# --- the driver of the real scheduler ------------------------------------------------------------------


def test_the_real_scheduler_driver_places_completes_and_keeps_its_ledger_equal_to_the_cache() -> None:
    """SkyDriver replays the scheduler's bind intents into its own free-GPU ledger and checks it
    against the cache's quota_idle every step (check_ledgers); completions delete the job's objects."""
    from bench.placement import SkyDriver

    c = cluster([["A", "A"], ["A", "A"]])
    gangs = [Gang("g0", 2, 8, 0, 2), Gang("g1", 1, 8, 0, 5), Gang("g2", 2, 8, 1, 1)]
    driver = SkyDriver(c, gangs, cycles_per_step=2)
    trace = driver.run(50)
    p = trace.placements
    assert set(p) == {"g0", "g1", "g2"}
    assert (p["g0"].step, len({c.leaf[i] for i in p["g0"].nodes}), p["g0"].min_leaves) == (0, 1, 1)
    assert p["g1"].step == 0 and c.leaf[p["g1"].nodes[0]] != c.leaf[p["g0"].nodes[0]]
    # g2 needs a whole leaf: the one g0 frees at step 2
    assert (p["g2"].step, sorted(p["g2"].nodes)) == (2, sorted(p["g0"].nodes))
    assert trace.allocated == [24, 24, 24]
    assert driver.released == 0
    assert "default/g0" not in driver.cache.jobs and "q-g0-0" not in driver.cache.quotas


def _policy_holding_after(cycles: int) -> Policy:
    doc = yaml.safe_load(default_policy_text())
    doc["plugins"]["topology"]["reserve_after_cycles"] = cycles
    return load_policy_text(yaml.safe_dump(doc), f"default + reserve_after_cycles {cycles}")


def test_the_driver_counts_the_steps_a_fitting_gang_waits_and_why() -> None:
    """4 nodes in 2 leaves; "b-big" (4 × 8) waits for the node "a-first" uses until step 3 and,
    once it has waited a cycle, holds all four; "c-small" (1 × 8) arrives at step 1 and fits on any
    of the three free ones: it waits for the hold (NodeHeldForGang) until "b-big" has run. Without
    holds it starts at once, and nothing that fits ever waits."""
    from bench.placement import SkyDriver

    c = cluster([["A", "A"], ["A", "A"]])
    gangs = [Gang("a-first", 1, 8, 0, 3), Gang("b-big", 4, 8, 0, 2), Gang("c-small", 1, 8, 1, 1)]
    held = SkyDriver(c, gangs, cycles_per_step=2, policy=_policy_holding_after(1)).run(50)
    assert (held.placements["b-big"].step, held.placements["c-small"].step) == (3, 5)
    assert held.waited_while_fitting == {"NodeHeldForGang": 2}  # steps 1 and 2 (at 3 and 4 it does not fit)
    free = SkyDriver(c, gangs, cycles_per_step=2, policy=_policy_holding_after(0)).run(50)
    assert free.placements["c-small"].step == 1 and not free.waited_while_fitting


# --- waits per gang size and the targets ----------------------------------------------------------


def test_waits_are_reported_per_gang_size_not_per_bucket() -> None:
    """Issue 16 item 7: total and max wait per gang size (number of workers); a 24- and a
    32-worker gang are different sizes."""
    c = cluster([["A"] * 8])
    gangs = [Gang("a", 24, 1, 0, 9), Gang("b", 32, 1, 0, 9), Gang("d", 32, 1, 2, 9)]
    trace = Trace(placements={"a": Placement("a", 7, (0,) * 24, 1), "b": Placement("b", 3, (0,) * 32, 1),
                              "d": Placement("d", 3, (0,) * 32, 1)}, allocated=[0] * 8)  # fmt: skip
    assert metrics(c, gangs, trace)["wait_steps_by_workers"] == {
        "24": {"jobs": 1, "total": 7, "max": 7},
        "32": {"jobs": 2, "total": 4, "max": 3},
    }


def _figures(waits: dict[int, int], allocated: list[int]) -> dict[str, object]:
    """The metrics of a one-leaf, 8-node cluster where gang ``g<w>`` of ``w`` 1-GPU workers
    arrived at step 0 and waited ``waits[w]`` steps."""
    c = cluster([["A"] * 8])
    gangs = [Gang(f"g{w}", w, 1, 0, 1) for w in waits]
    placed = {f"g{w}": Placement(f"g{w}", s, (0,) * w, 1) for w, s in waits.items()}
    return metrics(c, gangs, Trace(placements=placed, allocated=allocated))


def test_the_wait_target_is_the_largest_gangs_own_not_a_bucket_a_smaller_size_dominates() -> None:
    """sky's 32-worker gang waits 8 steps, tree's 5: the target is missed, although the 24-worker
    gangs (which sky places sooner) make the 17-32 bucket's max look better for sky (10 ≤ 12)."""
    from bench.placement import targets

    sky = _figures({24: 10, 32: 8}, [64] * 11)
    tree = _figures({24: 12, 32: 5}, [64] * 13)
    met = targets(sky, tree, largest=32)
    assert not met["max_wait_32_workers_at_most_tree"]
    assert targets(tree, sky, largest=32)["max_wait_32_workers_at_most_tree"]


def test_the_allocation_target_compares_the_exact_means_not_the_printed_roundings() -> None:
    """One node of 1,000,000 GPUs, one step in the window: tree holds 90 % of them, sky 88.9951 %,
    0.0000049 short of tree − 0.01. Rounded to 4 places sky's 0.8900 would meet the target."""
    from bench.placement import targets

    big = Cluster((0,), ("A",), (1_000_000,))
    gangs = [Gang("g", 1, 1_000_000, 0, 1)]

    def figures(allocated: int) -> dict[str, object]:
        return metrics(big, gangs, Trace(placements={"g": Placement("g", 0, (0,), 1)}, allocated=[allocated]))

    sky, tree = figures(889_951), figures(900_000)
    mean = sky["gpu_allocation_mean"]
    assert isinstance(mean, float) and mean < 0.89
    assert not targets(sky, tree, largest=1)["gpu_allocation_mean_at_least_tree_minus_0.01"]
    assert targets(figures(890_001), tree, largest=1)["gpu_allocation_mean_at_least_tree_minus_0.01"]


def test_sky_whose_targets_are_target_met_is_the_scheduler_as_shipped() -> None:
    """Issue 16: the scheduler as a new user runs it, against tree. ``sky`` (the policy behind
    ``target_met``) is the default policy with every plugin argument as shipped; the
    ``pack_workers: true`` variant is printed beside it under its own name."""
    from bench.placement import sky_policies
    from extender.conf import default_policy
    from extender.plugins.topology import TopologyArgs

    shipped = default_policy()
    runs = sky_policies(None)
    assert list(runs) == ["sky", "sky_pack_workers"]
    assert runs["sky"].action_names == shipped.action_names
    assert {n: p.args for n, p in runs["sky"].plugins.items()} == {n: p.args for n, p in shipped.plugins.items()}
    sky, packing = runs["sky"].plugins["topology"].args, runs["sky_pack_workers"].plugins["topology"].args
    assert isinstance(sky, TopologyArgs) and isinstance(packing, TopologyArgs)
    assert not sky.pack_workers
    assert packing.pack_workers


def test_the_benchmark_prints_one_json_document_with_every_policy_and_both_verdicts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A small workload (12 gangs) on the benchmark's cluster: stdout is exactly one JSON document."""
    from bench.placement import main

    assert main(["--gangs", "12", "--max-steps", "300"]) == 0
    out = json.loads(capsys.readouterr().out)  # raises on anything but one document
    assert list(out["policies"]) == ["sky", "sky_pack_workers", "spread", "bestfit", "tree"]
    assert out["gangs"] == 12 and out["nodes"] == 256 and out["leaves"] == 16
    for verdict in (out["target_met"], out["sky_pack_workers_target_met"]):
        assert verdict["all"] == all(v for k, v in verdict.items() if k != "all")
    assert all(m["unplaced_jobs"] == 0 for m in out["policies"].values())
