"""Pictures of a simulation: the seed-2.7 observation tables, the placement table, an SVG."""

from __future__ import annotations

import html
from collections.abc import Sequence

from extender.simulate.runner import NodeView, PhaseView, SimulationResult, StepRecord

__all__ = ["render_svg", "render_text"]

_PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#e15759",
    "#76b7b2",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)


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
        lines.append("  $ kubectl get quota            (kubectl get node: unchanged — nodes are never modified)")
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
        lines.append("  $ kubectl get pod -o wide")
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


def render_text(result: SimulationResult) -> str:
    sc = result.scenario
    lines = [f"scenario {sc.name}: {sc.description}".rstrip(": "), ""]
    nodes = result.nodes
    lines.append("  $ kubectl get node")
    lines += _table(
        ["NODE", "LEAF", "GPU", "ALLOCATABLE", "STATUS"],
        [[n.name, n.leaf, n.model, f"nvidia.com/gpu: {n.gpus}", "Ready" if n.ready else "NotReady"] for n in nodes],
        "    ",
    )
    lines.append("")
    for step in result.steps:
        lines += _step_lines(step)
    lines.append("placement (█ GPU used by a pod, ▒ held by a bound quota, · free)")
    job_of_quota: dict[str, str] = {}
    for v in result.final.pods.values():
        if v.quota:
            job_of_quota[v.quota] = v.job
    rows = []
    for n in nodes:
        quotas = " ".join(sorted(n.quota_gpus)) or "-"
        jobs = sorted({job_of_quota.get(q, "") for q in n.quota_gpus} - {""})
        rows.append([n.leaf, n.name, n.model, _gpu_bar(n, {}), quotas, " ".join(jobs) or "-"])
    lines += _table(["LEAF", "NODE", "GPU", "GPUS", "QUOTAS", "JOBS"], rows)
    lines.append("")
    lines.append("jobs")
    lines += _table(
        ["JOB", "LEAVES", "NODES (rank order)"],
        [[k, ",".join(v["leaves"]) or "-", " ".join(n or "-" for n in v["nodes"])] for k, v in result.jobs.items()],
    )
    if result.warnings:
        lines.append("")
        lines.append("webhook warnings:")
        lines += [f"  {w}" for w in sorted(set(result.warnings))]
    return "\n".join(lines) + "\n"


