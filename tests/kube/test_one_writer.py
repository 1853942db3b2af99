"""Only one module writes to the Kubernetes API: ``extender/kube/writer.py``.

Everything else in the shipped packages may read (lists, gets, watches), and only through
``extender.kube.client.request`` or an ``ApiClient.call_api`` with the method ``"GET"`` spelled
out. A module that calls either with another method, or with a method computed at run time, fails
this test. So does one that calls the API's generated classes (``CoreV1Api(…)``), which would bypass
the writer's retries, conflict handling and metrics. The emulator (the apiserver stand-in)
is exempt: it serves the API rather than calling it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("extender", "webhooks", "discovery")
WRITER = Path("extender/kube/writer.py")
CLIENT = Path("extender/kube/client.py")  # defines request() itself
EXEMPT_DIRS = (Path("extender/emulator"),)
GENERATED_APIS = ("CoreV1Api", "CustomObjectsApi", "CoordinationV1Api", "AppsV1Api", "EventsV1Api")


def shipped_modules() -> list[Path]:
    out = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if rel in (WRITER, CLIENT) or any(d in rel.parents for d in EXEMPT_DIRS):
                continue
            out.append(rel)
    return out


def api_calls(source: str) -> list[tuple[int, str, str | None]]:
    """(line, what, method) for every API call in a module: ``client.request(api, METHOD, …)``
    and ``….call_api(path, METHOD, …)``; method None when it is not a string literal. Also the
    generated API classes, with what = their name."""
    tree = ast.parse(source)
    client_names = set()
    for node in ast.walk(tree):  # names under which extender.kube.client is imported
        if isinstance(node, ast.ImportFrom) and node.module == "extender.kube":
            client_names |= {a.asname or a.name for a in node.names if a.name == "client"}
        elif isinstance(node, ast.Import):
            client_names |= {a.asname for a in node.names if a.name == "extender.kube.client" and a.asname}
    found: list[tuple[int, str, str | None]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute):
            is_request = func.attr == "request" and isinstance(func.value, ast.Name) and func.value.id in client_names
            if is_request or func.attr == "call_api":
                arg = node.args[1] if len(node.args) > 1 else None
                method = arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None
                found.append((node.lineno, func.attr, method))
            elif func.attr in GENERATED_APIS:
                found.append((node.lineno, func.attr, None))
        elif isinstance(func, ast.Name) and func.id in GENERATED_APIS:
            found.append((node.lineno, func.id, None))
    return found


def test_every_api_call_outside_the_writer_is_a_read() -> None:
    modules = shipped_modules()
    assert len(modules) > 50  # the walk found the packages
    offenders = []
    reads = 0
    for rel in modules:
        for line, what, method in api_calls((ROOT / rel).read_text(encoding="utf-8")):
            if what in ("request", "call_api") and method == "GET":
                reads += 1
            else:
                offenders.append(f"{rel}:{line}: {what}({method or 'non-literal method'})")
    assert not offenders, "API writes outside extender/kube/writer.py:\n" + "\n".join(offenders)
    assert reads >= 4  # the informer's list and watch, discovery's node reads: the walk sees them


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('from extender.kube import client\nclient.request(api, "PATCH", p)', [(2, "request", "PATCH")]),
        ("from extender.kube import client as kc\nkc.request(api, m, p)", [(2, "request", None)]),
        ('import extender.kube.client as kc\nkc.request(api, "GET", p)', [(2, "request", "GET")]),
        ('api.call_api("/api/v1/pods", "DELETE")', [(1, "call_api", "DELETE")]),
        ("from kubernetes_asyncio import client\nclient.CoreV1Api(api)", [(2, "CoreV1Api", None)]),
        ('session.request("POST", url)', []),  # not the Kubernetes client: not this test's business
    ],
)
def test_the_scan_sees_writes_in_every_spelling(source: str, expected: list[tuple[int, str, str | None]]) -> None:
    assert api_calls(source) == expected


def test_every_writer_method_is_called_by_the_product() -> None:
    """A privilege exists for a path that uses it: every public method of ``KubeWriter`` (each
    makes calls of ``API_CALLS``, which the chart grants) is called somewhere in the shipped code
    (the writer itself and tests do not count). Before, ``evict_pod`` was called by nothing, yet
    serve held cluster-wide ``pods/eviction create``."""
    from extender.kube.writer import KubeWriter

    methods = {n for n, v in vars(KubeWriter).items() if callable(v) and not n.startswith("_")}
    called: set[str] = set()
    for path in shipped_modules():  # the writer itself not among them
        for node in ast.walk(ast.parse((ROOT / path).read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                called.add(node.func.attr)
    assert methods, "KubeWriter has no public methods?"
    assert not methods - called, f"KubeWriter methods nothing calls (drop them and their grants): {methods - called}"
