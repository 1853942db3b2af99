"""The plugin registry: policy name → plugin class. Explicit, no import side effects."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from extender.framework.plugin import PluginClass
from extender.plugins import (
    backoff,
    binpack,
    conformance,
    drf,
    gang,
    jobqueue,
    nodeorder,
    predicates,
    priority,
    quotaaffinity,
    quotapredicates,
    specpool,
    storage,
    sylas,
    topology,
)

PLUGINS: Final[Mapping[str, PluginClass]] = {
    m.NAME: m.Plugin
    for m in (
        priority,
        gang,
        drf,
        conformance,
        predicates,
        nodeorder,
        binpack,
        backoff,
        quotapredicates,
        quotaaffinity,
        topology,
        sylas,
        storage,
        specpool,
        jobqueue,
    )
}
