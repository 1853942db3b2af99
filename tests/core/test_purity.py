"""The pure core stays pure (DESIGN §5): model, framework, plugins and actions do no I/O, read no
clock and draw no random numbers — the session's ``now`` is the clock, and a committed statement
only *returns* write intents, the one writer module performs them. Checked on the imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PURE = ["extender/model", "extender/framework", "extender/plugins", "extender/actions"]
FORBIDDEN = {
    # clocks and randomness
    "time", "datetime", "random", "secrets", "uuid",
    # I/O, processes, network
    "os", "io", "socket", "subprocess", "threading", "asyncio", "shutil", "pathlib", "urllib", "http",
    "httpx", "requests", "aiohttp", "kubernetes_asyncio", "kubernetes",
    # the project's impure parts
    "extender.kube", "extender.cache", "extender.emulator", "extender.binder", "extender.service",
    "extender.serve", "extender.cli", "webhooks", "discovery",
}  # fmt: skip


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


FILES = sorted(p for d in PURE for p in (ROOT / d).rglob("*.py"))


def test_there_is_something_to_check() -> None:
    assert len(FILES) > 30


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_pure_core_module_imports_nothing_impure(path: Path) -> None:
    bad = sorted(m for m in imported_modules(path) if any(m == f or m.startswith(f + ".") for f in FORBIDDEN))
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}"
