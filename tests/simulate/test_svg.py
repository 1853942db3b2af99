"""The SVG picture tells the steps (issue 21): one panel per step (or ``--svg-step N``), nodes in
index order within their leaf, the rank of each pod on its GPU cells, pending jobs marked, and no
two texts overlapping — checked on the 3-leaf example and on long node and GPU model names.

Text extents are estimated here independently of the renderer: ``font-size × characters × 0.65``
wide (×1.1 for bold; Helvetica's mixed-case average is about 0.55 em, capitals up to 0.72 em),
from ``0.8 × font-size`` above the baseline to ``0.2 ×`` below, placed by ``text-anchor``."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from itertools import combinations
from pathlib import Path

import pytest
import yaml

from tests.cli_process import run_cli

ROOT = Path(__file__).resolve().parents[2]
NS = "{http://www.w3.org/2000/svg}"
CHAR = 0.65

LONG_NAMES = {
    "name": "long-names",
    "description": "node and GPU model names longer than a node's GPU grid, listed out of index order",
    "defaults": {"gpuModel": "NVIDIA-H100-80GB-HBM3", "gpus": 8, "rdma": 8},
    "leaves": [
        {"name": "leaf-switch-rack07-a", "nodes": ["dgx-h100-rack07-unit-10", "dgx-h100-rack07-unit-2"]},
        {"name": "leaf-switch-rack07-b", "nodes": ["dgx-h100-rack07-unit-11", "dgx-h100-rack07-unit-1"]},
    ],
    "queues": [{"name": "research"}],
    "quotas": [{"name": "q-{i}", "count": 2, "queue": "research", "request": {"nvidia.com/gpu": 8, "rdma/hca": 8}}],
    "steps": [
        {
            "title": "a two-node job of whole nodes",
            "jobs": [{"name": "pretrain", "workers": 2, "request": {"nvidia.com/gpu": 8, "rdma/hca": 8}}],
        },
        {
            "title": "a job that cannot fit",
            "jobs": [{"name": "toobig", "workers": 4, "request": {"nvidia.com/gpu": 8, "rdma/hca": 8}}],
        },
    ],
}


def _svg(tmp_path: Path, scenario: str, *extra: str) -> ET.Element:
    out = tmp_path / "p.svg"
    r = run_cli("simulate", scenario, "--quiet", "--svg", str(out), *extra, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return ET.fromstring(out.read_text())


def _texts(root: ET.Element) -> list[tuple[str, float, float, float, float]]:
    """(text, left, top, right, bottom) of every <text>."""
    boxes = []
    for t in root.iter(f"{NS}text"):
        text = "".join(t.itertext())
        size = float(t.get("font-size", "12"))
        width = len(text) * size * CHAR * (1.1 if t.get("font-weight") == "bold" else 1.0)
        x, y = float(t.get("x", "0")), float(t.get("y", "0"))
        left = {"middle": x - width / 2, "end": x - width}.get(t.get("text-anchor", "start"), x)
        boxes.append((text, left, y - 0.8 * size, left + width, y + 0.2 * size))
    return boxes


def _overlaps(root: ET.Element) -> list[tuple[str, str]]:
    return [
        (a[0], b[0])
        for a, b in combinations(_texts(root), 2)
        if a[1] < b[3] and b[1] < a[3] and a[2] < b[4] and b[2] < a[4]
    ]


def _panel_titles(root: ET.Element) -> list[str]:
    return [t for t, *_ in _texts(root) if t.startswith("step ")]


@pytest.fixture
def long_names(tmp_path: Path) -> str:
    path = tmp_path / "long-names.yaml"
    path.write_text(yaml.safe_dump(LONG_NAMES))
    return str(path)


def test_three_leaves_one_panel_per_step_and_no_text_overlaps(tmp_path: Path) -> None:
    root = _svg(tmp_path, str(ROOT / "examples" / "scenarios" / "gang-spans-leaves.yaml"))
    steps = yaml.safe_load((ROOT / "examples" / "scenarios" / "gang-spans-leaves.yaml").read_text())["steps"]
    assert len(_panel_titles(root)) == len(steps)
    assert sum(1 for t, *_ in _texts(root) if t.startswith("leaf ")) == 3 * len(steps)
    assert _overlaps(root) == []


def test_long_names_do_not_overlap_and_nodes_are_in_index_order(tmp_path: Path, long_names: str) -> None:
    root = _svg(tmp_path, long_names)
    assert _overlaps(root) == []
    texts = _texts(root)
    first_panel_bottom = next(b[2] for b in texts if b[0].startswith("step 2"))
    names = [(left, t) for t, left, top, *_ in texts if t.startswith("dgx-") and top < first_panel_bottom]
    # within each leaf, ascending index (unit-2 before unit-10; unit-1 before unit-11), leaves in order
    assert [t for _, t in sorted(names)] == [
        "dgx-h100-rack07-unit-2",
        "dgx-h100-rack07-unit-10",
        "dgx-h100-rack07-unit-1",
        "dgx-h100-rack07-unit-11",
    ]
    # the job that cannot fit is marked pending, with kube-scheduler's reason
    pending = [t for t, *_ in texts if "PENDING" in t]
    assert len(pending) == 1 and pending[0].startswith("default/toobig — PENDING, 0/4 pods on nodes: ")


def test_ranks_on_cells_and_one_step_with_svg_step(tmp_path: Path) -> None:
    root = _svg(tmp_path, "seed-8-node", "--svg-step", "1")
    assert _panel_titles(root) == ["step 1: submit job default/train (4 workers × 1 GPU + 1 HCA, minMember 4)"]
    cells = [r for r in root.iter(f"{NS}rect") if r.get("class") == "gpu"]
    assert len(cells) == 8 * 8
    used = [r for r in cells if r.get("fill") != "#fff"]
    assert len(used) == 4  # train's four workers, one GPU each
    ranks = sorted(t for t, *_ in _texts(root) if t.startswith("w") and t[1:].isdigit())
    assert ranks == ["w0", "w1", "w2", "w3"]
    assert _overlaps(root) == []


def test_svg_step_out_of_range_is_a_clear_error(tmp_path: Path) -> None:
    r = run_cli("simulate", "--quiet", "--svg", str(tmp_path / "x.svg"), "--svg-step", "9", timeout=60, cwd=ROOT)
    assert r.returncode == 2 and "--svg-step 9" in r.stderr and "steps 1 to 3" in r.stderr
    assert not (tmp_path / "x.svg").exists()


def test_the_readme_picture_is_step_one_of_the_embedded_default_and_up_to_date(tmp_path: Path) -> None:
    """docs/img/seed-8-node.svg = ``sky-scheduler simulate --svg … --svg-step 1`` (the step after
    the first job: before the drift, so the picture matches the README's text)."""
    out = tmp_path / "now.svg"
    r = run_cli("simulate", "--quiet", "--svg", str(out), "--svg-step", "1", cwd=ROOT)
    assert r.returncode == 0, r.stderr
    committed = (ROOT / "docs" / "img" / "seed-8-node.svg").read_text()
    assert committed == out.read_text(), (
        "docs/img/seed-8-node.svg is stale: sky-scheduler simulate --svg docs/img/seed-8-node.svg --svg-step 1"
    )
