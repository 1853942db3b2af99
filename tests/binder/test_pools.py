"""Queue spec.quotaPools: the binder leader keeps exactly count Quota objects per pool (real loop,
writer and emulator over HTTP), and ``sky-scheduler quotas create`` prints or applies the same."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import yaml

from extender import cli, wellknown
from extender.binder.pools import LABEL_POOL, LABEL_QUEUE
from extender.simulate.cli import quota_banner
from extender.simulate.cluster import LocalCluster
from extender.simulate.scenario import load_scenario
from tests import builders as b

pytestmark = pytest.mark.anyio

POOL = {"name": "a100", "count": 3, "request": {"nvidia.com/gpu": 8, "rdma/hca": 8}}


def _queue(pools: list[dict[str, Any]]) -> dict[str, Any]:
    q = b.queue("research")
    q["spec"]["quotaPools"] = pools
    return q


def _pool_quotas(cl: LocalCluster) -> dict[str, dict[str, Any]]:
    return {
        q["metadata"]["name"]: q
        for q in cl.emulator.list(wellknown.API_VERSION, wellknown.QUOTAS)
        if (q["metadata"].get("labels") or {}).get(LABEL_POOL) == "a100"
    }


def _set_pools(cl: LocalCluster, pools: list[dict[str, Any]]) -> None:
    obj = cl.emulator.get(wellknown.API_VERSION, wellknown.QUEUES, "research")
    obj["spec"]["quotaPools"] = pools
    cl.emulator.update(obj)


async def test_the_leader_keeps_count_quotas_and_deletes_only_free_surplus() -> None:
    async with LocalCluster() as cl:
        cl.apply([*b.seed_cluster(), _queue([POOL])])
        await cl.cycle()
        await cl.cycle()
        quotas = _pool_quotas(cl)
        assert sorted(quotas) == ["research-a100-0", "research-a100-1", "research-a100-2"]
        for q in quotas.values():
            assert q["metadata"]["labels"] == {LABEL_QUEUE: "research", LABEL_POOL: "a100"}
            assert q["spec"] == {"queueName": "research", "request": {"nvidia.com/gpu": "8", "rdma/hca": "8"}}
        status = cl.emulator.get(wellknown.API_VERSION, wellknown.QUEUES, "research")["status"]
        assert status["quotaPools"] == [{"name": "a100", "count": 3, "present": 3, "bound": 0, "claimed": 0}]
        # a pod claims the last one, which gets bound; then the pool shrinks to one
        cl.apply([b.pod("solo", quota="research-a100-2", gpu=8, hca=8)])
        await cl.cycle()
        assert cl.quota_nodes()["research-a100-2"]
        _set_pools(cl, [{**POOL, "count": 1}])
        await cl.cycle()
        await cl.cycle()
        assert sorted(_pool_quotas(cl)) == ["research-a100-0", "research-a100-2"]  # 2 is claimed: kept
        status = cl.emulator.get(wellknown.API_VERSION, wellknown.QUEUES, "research")["status"]
        assert status["quotaPools"] == [{"name": "a100", "count": 1, "present": 2, "bound": 1, "claimed": 1}]
        # the pod goes away (finished): its quota is released, then deleted
        pod = cl.emulator.get("v1", "pods", "solo", "default")
        pod["status"]["phase"] = "Succeeded"
        cl.emulator.update(pod, subresource="status")
        for _ in range(4):
            await cl.cycle()
        assert sorted(_pool_quotas(cl)) == ["research-a100-0"]
        # a name the pool needs, taken by someone else's quota, is never taken over
        cl.apply([b.quota("research-a100-1", queue="other")])
        _set_pools(cl, [{**POOL, "count": 2}])
        await cl.cycle()
        await cl.cycle()
        other = cl.emulator.get(wellknown.API_VERSION, wellknown.QUOTAS, "research-a100-1")
        assert other["spec"]["queueName"] == "other"
        (entry,) = cl.emulator.get(wellknown.API_VERSION, wellknown.QUEUES, "research")["status"]["quotaPools"]
        assert entry["present"] == 1 and "research-a100-1" in entry["message"]


async def test_a_pool_no_node_could_hold_says_so() -> None:
    async with LocalCluster() as cl:
        cl.apply([*b.seed_cluster(), _queue([{**POOL, "count": 1, "request": {"nvidia.com/gpu": 16}}])])
        await cl.cycle()
        await cl.cycle()
        (entry,) = cl.emulator.get(wellknown.API_VERSION, wellknown.QUEUES, "research")["status"]["quotaPools"]
        assert entry["unholdable"] == "no node has more than 8 nvidia.com/gpu (asks 16)"


def _cli(*args: str) -> int:
    return cli.main(["quotas", "create", *args])


def test_cli_dry_run_prints_the_pool_objects(capsys: pytest.CaptureFixture[str]) -> None:
    rc = _cli("--queue", "research", "--count", "2", "--request", "nvidia.com/gpu=8,rdma/hca=8", "--pool", "a100",
              "--node-selector", "nvidia.com/gpu.product=A100", "--dry-run")  # fmt: skip
    assert rc == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [d["metadata"]["name"] for d in docs] == ["research-a100-0", "research-a100-1"]
    assert docs[0]["spec"] == {
        "queueName": "research",
        "request": {"nvidia.com/gpu": "8", "rdma/hca": "8"},
        "nodeSelector": {"nvidia.com/gpu.product": "A100"},
    }
    assert docs[0]["metadata"]["labels"] == {LABEL_QUEUE: "research", LABEL_POOL: "a100"}


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--request", "nvidia.com/gpu=lots"], "not a Kubernetes quantity"),
        (["--request", "nvidia.com/gpu"], "is not NAME=VALUE"),
        (["--request", "nvidia.com/gpu=1", "--count", "0"], "--count must be at least 1"),
    ],
)
def test_cli_refuses_bad_input_clearly(args: list[str], error: str, capsys: pytest.CaptureFixture[str]) -> None:
    base = {"--queue": "research", "--count": "1"}
    argv = [x for k, v in base.items() if k not in args for x in (k, v)] + args + ["--dry-run"]
    assert _cli(*argv) == 2
    captured = capsys.readouterr()
    assert error in captured.err and captured.out == ""


async def test_cli_applies_through_the_writer_and_is_idempotent(capsys: pytest.CaptureFixture[str]) -> None:
    async with LocalCluster() as cl:
        cl.apply([*b.seed_cluster(), b.queue("research")])
        argv = ("--queue", "research", "--count", "2", "--request", "nvidia.com/gpu=1", "--server", cl.emulator.url)
        assert await asyncio.to_thread(_cli, *argv) == 0
        assert capsys.readouterr().out.splitlines() == [
            "quota/research-manual-0 applied",
            "quota/research-manual-1 applied",
        ]
        assert await asyncio.to_thread(_cli, *argv) == 0
        assert capsys.readouterr().out.splitlines() == [
            "quota/research-manual-0 unchanged",
            "quota/research-manual-1 unchanged",
        ]
        names = sorted(q["metadata"]["name"] for q in cl.emulator.list(wellknown.API_VERSION, wellknown.QUOTAS))
        assert names == ["research-manual-0", "research-manual-1"]
        # the pods of a job can claim them: the binder places them
        cl.apply([b.pod("p0", gpu=1, hca=None, annotations={wellknown.ANNO_QUEUE_NAME: "research"})])
        await cl.cycle()
        await cl.cycle()
        assert sum(1 for n in cl.quota_nodes().values() if n) == 1


async def test_the_sandbox_banner_says_where_quotas_come_from_and_its_command_works(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    async with LocalCluster() as cl:
        kc = cl.emulator.write_kubeconfig(tmp_path / "kc")
        lines = quota_banner(load_scenario("seed-8-node"), str(kc))
        assert lines[0].startswith("quotas: 7 from scenario seed-8-node")
        assert "q-train-0..3  queue research  request nvidia.com/gpu=1,rdma/hca=1" in lines[1]
        command = lines[-1].split("more: ", 1)[1].split("  (", 1)[0].split()
        assert command[:3] == ["sky-scheduler", "quotas", "create"]
        assert await asyncio.to_thread(cli.main, command[1:]) == 0
        assert "quota/research-manual-1 applied" in capsys.readouterr().out
        names = {q["metadata"]["name"] for q in cl.emulator.list(wellknown.API_VERSION, wellknown.QUOTAS)}
        assert names == {"research-manual-0", "research-manual-1"}
