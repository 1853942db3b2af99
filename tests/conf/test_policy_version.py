"""The policy file as a versioned configuration API: ``apiVersion`` / ``kind`` optional for now,
the known ones accepted, anything else a load error naming what this build reads."""

from __future__ import annotations

import pytest

from extender.conf import default_policy, default_policy_text, load_policy_text
from extender.framework.policy import POLICY_API_VERSION, POLICY_KIND, PolicyError

_BODY = "actions: [allocate_job]\nplugins: {gang: {}}\n"


def test_the_built_in_policy_declares_its_version() -> None:
    text = default_policy_text()
    assert f"apiVersion: {POLICY_API_VERSION}\n" in text and f"kind: {POLICY_KIND}\n" in text
    assert default_policy().action_names


@pytest.mark.parametrize(
    "header",
    [
        "",
        f"apiVersion: {POLICY_API_VERSION}\n",
        f"kind: {POLICY_KIND}\n",
        f"apiVersion: {POLICY_API_VERSION}\nkind: {POLICY_KIND}\n",
    ],
)
def test_version_and_kind_are_optional_and_change_nothing(header: str) -> None:
    policy = load_policy_text(header + _BODY, "p.yaml")
    assert policy.action_names == ("allocate_job",)
    assert set(policy.plugins) == {"gang"}


@pytest.mark.parametrize(
    ("header", "says"),
    [
        (
            "apiVersion: scheduling.infini-ai.com/v1\n",
            "apiVersion 'scheduling.infini-ai.com/v1' is not a policy version",
        ),
        ("apiVersion: kubescheduler.config.k8s.io/v1\n", f"known: {POLICY_API_VERSION}"),
        ("apiVersion: 1\n", "apiVersion 1 is not a policy version"),
        ("kind: KubeSchedulerConfiguration\n", "kind 'KubeSchedulerConfiguration' is not 'SchedulingPolicy'"),
        ("kind: [SchedulingPolicy]\n", "is not 'SchedulingPolicy'"),
    ],
)
def test_unknown_versions_and_kinds_are_load_errors(header: str, says: str) -> None:
    with pytest.raises(PolicyError, match=r"p\.yaml: ") as err:
        load_policy_text(header + _BODY, "p.yaml")
    assert says in str(err.value)


def test_other_unknown_keys_still_fail() -> None:
    with pytest.raises(PolicyError, match=r"unknown key\(s\) metadata \(known: apiVersion, kind, actions"):
        load_policy_text("metadata: {name: x}\n" + _BODY, "p.yaml")
