"""Fixtures of the discovery tests: captured inputs, a fake sysfs, the LLDP network-namespace lab."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from extender.emulator import Emulator
from tests.discovery.kube_helpers import CRD
from tests.discovery.lldp_lab import LldpLab, lab_unavailable_reason

FIXTURES = Path(__file__).parent.parent / "fixtures" / "discovery"


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture
def lab() -> Iterator[LldpLab]:
    """A fresh, empty LLDP lab, torn down after the test (processes, namespaces, files)."""
    reason = lab_unavailable_reason()
    if reason:
        pytest.skip(reason)
    with LldpLab() as the_lab:
        yield the_lab


@pytest.fixture
def emulator(tmp_path: Path) -> Iterator[tuple[Emulator, Path]]:
    """The project's Kubernetes API emulator (background thread, real HTTP) with the NodeTopology
    CRD applied, and a kubeconfig for it."""
    with Emulator() as emu:
        emu.load_yaml(CRD)
        yield emu, emu.write_kubeconfig(tmp_path / "kubeconfig")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Skip netns tests, with the reason, only when the lab cannot run here (not root, no lldpd)."""
    reason = lab_unavailable_reason()
    if reason is None:
        return
    for item in items:
        if "netns" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=reason))
