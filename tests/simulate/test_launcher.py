"""A scenario job with ``launcher:`` (an MPIJob): the key's parsing, and the gang through the real
components — the launcher pod of rank 0 and its quota land in the workers' leaf, and the output
(jobs table, SVG legend, JSON) says where the launcher is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from extender import wellknown
from extender.simulate.render import render_svg, render_text
from extender.simulate.runner import Simulation
from extender.simulate.scenario import JobSpec, Scenario, ScenarioError, load_scenario

WORKER = {"nvidia.com/gpu": 8, "rdma/hca": 8}
LAUNCHER = {"rdma/hca": 1, "cpu": "2", "memory": "8Gi"}


def _job(**changes: Any) -> dict[str, Any]:
    return {"name": "mpi", "workers": 3, "request": WORKER, **changes}


def _load(tmp_path: Path, job: dict[str, Any]) -> Scenario:
    import yaml

    doc = {"name": "x", "leaves": [{"name": "s1", "nodes": ["n0"]}], "steps": [{"jobs": [job]}]}
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_scenario(str(path))


# --- parsing --------------------------------------------------------------------------------------
def test_a_launcher_is_one_more_pod_of_rank_0_and_counts_in_min_member() -> None:
    job = JobSpec.model_validate(_job(launcher={"request": LAUNCHER, "quota": "q-l"}))
    assert job.launcher is not None and job.launcher.quota == "q-l"
    assert (job.pods, job.members, job.launcher_name) == (4, 4, "mpi-launcher")
    assert [job.task_index(i) for i in range(job.workers)] == [1, 2, 3]
    assert [job.pod_name(i) for i in range(job.workers)] == ["mpi-worker-0", "mpi-worker-1", "mpi-worker-2"]
    assert JobSpec.model_validate(_job(launcher={"request": LAUNCHER}, minMember=2)).members == 2


def test_without_a_launcher_a_job_is_as_before() -> None:
    job = JobSpec.model_validate(_job())
    assert job.launcher is None
    assert (job.pods, job.members, [job.task_index(i) for i in range(3)]) == (3, 3, [0, 1, 2])


@pytest.mark.parametrize(
    ("launcher", "said"),
    [
        ({"request": LAUNCHER, "gpus": 1}, "steps.0.jobs.0.launcher.gpus: Extra inputs are not permitted"),
        ({"quota": "q-l"}, "steps.0.jobs.0.launcher.request: Field required"),
        ({"request": "2 CPUs"}, "steps.0.jobs.0.launcher.request: Input should be a valid dictionary"),
        ({"request": {"cpu": "two"}}, "launcher: request"),
        ({"request": LAUNCHER, "quota": ["q-l"]}, "steps.0.jobs.0.launcher.quota: Input should be a valid string"),
        (5, "steps.0.jobs.0.launcher: Input should be a valid dictionary"),
    ],
)
def test_a_bad_launcher_is_an_error_naming_the_key(tmp_path: Path, launcher: Any, said: str) -> None:
    with pytest.raises(ScenarioError) as err:
        _load(tmp_path, _job(launcher=launcher))
    assert said in str(err.value)


# --- through the simulator ------------------------------------------------------------------------
# s1: 3 free whole nodes (n0 is another queue's), s2: 4. The 3 workers alone fit s1 (the fuller);
# with the launcher (it needs an HCA, and a worker's node has none left) only s2 holds the gang.
SCENARIO: dict[str, Any] = {
    "name": "launcher-e2e",
    "leaves": [{"name": "s1", "nodes": ["n0", "n1", "n2", "n3"]}, {"name": "s2", "nodes": ["n4", "n5", "n6", "n7"]}],
    "queues": [{"name": "research"}, {"name": "ops"}],
    "quotas": [
        {"name": "q-ops", "queue": "ops", "request": WORKER, "staticBindNode": "n0"},
        {"name": "q-w-{i}", "count": 3, "queue": "research", "request": WORKER},
        {"name": "q-launcher", "queue": "research", "request": LAUNCHER},
    ],
    "steps": [
        {"title": "pin q-ops"},
        {"title": "submit", "jobs": [_job(quota="q-w-{i}", launcher={"request": LAUNCHER, "quota": "q-launcher"})]},
        {"title": "the launcher is deleted", "events": [{"deletePod": {"pod": "mpi-launcher"}}]},
    ],
}


def _leaf(node: str) -> str:
    return "s1" if node in ("n0", "n1", "n2", "n3") else "s2"


@pytest.mark.anyio
async def test_the_launcher_and_its_quota_land_in_the_workers_leaf() -> None:
    scenario = Scenario.model_validate(SCENARIO)
    async with Simulation(scenario) as sim:
        result = await sim.run()
        pods = {p["metadata"]["name"]: p for p in sim.emulator.list("v1", "pods")}
        group = sim.emulator.get(wellknown.API_VERSION, wellknown.PODGROUPS, "mpi", "default")
        quotas = {
            q["metadata"]["name"]: q["status"].get("nodeName", "")
            for q in sim.emulator.list(wellknown.API_VERSION, wellknown.QUOTAS)
        }
    assert group["spec"]["minMember"] == 4
    launcher = pods["mpi-launcher"]
    anno = launcher["metadata"]["annotations"]
    assert anno[wellknown.ANNO_QUOTA_NAME] == "q-launcher" and anno[wellknown.ANNO_TASK_INDEX] == "0"
    assert launcher["metadata"]["labels"]["training.kubeflow.org/replica-type"] == "launcher"
    assert launcher["spec"]["containers"][0]["resources"]["requests"] == {"rdma/hca": "1", "cpu": "2", "memory": "8Gi"}
    workers = [pods[f"mpi-worker-{i}"] for i in range(3)]
    assert [w["metadata"]["annotations"][wellknown.ANNO_TASK_INDEX] for w in workers] == ["1", "2", "3"]
    assert [w["metadata"]["annotations"][wellknown.ANNO_QUOTA_NAME] for w in workers] == ["q-w-0", "q-w-1", "q-w-2"]
    # every pod runs where its quota is; the launcher (recreated after its deletion) in the workers' leaf
    nodes = [launcher["spec"].get("nodeName", ""), *(w["spec"].get("nodeName", "") for w in workers)]
    assert all(nodes) and nodes[0] == quotas["q-launcher"]
    assert nodes[1:] == [quotas[f"q-w-{i}"] for i in range(3)]
    assert {_leaf(n) for n in nodes} == {"s2"}
    assert nodes[0] not in nodes[1:]  # no HCA is left on a worker's node
    # what the operator reads: the launcher first in rank order, its node in LAUNCHER and the legend
    assert result.jobs["default/mpi"] == {"leaves": ["s2"], "nodes": nodes, "launcher": nodes[:1]}
    table = render_text(result).split("\njobs\n", 1)[1]
    assert table.splitlines()[0].split() == ["JOB", "LEAVES", "LAUNCHER", "NODES", "(rank", "order)"]
    assert table.splitlines()[1].split() == ["default/mpi", "s2", nodes[0], *nodes]
    assert f"launcher on {nodes[0]}" in render_svg(result)
