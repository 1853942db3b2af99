"""The Dockerfile and .dockerignore, checked without a Docker engine: they parse, the build stage
makes a wheel from sources that exist and are in the context, the runtime stage is slim, non-root
and runs the console script, and the Debian packages it installs exist in bookworm."""

from __future__ import annotations

import shutil
import subprocess
import tomllib

import pytest

from tests.deploy.chart import REPO, chart_values
from tests.deploy.dockerfile import (
    Dockerfile,
    DockerfileError,
    IgnoreRules,
    Stage,
    dockerignore_excludes,
    parse,
    parse_dockerignore,
    stage_args,
)

DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
APT_PACKAGES = {"lldpd", "iproute2", "infiniband-diags"}


@pytest.fixture(scope="module")
def df() -> Dockerfile:
    return parse(DOCKERFILE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def ignore() -> IgnoreRules:
    return parse_dockerignore(DOCKERIGNORE.read_text(encoding="utf-8"))


def _run_text(stage: Stage) -> str:
    return "\n".join(i.raw for i in stage.all("RUN"))


def test_parses_as_a_multi_stage_build(df: Dockerfile) -> None:
    assert df.directives.get("syntax", "").startswith("docker/dockerfile:1"), "BuildKit syntax (RUN --mount)"
    assert [s.name for s in df.stages] == ["builder", "runtime"]
    for stage in df.stages:
        assert stage.base.startswith("python:3.11-slim"), stage.base
        assert ":latest" not in stage.base


def test_builder_stage_builds_a_wheel(df: Dockerfile) -> None:
    builder = df.stage("builder")
    assert "pip wheel" in _run_text(builder)


def test_copy_sources_exist_and_are_in_the_build_context(df: Dockerfile, ignore: IgnoreRules) -> None:
    copied = []
    for stage in df.stages:
        for inst in stage.all("COPY"):
            if "from" in inst.flags:
                continue
            *sources, _dest = inst.words()
            for src in sources:
                path = REPO / src
                assert path.exists(), f"line {inst.line}: COPY source {src} does not exist"
                assert not dockerignore_excludes(ignore, src.rstrip("/")), f"line {inst.line}: {src} is .dockerignored"
                copied.append(src.rstrip("/"))
    # what the wheel needs: pyproject, the three packages and the CRDs extender/crds links to
    assert {"pyproject.toml", "extender", "webhooks", "discovery", "crds"} <= set(copied)
    link = REPO / "extender" / "crds"
    if link.is_symlink():
        target = (link.parent / link.readlink()).resolve().relative_to(REPO.resolve())
        assert str(target) in copied, "extender/crds is a symlink: its target must be copied too"
    packages = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"]
    for pattern in packages["find"]["include"]:
        assert pattern.rstrip("*") in copied, f"package {pattern} of pyproject.toml is not copied"


def test_dockerignore_keeps_the_context_small(ignore: IgnoreRules) -> None:
    for path in (
        "tests/deploy/test_dockerfile.py",
        "charts/sky-scheduler/values.yaml",
        ".git/config",
        "bench/x.py",
        ".tools/bin/helm",
        "extender/__pycache__/cli.cpython-311.pyc",
        "sky_scheduler.egg-info/PKG-INFO",
        ".venv/bin/python",
    ):
        assert dockerignore_excludes(ignore, path), path
    for path in (
        "pyproject.toml",
        "extender/cli.py",
        "extender/conf/default_policy.yaml",
        "crds/generate.py",
        "webhooks/app.py",
        "discovery/cli.py",
    ):
        assert not dockerignore_excludes(ignore, path), path


def test_runtime_installs_the_builders_wheels_only(df: Dockerfile) -> None:
    runtime = df.final
    installs = [i for i in runtime.all("RUN") if "pip install" in i.raw]
    assert len(installs) == 1
    inst = installs[0]
    assert "--no-index" in inst.raw, "no PyPI access at install time: wheels from the builder only"
    mounts = inst.flags.get("mount", [])
    from_builder = any("from=builder" in m for m in mounts) or any(
        c.flags.get("from") == ["builder"] for c in runtime.all("COPY")
    )
    assert from_builder, "the runtime stage must take its wheels from the builder stage"
    assert "gcc" not in _run_text(runtime) and "build-essential" not in _run_text(runtime)


def test_entrypoint_is_the_console_script(df: Dockerfile) -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    entry = df.final.last("ENTRYPOINT")
    assert entry is not None and entry.exec_form is not None, "ENTRYPOINT in exec (JSON) form"
    assert entry.exec_form == ["sky-scheduler"]
    assert scripts.get("sky-scheduler") == "extender.cli:main"


def test_runtime_user_is_numeric_and_not_root(df: Dockerfile) -> None:
    user = df.final.last("USER")
    assert user is not None, "the runtime stage must set USER"
    uid, _, gid = user.raw.partition(":")
    assert uid.isdigit() and int(uid) != 0, "numeric non-root UID (the kubelet checks runAsNonRoot by number)"
    assert not gid or (gid.isdigit() and int(gid) != 0)
    # the last USER is the one in effect: nothing after it switches back
    assert df.final.instructions[-1].line >= user.line
    # the chart runs the scheduler pod with the same UID
    assert int(uid) == 65532
    assert f"useradd --uid {uid}" in _run_text(df.final)


def test_runtime_packages(df: Dockerfile) -> None:
    text = _run_text(df.final)
    install = next(line for line in text.split(";") if "apt-get install" in line)
    words = set(install.split())
    assert words >= APT_PACKAGES, install
    assert "--no-install-recommends" in words
    assert "rm -rf /var/lib/apt/lists/*" in text


def test_lldpd_group_matches_the_charts_socket_group(df: Dockerfile) -> None:
    args = stage_args(df, df.final)
    gid = args.get("LLDPD_UID")
    assert gid is not None and gid.isdigit(), "ARG LLDPD_UID=<number> in the runtime stage"
    assert 100 <= int(gid) <= 999, "a system ID, so the lldpd package's `adduser --system` keeps the user"
    assert int(gid) == chart_values()["discovery"]["roce"]["lldpd"]["socketGroup"]
    text = _run_text(df.final)
    assert 'groupadd --system --gid "${LLDPD_UID}" _lldpd' in text
    # lldpcli without Debian's setuid bit: the agent runs with no_new_privs and uses the group
    assert "dpkg-statoverride --add root root 0755 /usr/sbin/lldpcli" in text
    assert text.index("dpkg-statoverride") < text.index("apt-get install")


def test_debian_packages_exist_in_bookworm() -> None:
    """`apt-cache policy` on a Debian bookworm machine with package lists (apt-get update)."""
    apt_cache = shutil.which("apt-cache")
    if apt_cache is None:
        pytest.skip("apt-cache not available: not a Debian machine")
    release = ""
    try:
        with open("/etc/os-release", encoding="utf-8") as f:
            release = f.read()
    except OSError:
        pass
    if "VERSION_CODENAME=bookworm" not in release:
        pytest.skip("not Debian bookworm (the base of python:3.11-slim-bookworm)")
    proc = subprocess.run([apt_cache, "policy", *sorted(APT_PACKAGES)], capture_output=True, text=True, check=False)
    candidates = dict.fromkeys(APT_PACKAGES, "")
    current = None
    for line in proc.stdout.splitlines():
        if not line.startswith(" ") and line.endswith(":"):
            current = line[:-1]
        elif current and line.strip().startswith("Candidate:"):
            candidates[current] = line.split(":", 1)[1].strip()
    if all(v in ("", "(none)") for v in candidates.values()):
        pytest.skip("no apt package lists here (run apt-get update)")
    missing = [p for p, v in candidates.items() if v in ("", "(none)")]
    assert not missing, f"not in the apt sources: {missing}"


@pytest.mark.parametrize(
    "text",
    [
        "FROM python:3.11-slim\nFETCH x\n",  # unknown instruction
        "RUN echo hi\n",  # before FROM
        "FROM a AS x\nFROM b AS x\n",  # duplicate stage name
        'FROM a\nENTRYPOINT ["x", 1]\n',  # exec form with a non-string
        "FROM a\nRUN echo \\\n",  # ends inside a continuation
        "ARG BASE\nFROM ${BASE}\n",  # global ARG without a value used in FROM
    ],
)
def test_parser_rejects_malformed_dockerfiles(text: str) -> None:
    with pytest.raises(DockerfileError):
        parse(text)


def test_parser_handles_continuations_comments_and_flags() -> None:
    df = parse(
        "# syntax=docker/dockerfile:1\nARG IMG=python:3.11-slim\nFROM ${IMG} AS b\n"
        "RUN --mount=type=bind,from=x,target=/w \\\n  # a comment inside\n  pip install a \\\n  && echo ok\n"
        'COPY --chown=1:1 a b /dst/\nUSER 10:10\nENTRYPOINT ["p"]\n'
    )
    (stage,) = df.stages
    assert stage.base == "python:3.11-slim" and stage.name == "b"
    run = stage.all("RUN")[0]
    assert run.flags == {"mount": ["type=bind,from=x,target=/w"]} and run.raw == "pip install a && echo ok"
    copy = stage.all("COPY")[0]
    assert copy.flags == {"chown": ["1:1"]} and copy.words() == ["a", "b", "/dst/"]
    entry = stage.last("ENTRYPOINT")
    assert entry is not None and entry.exec_form == ["p"]
