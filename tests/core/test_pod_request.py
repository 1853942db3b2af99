"""A pod's effective request is kube-scheduler's (``k8s.io/component-helpers/resource``
``PodRequests``, the sidecar KEP 753 formula): the regular containers and every sidecar (an init
container with ``restartPolicy: Always``) together, or, if more, what any init container needs
while it runs — a regular init container runs beside the sidecars started before it. Before,
the sidecars were added in the order they came, so an init container after a sidecar was
counted without it (under-count: kubelet rejects the pod the extender let through) and one
before a sidecar was counted with it (over-count: a node that fits was refused)."""

from __future__ import annotations

from typing import Any, Literal

from hypothesis import given
from hypothesis import strategies as st

from extender.cache.convert import pod_request
from tests.core.props import PROPERTY

Container = tuple[str, int, int]  # (kind: "main" | "init" | "sidecar", cpu millicores, memory MiB)


def _pod(containers: list[Container]) -> dict[str, Any]:
    def spec(i: int, kind: str, cpu: int, mem: int) -> dict[str, Any]:
        c: dict[str, Any] = {"name": f"c{i}", "resources": {"requests": {"cpu": f"{cpu}m", "memory": f"{mem}Mi"}}}
        if kind == "sidecar":
            c["restartPolicy"] = "Always"
        return c

    mains = [spec(i, k, c, m) for i, (k, c, m) in enumerate(containers) if k == "main"]
    inits = [spec(i, k, c, m) for i, (k, c, m) in enumerate(containers) if k != "main"]
    return {"metadata": {"name": "p"}, "spec": {"containers": mains, "initContainers": inits}}


def oracle(containers: list[Container], field: Literal[1, 2]) -> int:
    """KEP 753: max(Σ containers + Σ sidecars, max over init containers i of InitContainerUse(i)),
    InitContainerUse(i) = Σ sidecars before i + the i-th's own (a sidecar's own is itself)."""
    steady = sum(c[field] for c in containers if c[0] in ("main", "sidecar"))
    peak, sidecars = 0, 0
    for c in (c for c in containers if c[0] != "main"):
        if c[0] == "sidecar":
            sidecars += c[field]
            peak = max(peak, sidecars)
        else:
            peak = max(peak, sidecars + c[field])
    return max(steady, peak)


containers = st.lists(
    st.tuples(st.sampled_from(["main", "init", "sidecar"]), st.integers(0, 4000), st.integers(0, 4096)),
    min_size=1,
    max_size=6,
)


@PROPERTY
@given(containers)
def test_pod_request_is_kube_schedulers(cs: list[Container]) -> None:
    req = pod_request(_pod(cs))
    assert req.get("cpu") == oracle(cs, 1)
    assert req.get("memory") == oracle(cs, 2) * 1024 * 1024


def test_an_init_container_after_a_sidecar_runs_beside_it() -> None:
    """istio-proxy as a native sidecar (1 CPU) and then a 4-CPU init container: 5 CPUs while it
    runs, more than the 1 + 1 CPUs the pod needs afterwards."""
    cs = [("sidecar", 1000, 0), ("init", 4000, 0), ("main", 1000, 0)]
    assert pod_request(_pod(cs)).get("cpu") == 5000


def test_an_init_container_before_a_sidecar_runs_alone() -> None:
    cs = [("init", 4000, 0), ("sidecar", 1000, 0), ("main", 1000, 0)]
    assert pod_request(_pod(cs)).get("cpu") == 4000


# --- pod-level resources (KEP 2837, beta and on by default from Kubernetes 1.34) ---------------
POD_LEVEL_NAMES = ("cpu", "memory", "hugepages-2Mi")
"""What ``spec.resources`` may set (component-helpers ``IsSupportedPodLevelResource``: cpu,
memory and every ``hugepages-*``); extended resources such as GPUs stay per container."""


def _pod_level_oracle(
    containers: dict[str, int], pod_level: dict[str, int], overhead: dict[str, int]
) -> dict[str, int]:
    """``PodRequests``: the containers' aggregate; when ``spec.resources.requests`` names a
    supported resource, each supported one it names replaces the aggregate's; then overhead."""
    out = dict(containers)
    if any(n in POD_LEVEL_NAMES for n in pod_level):
        out.update({n: v for n, v in pod_level.items() if n in POD_LEVEL_NAMES})
    for n, v in overhead.items():
        out[n] = out.get(n, 0) + v
    return out


amounts = st.dictionaries(st.sampled_from([*POD_LEVEL_NAMES, "nvidia.com/gpu"]), st.integers(0, 8), max_size=4)


