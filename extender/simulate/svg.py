"""The SVG picture of a simulation: one panel per step (the cluster at the end of that step).

Each panel shows the spine, the leaf switches and, under each leaf, its nodes in **index order**
(annotation ``node-index``, else the number in the name — the order ranks are placed in); when the
scenario declares spines, the core is on top and each spine is centred over its own leaves, spine
groups a wider gap apart. A node
is a grid of GPU cells: solid in the colour of the job whose pod uses the GPU, hatched where the
job's bound quota holds it for a pod not running there yet, white when free; each used or held
cell is labelled with the rank of its pod (``w0``, ``w1``, …). Under the nodes, one legend line
per job: where it is (an MPIJob's GPU-less launcher: its node), or **PENDING** (in red, with
kube-scheduler's reason) while any of its pods has no node.

Text never overlaps: every box is sized from the widths of the texts it holds, estimated as
``font size × characters ×`` :data:`CHAR_WIDTH` (Helvetica's average advance is about 0.55 em
for lowercase and digits and at most 0.72 em for capitals; 0.65 covers our mixed labels, and
bold text is counted 10 % wider), and no two texts share a line.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

from extender.simulate.observation import NodeView, PhaseView, SimulationResult, StepRecord

__all__ = ["CHAR_WIDTH", "render_svg", "text_width"]

CHAR_WIDTH = 0.65
"""Estimated advance of one character, in font sizes (see the module docstring)."""

PALETTE = (
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
_CELL, _GAP, _COLS = 18, 3, 4
_NODE_GAP, _LEAF_PAD, _LEAF_GAP, _MARGIN = 10, 14, 30, 20
_PENDING = "#c0392b"


def text_width(text: str, size: float, *, bold: bool = False) -> float:
    """Estimated width of ``text`` at ``size`` px (see :data:`CHAR_WIDTH`)."""
    return len(text) * size * CHAR_WIDTH * (1.1 if bold else 1.0)


def _text(x: float, y: float, text: str, size: float, **attrs: str) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attrs.items())
    return f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size:g}"{extra}>{html.escape(text)}</text>'


@dataclass(frozen=True, slots=True)
class _Cell:
    job: str
    rank: str
    solid: bool


def _cells(node: NodeView, view: PhaseView) -> list[_Cell]:
    """What each GPU of ``node`` is: used by a pod (solid) or held by a bound quota (hatched)."""
    out: list[_Cell] = []
    running_here = set(node.pod_gpus)
    for pod, gpus in sorted(node.pod_gpus.items()):
        v = view.pods.get(pod)
        rank = f"w{v.index}" if v is not None and v.index is not None else ""
        out += [_Cell(v.job if v is not None else "", rank, True)] * gpus
    claimant = {v.quota: (key, v) for key, v in view.pods.items() if v.quota}
    for quota, gpus in sorted(node.quota_gpus.items()):
        key, v = claimant.get(quota, ("", None))
        if key in running_here:
            continue  # its pod's GPUs are drawn solid already
        rank = f"w{v.index}" if v is not None and v.index is not None else ""
        out += [_Cell(v.job if v is not None else "", rank, False)] * gpus
    return out[: node.gpus]


class _Panel:
    """One step's drawing, laid out at ``top``; :attr:`width`/:attr:`height` once drawn."""

    def __init__(self, step: StepRecord, colors: dict[str, str], top: float) -> None:
        self.step = step
        self.colors = colors
        self.top = top
        self.parts: list[str] = []
        self.width = 0.0
        self.height = 0.0

    def node_size(self, n: NodeView) -> tuple[float, float]:
        rows = -(-max(n.gpus, 1) // _COLS)
        grid = _COLS * (_CELL + _GAP) - _GAP
        width = max(grid, text_width(n.name, 11, bold=True), text_width(n.model, 9)) + 12
        return width, 38 + rows * (_CELL + _GAP) + 4

    def draw(self) -> _Panel:
        step, top = self.step, self.top
        title = f"step {step.index + 1}: {step.title}" if step.title else f"step {step.index + 1}"
        self.parts.append(_text(_MARGIN, top + 18, title, 14, font_weight="bold"))
        self.width = _MARGIN + text_width(title, 14, bold=True)
        leaves: dict[str, list[NodeView]] = {}
        for n in step.nodes:
            leaves.setdefault(n.leaf or "-", []).append(n)
        spine_of = {n.leaf or "-": n.spine for n in step.nodes}
        tiered = any(spine_of.values())
        if tiered:  # leaves grouped under their spines (in order of their first node), spines under the core
            order = list(dict.fromkeys(spine_of[leaf] for leaf in leaves))
            leaves = {leaf: leaves[leaf] for sp in order for leaf in leaves if spine_of[leaf] == sp}
        y_top = top + 32
        y_spine = y_top + 50 if tiered else y_top
        y_leaf = y_spine + 50
        y_nodes = y_leaf + 64
        x = float(_MARGIN)
        centres: dict[str, float] = {}
        bottom = y_nodes
        previous_spine: str | None = None
        for leaf, members in leaves.items():
            if tiered and previous_spine is not None and spine_of[leaf] != previous_spine:
                x += _LEAF_GAP  # a wider gap between spine groups
            previous_spine = spine_of[leaf]
            members.sort(key=lambda n: (n.index, n.name))
            sizes = [self.node_size(n) for n in members]
            inner = sum(w for w, _ in sizes) + _NODE_GAP * (len(members) - 1)
            label = f"leaf {leaf}"
            width = max(inner + 2 * _LEAF_PAD, text_width(label, 13) + 20)
            self.parts.append(
                f'<rect x="{x:.1f}" y="{y_leaf:.1f}" width="{width:.1f}" height="30" rx="6" fill="#3b3b3b"/>'
            )
            self.parts.append(_text(x + width / 2, y_leaf + 20, label, 13, fill="#fff", text_anchor="middle"))
            centres[leaf] = x + width / 2
            nx = x + (width - inner) / 2
            for n, (nw, nh) in zip(members, sizes, strict=True):
                self._node(n, nx, y_leaf + 30, y_nodes, w=nw, h=nh)
                bottom = max(bottom, y_nodes + nh)
                nx += nw + _NODE_GAP
            x += width + _LEAF_GAP
        leaves_right = x - _LEAF_GAP
        mid = (_MARGIN + leaves_right) / 2
        # each spine centred over its leaves; leaves under no spine hang from the top box
        links: list[tuple[float, float]] = [(c, y_leaf) for leaf, c in centres.items() if not spine_of[leaf]]
        for sp in dict.fromkeys(v for v in spine_of.values() if v):
            xs = [c for leaf, c in centres.items() if spine_of[leaf] == sp]
            centre = (min(xs) + max(xs)) / 2
            self._switch(centre, y_spine, f"spine {sp}", fill="#2f4f6f", links=[(c, y_leaf) for c in xs])
            links.append((centre, y_spine))
        self._switch(mid, y_top, "core" if tiered else "spine", fill="#222", links=links)
        self.width = max(self.width, leaves_right)
        self.height = self._legend(bottom + 28) - top
        return self

    def _switch(self, centre: float, y: float, label: str, *, fill: str, links: list[tuple[float, float]]) -> None:
        """A switch box of the upper tiers at ``centre``, with a line down to each point of ``links``."""
        width = max(120.0, text_width(label, 12) + 20)
        self.parts.append(
            f'<rect x="{centre - width / 2:.1f}" y="{y:.1f}" width="{width:g}" height="26" rx="6" fill="{fill}"/>'
        )
        self.parts.append(_text(centre, y + 18, label, 12, fill="#fff", text_anchor="middle"))
        for lx, ly in links:
            self.parts.append(
                f'<line x1="{centre:.1f}" y1="{y + 26:.1f}" x2="{lx:.1f}" y2="{ly:.1f}" '
                'stroke="#888" stroke-width="1.5"/>'
            )

    def _node(self, n: NodeView, x: float, y_link: float, y: float, *, w: float, h: float) -> None:
        cx = x + w / 2
        fill = "#fafafa" if n.ready else "#f3d6d6"
        self.parts.append(
            f'<line x1="{cx:.1f}" y1="{y_link:.1f}" x2="{cx:.1f}" y2="{y:.1f}" stroke="#888" stroke-width="1.5"/>'
        )
        self.parts.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" rx="5" fill="{fill}" stroke="#999"/>'
        )
        self.parts.append(_text(x + 6, y + 15, n.name, 11, font_weight="bold"))
        self.parts.append(_text(x + 6, y + 28, n.model + ("" if n.ready else " · NotReady"), 9, fill="#666"))
        cells = _cells(n, self.step.after_scheduler)
        gx0 = x + (w - (_COLS * (_CELL + _GAP) - _GAP)) / 2
        for i in range(n.gpus):
            r, c = divmod(i, _COLS)
            gx, gy = gx0 + c * (_CELL + _GAP), y + 36 + r * (_CELL + _GAP)
            cell = cells[i] if i < len(cells) else None
            if cell is None or cell.job not in self.colors:
                self.parts.append(
                    f'<rect class="gpu" x="{gx:.1f}" y="{gy:.1f}" width="{_CELL}" height="{_CELL}" rx="2" '
                    'fill="#fff" stroke="#bbb" stroke-width="0.5"/>'
                )
                continue
            colour = self.colors[cell.job]
            style = f'fill="{colour}"' if cell.solid else f'fill="url(#hatch-{colour[1:]})"'
            what = "uses" if cell.solid else "holds (quota bound, pod not running here)"
            tip = html.escape(f"{cell.job} {cell.rank} {what}")
            self.parts.append(
                f'<rect class="gpu" x="{gx:.1f}" y="{gy:.1f}" width="{_CELL}" height="{_CELL}" rx="2" {style} '
                f'stroke="#555" stroke-width="0.5"><title>{tip}</title></rect>'
            )
            if cell.rank:
                size = min(8.0, (_CELL - 2) / (len(cell.rank) * CHAR_WIDTH))
                ink = "#fff" if cell.solid else "#222"
                self.parts.append(
                    _text(
                        gx + _CELL / 2,
                        gy + _CELL / 2 + size / 3,
                        cell.rank,
                        round(size, 1),
                        fill=ink,
                        text_anchor="middle",
                    )
                )

    def _legend(self, y: float) -> float:
        step = self.step
        view = step.after_scheduler
        for job in sorted(step.jobs):
            pods = [(k, v) for k, v in view.pods.items() if v.job == job]
            placed = sum(1 for _, v in pods if v.node)
            leaves = ",".join(step.jobs[job].get("leaves") or []) or "-"
            colour = self.colors.get(job, "#999")
            if pods and placed == len(pods):
                line = f"{job} — {placed}/{len(pods)} pods on nodes — leaves {leaves}"
                launcher = " ".join(v.node for _, v in pods if v.launcher)
                if launcher:  # an MPIJob's launcher uses no GPU: no cell shows it
                    line += f" — launcher on {launcher}"
                spines = ",".join(step.jobs[job].get("spines") or [])
                if spines:
                    line += f" — spines {spines}"
                attrs: dict[str, str] = {}
            else:
                reasons = sorted({step.pending[k] for k, _ in pods if k in step.pending})
                why = f": {reasons[0]}" if reasons else ""
                line = f"{job} — PENDING, {placed}/{len(pods)} pods on nodes{why}"
                attrs = {"fill": _PENDING, "font_weight": "bold"}
                self.parts.append(
                    f'<rect x="{_MARGIN - 3}" y="{y - 14:.1f}" width="20" height="20" fill="none" stroke="{_PENDING}" '
                    'stroke-width="1.5" stroke-dasharray="3,2"/>'
                )
            self.parts.append(f'<rect x="{_MARGIN}" y="{y - 11:.1f}" width="14" height="14" fill="{colour}"/>')
            self.parts.append(_text(_MARGIN + 22, y, line, 12, **attrs))
            self.width = max(self.width, _MARGIN + 22 + text_width(line, 12, bold="font_weight" in attrs))
            y += 22
        return y + 6


