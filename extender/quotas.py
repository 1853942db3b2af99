"""``sky-scheduler quotas create``: the Quota objects a queue's jobs need, printed or applied.

    sky-scheduler quotas create --queue research --count 4 --request nvidia.com/gpu=8,rdma/hca=8 \\
        [--pool manual] [--node-selector nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB] [--dry-run]

Every task (pod) of a job claims one Quota of its queue; this writes ``count`` identical ones,
named ``<queue>-<pool>-<i>`` and labelled like the quotas of a Queue's ``spec.quotaPools``
(:func:`extender.binder.pools.pool_quota` builds both). ``--dry-run`` prints them as YAML
(``| kubectl apply -f -`` works too); otherwise they are applied through the scheduler's own
writer (created, or their spec brought to the one asked for), with the kubeconfig's identity.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from typing import Any

import yaml

from extender.binder.pools import PoolSpec, pool_quota
from extender.kube import client as kube_client
from extender.kube.writer import KubeWriter
from extender.model.resources import Resource

__all__ = ["add_arguments", "build_quotas", "parse_pairs", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    create = sub.add_parser("create", help="create N identical quotas for a queue (or print them with --dry-run)")
    create.add_argument("--queue", required=True, help="queue the quotas belong to (spec.queueName)")
    create.add_argument("--count", type=int, required=True, help="how many quotas (one per task)")
    create.add_argument(
        "--request",
        required=True,
        metavar="NAME=QTY,…",
        help="what each quota holds, e.g. nvidia.com/gpu=8,rdma/hca=8",
    )
    create.add_argument(
        "--pool", default="manual", help="pool name in the quota names <queue>-<pool>-<i> (default: manual)"
    )
    create.add_argument(
        "--node-selector",
        action="append",
        default=[],
        metavar="KEY=VALUE[,…]",
        help="node labels the quotas' nodes must carry (repeatable)",
    )
    create.add_argument("--start", type=int, default=0, help="first index i (default: 0)")
    create.add_argument("--dry-run", action="store_true", help="print the objects as YAML, write nothing")
    create.add_argument("--kubeconfig", default=None, help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    create.add_argument("--server", default=None, help="API server URL instead of a kubeconfig (e.g. kubectl proxy)")


def parse_pairs(text: str, what: str) -> dict[str, str]:
    """``a=1,b=2`` → ``{"a": "1", "b": "2"}``; a clear ValueError for anything else."""
    out: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ValueError(f"{what}: {part!r} is not NAME=VALUE")
        out[key.strip()] = value.strip()
    if not out:
        raise ValueError(f"{what}: nothing given")
    return out


def build_quotas(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The Quota objects the arguments ask for (ValueError: what is wrong with them)."""
    if args.count < 1:
        raise ValueError("--count must be at least 1")
    if args.start < 0:
        raise ValueError("--start must not be negative")
    request = parse_pairs(args.request, "--request")
    try:
        Resource.from_list(request)
    except ValueError as exc:
        raise ValueError(f"--request: {exc}") from None
    selector: dict[str, str] = {}
    for text in args.node_selector:
        selector.update(parse_pairs(text, "--node-selector"))
    pool = PoolSpec(
        queue=args.queue, name=args.pool, count=args.start + args.count, request=request, node_selector=selector
    )
    return [pool_quota(pool, i) for i in range(args.start, args.start + args.count)]


async def _apply(args: argparse.Namespace, objs: Sequence[dict[str, Any]]) -> int:
    api = await kube_client.new_client(args.kubeconfig, url=args.server, user_agent="sky-scheduler-quotas")
    try:
        writer = KubeWriter(api)
        for obj in objs:
            _, wrote = await writer.apply_quota(obj)
            print(f"quota/{obj['metadata']['name']} {'applied' if wrote else 'unchanged'}")
    finally:
        await kube_client.close(api)
    return 0


def run(args: argparse.Namespace) -> int:
    try:
        objs = build_quotas(args)
    except ValueError as exc:
        print(f"sky-scheduler quotas create: {exc}", file=sys.stderr)
        return 2
    if args.dry_run:
        sys.stdout.write(yaml.safe_dump_all(objs, sort_keys=False))
        return 0
    try:
        return asyncio.run(_apply(args, objs))
    except Exception as exc:  # an unreachable API server, no permission, …: say so, exit 1
        print(f"sky-scheduler quotas create: {exc}", file=sys.stderr)
        return 1
