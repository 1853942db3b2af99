"""Fixtures of the webhook tests: one test CA and serving certificate per session."""

from __future__ import annotations

import pytest

from tests.webhooks.tls import TlsFiles, make_tls


@pytest.fixture(scope="session")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls(tmp_path_factory.mktemp("webhook-tls"))
