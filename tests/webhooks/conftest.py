"""Fixtures of the webhook tests: one CA and serving certificate per session.

The certificate comes from the same code the simulator serves with; it names the in-cluster
Service DNS name (what kube-apiserver checks in production) besides 127.0.0.1 and localhost.
"""

from __future__ import annotations

import pytest

from extender.simulate.certs import TLSFiles, write_self_signed

SERVICE_DNS = "sky-scheduler-webhook.kube-system.svc"


@pytest.fixture(scope="session")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    return write_self_signed(tmp_path_factory.mktemp("webhook-tls"), hosts=("127.0.0.1", "localhost", SERVICE_DNS))