def render_svg(result: SimulationResult, *, step: int | None = None) -> str:
    """One panel per step, or only step ``step`` (1-based)."""
    steps: Sequence[StepRecord] = result.steps
    if step is not None:
        if not 1 <= step <= len(steps):
            raise ValueError(f"--svg-step {step}: the scenario has steps 1 to {len(steps)}")
        steps = [steps[step - 1]]
    jobs = sorted({j for s in result.steps for j in s.jobs} | set(result.jobs))
    colors = {j: PALETTE[i % len(PALETTE)] for i, j in enumerate(jobs)}
    panels: list[_Panel] = []
    top = 8.0
    for s in steps:
        panel = _Panel(s, colors, top).draw()
        panels.append(panel)
        top += panel.height + 16
    note = (
        "solid: GPU used by the job's pod (wN: its rank) · hatched: held by the job's bound quota for a pod not "
        "running there · white: free · red node: NotReady"
    )
    width = max([p.width for p in panels] + [_MARGIN + text_width(note, 11)]) + _MARGIN
    separators = "".join(
        f'<line x1="{_MARGIN}" y1="{p.top - 8:.1f}" x2="{width - _MARGIN:.1f}" y2="{p.top - 8:.1f}" stroke="#ddd"/>'
        for p in panels[1:]
    )
    height = top + 14
    defs = "".join(
        f'<pattern id="hatch-{c[1:]}" width="5" height="5" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
        f'<rect width="5" height="5" fill="#fff"/><line x1="0" y1="0" x2="0" y2="5" stroke="{c}" stroke-width="3"/>'
        "</pattern>"
        for c in sorted(set(colors.values()))
    )
    title = html.escape(f"sky-scheduler simulate — {result.scenario.name}")
    body = "".join("".join(p.parts) for p in panels)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="Helvetica, Arial, sans-serif">'
        f"<title>{title}</title><defs>{defs}</defs>"
        f'<rect width="100%" height="100%" fill="#ffffff"/>{separators}{body}'
        f"{_text(_MARGIN, top, note, 11, fill='#555')}</svg>\n"
    )