def render_svg(result: SimulationResult) -> str:
    """Leaf switches → nodes → GPU cells, coloured by the job whose pod uses the GPU (solid) or
    whose quota holds it (hatched)."""
    nodes = result.nodes
    jobs = sorted(result.jobs)
    color = {j: _PALETTE[i % len(_PALETTE)] for i, j in enumerate(jobs)}
    pod_job = {k: v.job for k, v in result.final.pods.items()}
    quota_job = {v.quota: v.job for v in result.final.pods.values() if v.quota}
    leaves: dict[str, list[NodeView]] = {}
    for n in nodes:
        leaves.setdefault(n.leaf, []).append(n)

    cell, gap, node_w = 14, 3, 0
    max_gpus = max((n.gpus for n in nodes), default=8)
    cols = 4 if max_gpus > 4 else max(1, max_gpus)
    rows_per_node = -(-max_gpus // cols)
    node_w = cols * (cell + gap) + 12
    node_h = rows_per_node * (cell + gap) + 34
    leaf_pad = 14
    x = 20
    y_leaf, y_nodes = 60, 130
    parts: list[str] = []
    leaf_centres = []
    for leaf, members in leaves.items():
        width = len(members) * (node_w + 10) - 10 + 2 * leaf_pad
        lx = x
        parts.append(
            f'<rect x="{lx}" y="{y_leaf}" width="{width}" height="30" rx="6" fill="#3b3b3b"/>'
            f'<text x="{lx + width / 2}" y="{y_leaf + 20}" fill="#fff" font-size="13" text-anchor="middle">'
            f"leaf {html.escape(leaf)}</text>"
        )
        leaf_centres.append(lx + width / 2)
        nx = lx + leaf_pad
        for n in members:
            cx = nx + node_w / 2
            parts.append(
                f'<line x1="{cx}" y1="{y_leaf + 30}" x2="{cx}" y2="{y_nodes}" stroke="#888" stroke-width="1.5"/>'
            )
            fill = "#fafafa" if n.ready else "#f3d6d6"
            parts.append(
                f'<rect x="{nx}" y="{y_nodes}" width="{node_w}" height="{node_h}" rx="5" fill="{fill}" stroke="#999"/>'
                f'<text x="{nx + 6}" y="{y_nodes + 15}" font-size="11" font-weight="bold">{html.escape(n.name)}</text>'
                f'<text x="{nx + node_w - 6}" y="{y_nodes + 15}" font-size="9" fill="#666" text-anchor="end">'
                f"{html.escape(n.model)}</text>"
            )
            owners: list[tuple[str, bool]] = []
            for pod, g in sorted(n.pod_gpus.items()):
                owners += [(pod_job.get(pod, ""), True)] * g
            for quota, g in sorted(n.quota_gpus.items()):
                job = quota_job.get(quota, "")
                used_by_job = sum(1 for o, solid in owners if o == job and solid)
                owners += [(job, False)] * max(0, g - used_by_job)
            for i in range(n.gpus):
                r, c = divmod(i, cols)
                gx = nx + 6 + c * (cell + gap)
                gy = y_nodes + 24 + r * (cell + gap)
                if i < len(owners) and owners[i][0] in color:
                    job, solid = owners[i]
                    style = f'fill="{color[job]}"' if solid else f'fill="url(#hatch-{jobs.index(job)})"'
                    parts.append(
                        f'<rect x="{gx}" y="{gy}" width="{cell}" height="{cell}" rx="2" {style} stroke="#555" '
                        f'stroke-width="0.5"><title>{html.escape(job)}</title></rect>'
                    )
                else:
                    parts.append(
                        f'<rect x="{gx}" y="{gy}" width="{cell}" height="{cell}" rx="2" fill="#fff" stroke="#bbb" '
                        'stroke-width="0.5"/>'
                    )
            nx += node_w + 10
        x += width + 30
    total_w = max(x, 400)
    spine_y = 18
    spine = (
        f'<rect x="{total_w / 2 - 60}" y="{spine_y}" width="120" height="26" rx="6" fill="#222"/>'
        f'<text x="{total_w / 2}" y="{spine_y + 18}" fill="#fff" font-size="12" text-anchor="middle">spine</text>'
    )
    links = "".join(
        f'<line x1="{total_w / 2}" y1="{spine_y + 26}" x2="{c}" y2="{y_leaf}" stroke="#888" stroke-width="1.5"/>'
        for c in leaf_centres
    )
    legend_y = y_nodes + node_h + 30
    legend = []
    for i, j in enumerate(jobs):
        lx = 20 + (i % 3) * 260
        ly = legend_y + (i // 3) * 22
        leaves_text = html.escape(",".join(result.jobs[j]["leaves"]) or "-")
        legend.append(
            f'<rect x="{lx}" y="{ly - 11}" width="14" height="14" fill="{color[j]}"/>'
            f'<text x="{lx + 20}" y="{ly}" font-size="12">{html.escape(j)} — leaves {leaves_text}</text>'
        )
    note_y = legend_y + (len(jobs) + 2) // 3 * 22 + 8
    legend.append(
        f'<text x="20" y="{note_y}" font-size="11" fill="#555">solid: GPU used by a running pod · hatched: held by '
        "the job's bound quota · white: free · red node: NotReady</text>"
    )
    height = note_y + 20
    defs = "".join(
        f'<pattern id="hatch-{i}" width="5" height="5" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
        '<rect width="5" height="5" fill="#fff"/>'
        f'<line x1="0" y1="0" x2="0" y2="5" stroke="{color[j]}" stroke-width="3"/></pattern>'
        for i, j in enumerate(jobs)
    )
    title = html.escape(f"sky-scheduler simulate — {result.scenario.name}")
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_w}" height="{height}" '
        f'viewBox="0 0 {total_w} {height}" font-family="Helvetica, Arial, sans-serif">'
        f"<title>{title}</title><defs>{defs}</defs>"
        f'<rect width="100%" height="100%" fill="#ffffff"/>'
        f"{spine}{links}{''.join(parts)}{''.join(legend)}</svg>\n"
    )
