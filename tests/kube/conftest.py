"""Fixtures for the Kubernetes plumbing tests: the emulator with the project's API group served
by small stand-in CRDs (the real CRDs' schemas are not what these tests are about)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from extender import wellknown
from extender.emulator import Emulator


def stand_in_crd(plural: str, kind: str, *, namespaced: bool, short_names: tuple[str, ...] = ()) -> dict[str, Any]:
    """A CRD of our group with free-form spec/status and the status subresource."""
    free = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    names: dict[str, Any] = {"plural": plural, "singular": kind.lower(), "kind": kind}
    if short_names:
        names["shortNames"] = list(short_names)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{wellknown.GROUP}"},
        "spec": {
            "group": wellknown.GROUP,
            "scope": "Namespaced" if namespaced else "Cluster",
            "names": names,
            "versions": [
                {
                    "name": wellknown.VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": free, "status": free}}},
                }
            ],
        },
    }


STAND_IN_CRDS = (
    stand_in_crd(wellknown.QUOTAS, wellknown.KIND_QUOTA, namespaced=False, short_names=("qo",)),
    stand_in_crd(wellknown.PODGROUPS, wellknown.KIND_PODGROUP, namespaced=True),
    stand_in_crd(wellknown.NODETOPOLOGIES, wellknown.KIND_NODETOPOLOGY, namespaced=False),
    stand_in_crd(wellknown.QUEUES, wellknown.KIND_QUEUE, namespaced=False),
    stand_in_crd(wellknown.JOBQUEUES, wellknown.KIND_JOBQUEUE, namespaced=False),
)


@pytest.fixture(scope="module")
def emu_server() -> Iterator[Emulator]:
    with Emulator(bookmark_interval=0.2) as emu:
        emu.load(STAND_IN_CRDS)
        yield emu
