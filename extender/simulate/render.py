"""Pictures of a simulation: the seed-2.7 observation tables and the placement table (text); the
SVG is drawn by :mod:`extender.simulate.svg` (``render_svg`` is re-exported here)."""

from __future__ import annotations

from collections.abc import Sequence

from extender.simulate.observation import NodeView, PhaseView, SimulationResult, StepRecord
from extender.simulate.svg import render_svg

__all__ = ["render_svg", "render_text"]


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    widths = [len(h) for h in headers]
    for r in rows:
        for i, cell in enumerate(r):
            widths[i] = max(widths[i], len(cell))
    fmt = indent + "  ".join(f"{{:<{w}}}" for w in widths)
    return [fmt.format(*headers).rstrip()] + [fmt.format(*r).rstrip() for r in rows]


def _quota_cell(view: PhaseView, name: str) -> str:
    phase, node = view.quotas.get(name, ("-", ""))
    return f"{phase} {node}".strip() if node else phase


def _pod_cell(view: PhaseView, key: str) -> str:
    v = view.pods.get(key)
    if v is None:
        return "-"
    if v.node:
        return f"{v.phase} {v.node}"
    if v.quota_node:
        return f"{v.phase} (quota on {v.quota_node})"
    if v.quota:
        return f"{v.phase} ({v.quota})"
    return v.phase


def _step_lines(step: StepRecord) -> list[str]:
    lines = [f"step {step.index + 1}: {step.title}" if step.title else f"step {step.index + 1}"]
    for e in step.events:
        lines.append(f"  · {e}")
    lines.append("")
    names = sorted(set(step.after_scheduler.quotas) | set(step.after_webhook.quotas))
    changed = [
        n
        for n in names
        if len({_quota_cell(v, n) for v in (step.after_webhook, step.after_binder, step.after_scheduler)}) > 1
        or step.after_scheduler.quotas.get(n, ("", ""))[1]
    ]
    hops = ("① webhook (task→quota)", "② binder (quota→node)", "③ kube-scheduler (pod→node)")
    if changed:
        lines.append("  quotas: phase and node after each hop (nodes themselves are never modified)")
        rows = [
            [
                n,
                _quota_cell(step.after_webhook, n),
                _quota_cell(step.after_binder, n),
                _quota_cell(step.after_scheduler, n),
            ]
            for n in changed
        ]
        lines += _table(["QUOTA", *hops], rows, "    ")
        lines.append("")
    pods = sorted(
        step.after_scheduler.pods,
        key=lambda k: (step.after_scheduler.pods[k].job, step.after_scheduler.pods[k].index or 0, k),
    )
    if pods:
        lines.append(
            "  pods: phase and node after each hop (a pending pod: the quota, or the quota's node, it waits for)"
        )
        rows = []
        for k in pods:
            quota = (
                step.after_scheduler.pods[k].quota or step.after_webhook.pods.get(k, step.after_scheduler.pods[k]).quota
            )
            rows.append(
                [
                    k.split("/", 1)[1],
                    quota or "-",
                    _pod_cell(step.after_webhook, k),
                    _pod_cell(step.after_binder, k),
                    _pod_cell(step.after_scheduler, k),
                ]
            )
        lines += _table(["POD", "QUOTA", *hops], rows, "    ")
    if step.pending:
        lines.append("")
        lines.append("  still pending (kube-scheduler's FailedScheduling):")
        for pod, why in sorted(step.pending.items()):
            lines.append(f"    {pod}: {why}")
    lines.append("")
    return lines


def _gpu_bar(node: NodeView, colors: dict[str, str]) -> str:
    used = sum(node.pod_gpus.values())
    held = sum(node.quota_gpus.values())
    cells = (
        "█" * min(used, node.gpus)
        + "▒" * max(0, min(held, node.gpus) - used)
        + "·" * max(0, node.gpus - max(used, held))
    )
    return f"{cells} {used}/{node.gpus}"


def _jobs_table(result: SimulationResult) -> list[str]:
    """Each job's leaves and nodes in rank order; with spines or NVLink domains declared, the tier
    it spans and its spines; with an MPIJob in the scenario, each launcher's node."""
    tiers = result.scenario.has_upper_tiers
    launchers = any("launcher" in v for v in result.jobs.values())
    headers = ["JOB", *(["SPAN", "SPINES"] if tiers else []), "LEAVES", *(["LAUNCHER"] if launchers else [])]
    rows = []
    for k, v in result.jobs.items():
        row = [k]
        if tiers:
            row += [",".join(v.get("span") or []) or "-", ",".join(v.get("spines") or []) or "-"]
        row.append(",".join(v["leaves"]) or "-")
        if launchers:
            row.append(" ".join(n or "-" for n in v["launcher"]) if "launcher" in v else "")
        rows.append([*row, " ".join(n or "-" for n in v["nodes"])])
    return _table([*headers, "NODES (rank order)"], rows)


def render_text(result: SimulationResult) -> str:
    sc = result.scenario
    lines = [f"scenario {sc.name}: {sc.description}".rstrip(": "), ""]
    nodes = result.nodes
    lines.append("  nodes: leaf switch, GPU model, allocatable GPUs, readiness")
    lines += _table(
        ["NODE", "LEAF", "GPU", "ALLOCATABLE", "STATUS"],
        [[n.name, n.leaf, n.model, f"nvidia.com/gpu: {n.gpus}", "Ready" if n.ready else "NotReady"] for n in nodes],
        "    ",
    )
    lines.append("")
    for step in result.steps:
        lines += _step_lines(step)
    lines.append("placement (█ GPU used by a pod, ▒ held by a bound quota, · free)")
    jobs_of_quota: dict[str, set[str]] = {}  # a quota may be shared by pods of several jobs
    for v in result.final.pods.values():
        if v.quota and v.job:
            jobs_of_quota.setdefault(v.quota, set()).add(v.job)
    rows = []
    for n in nodes:
        quotas = " ".join(sorted(n.quota_gpus)) or "-"
        jobs = sorted(set().union(*(jobs_of_quota.get(q, set()) for q in n.quota_gpus)))
        rows.append([n.leaf, n.name, n.model, _gpu_bar(n, {}), quotas, " ".join(jobs) or "-"])
    lines += _table(["LEAF", "NODE", "GPU", "GPUS", "QUOTAS", "JOBS"], rows)
    lines.append("")
    lines.append("jobs")
    lines += _jobs_table(result)
    if result.warnings:
        lines.append("")
        lines.append("webhook warnings:")
        lines += [f"  {w}" for w in sorted(set(result.warnings))]
    return "\n".join(lines) + "\n"