@PROPERTY
@given(amounts, amounts, amounts)
def test_pod_level_requests_replace_the_containers_for_cpu_memory_hugepages(
    per_container: dict[str, int], pod_level: dict[str, int], overhead: dict[str, int]
) -> None:
    """A pod with ``spec.resources.requests`` is fit by kube-scheduler on those (cpu, memory,
    hugepages); a GPU request stays the containers'. Before, ``spec.resources`` was ignored: a
    pod asking 8 CPUs at pod level and none per container was placed as if it asked nothing."""
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": {n: str(v) for n, v in per_container.items()}}}],
        "resources": {"requests": {n: str(v) for n, v in pod_level.items()}},
    }
    if overhead:
        spec["overhead"] = {n: str(v) for n, v in overhead.items()}
    req = pod_request({"metadata": {"name": "p"}, "spec": spec})
    want = _pod_level_oracle(per_container, pod_level, overhead)
    for name in {*want, *per_container, *pod_level}:
        scale = 1000 if name in {"cpu", "nvidia.com/gpu"} else 1
        assert req.get(name) == want.get(name, 0) * scale, name


def test_pod_level_limits_alone_leave_the_containers_requests() -> None:
    """Only ``spec.resources.requests`` replaces (``IsPodLevelRequestsSet``); the API server
    defaults pod-level requests from pod-level limits before the scheduler sees the pod."""
    pod = {
        "metadata": {"name": "p"},
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
            "resources": {"limits": {"cpu": "4"}},
        },
    }
    assert pod_request(pod).get("cpu") == 1000


# --- in-place resize (InPlacePodVerticalScaling, on by default from Kubernetes 1.33) ------------
Resized = tuple[str, int, int | None, int | None]
"""(kind "main" | "init" | "sidecar", spec cpu, status.resources cpu or None (no
``resources`` in the container's status), allocatedResources cpu or None)."""


def _resize_oracle(cs: list[Resized], infeasible: bool) -> int:
    """kube-scheduler counts a pod on a node with ``UseStatusResources``: a container (or sidecar)
    whose status reports ``resources`` asks max(spec, actual, allocated) — max(actual, allocated)
    while the pod's resize is ``Infeasible`` —; a regular init container asks its spec."""

    def ask(spec: int, actual: int | None, allocated: int | None) -> int:
        if actual is None:
            return spec
        base = max(actual, allocated or 0)
        return base if infeasible else max(spec, base)

    steady = sum(ask(s, a, al) for k, s, a, al in cs if k in ("main", "sidecar"))
    peak, sidecars = 0, 0
    for k, s, a, al in (c for c in cs if c[0] != "main"):
        if k == "sidecar":
            sidecars += ask(s, a, al)
            peak = max(peak, sidecars)
        else:
            peak = max(peak, sidecars + s)
    return max(steady, peak)


resized = st.lists(
    st.tuples(
        st.sampled_from(["main", "init", "sidecar"]),
        st.integers(0, 4000),
        st.none() | st.integers(0, 4000),
        st.none() | st.integers(0, 4000),
    ),
    min_size=1,
    max_size=5,
)


@PROPERTY
@given(resized, st.booleans())
def test_a_resized_pod_counts_what_kube_scheduler_counts(cs: list[Resized], infeasible: bool) -> None:
    """A running pod shrunk in place keeps its old CPUs until kubelet actuates the resize; kube-
    scheduler counts max(spec, actual, allocated) per container meanwhile (component-helpers
    ``determineContainerReqs``). Before, only the spec counted: the node looked freer than kube-
    scheduler and kubelet see it, and a pod the extender let through was refused there."""
    specs: dict[str, list[dict[str, Any]]] = {"containers": [], "initContainers": []}
    statuses: dict[str, list[dict[str, Any]]] = {"containerStatuses": [], "initContainerStatuses": []}
    for i, (kind, spec, actual, allocated) in enumerate(cs):
        c: dict[str, Any] = {"name": f"c{i}", "resources": {"requests": {"cpu": f"{spec}m"}}}
        st_: dict[str, Any] = {"name": f"c{i}"}
        if actual is not None:
            st_["resources"] = {"requests": {"cpu": f"{actual}m"}}
        if allocated is not None:
            st_["allocatedResources"] = {"cpu": f"{allocated}m"}
        if kind == "sidecar":
            c["restartPolicy"] = "Always"
        specs["containers" if kind == "main" else "initContainers"].append(c)
        statuses["containerStatuses" if kind == "main" else "initContainerStatuses"].append(st_)
    status: dict[str, Any] = dict(statuses)
    if infeasible:
        status["conditions"] = [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]
    pod = {"metadata": {"name": "p"}, "spec": specs, "status": status}
    assert pod_request(pod).get("cpu") == _resize_oracle(cs, infeasible)
