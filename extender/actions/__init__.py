"""The action registry: policy name → action class. Explicit, no import side effects.

``fix_quota_binding`` runs first (it corrects the picture the others work on); hop ① is
``allocate_job``; ``release_idle_quota`` gives back the quotas nothing claims or reserves, so that
hop ② — ``allocate_zone`` then ``allocate_quota`` — plans with their room; ``release_quota`` cleans
up (the jobs that cannot be placed, and idle quotas if ``release_idle_quota`` did not run).
Hop ③ (bind), ``reclaim`` (preempt) and ``backfill`` (spot) run per pod in the extender verbs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from extender.actions import (
    allocate_job,
    allocate_quota,
    allocate_zone,
    fix_quota_binding,
    release_idle_quota,
    release_quota,
)
from extender.framework.plugin import ActionClass

ACTIONS: Final[Mapping[str, ActionClass]] = {
    fix_quota_binding.NAME: fix_quota_binding.Action,
    allocate_job.NAME: allocate_job.Action,
    release_idle_quota.NAME: release_idle_quota.Action,
    allocate_zone.NAME: allocate_zone.Action,
    allocate_quota.NAME: allocate_quota.Action,
    release_quota.NAME: release_quota.Action,
}
