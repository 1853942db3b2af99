# syntax=docker/dockerfile:1
#
# One image for every entry point of the `sky-scheduler` console script:
#   serve            the extender + webhook + binder (Helm chart: scheduler Deployment)
#   discover roce    the per-node RoCE agent (DaemonSet; also runs `lldpd` as its sidecar)
#   discover ib      the InfiniBand collector (Deployment)
#
#   docker build -t sky-scheduler:0.1.0 .
#
# The build stage makes wheels of the project and of every dependency; the runtime stage installs
# them without network access to PyPI and without compilers.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---------------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS builder

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1

WORKDIR /src
# Only what the wheel is built from (.dockerignore keeps the rest of the tree out of the context).
# extender/crds is a symlink to ../crds: both are copied.
COPY pyproject.toml ./
COPY crds/ crds/
COPY extender/ extender/
COPY webhooks/ webhooks/
COPY discovery/ discovery/
RUN pip wheel --wheel-dir /wheels .

# ---------------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime

# Fixed IDs for lldpd's privilege-separation user: the chart's RoCE agent joins this group to use
# the sidecar's control socket (discovery.roce.lldpd.socketGroup). A system UID (100-999), so the
# lldpd package's `adduser --system` accepts the existing user.
ARG LLDPD_UID=999

LABEL org.opencontainers.image.title="sky-scheduler" \
      org.opencontainers.image.description="Topology- and quota-aware scheduler extender, webhook and RDMA discovery agents" \
      org.opencontainers.image.licenses="Apache-2.0"

# lldpd:            lldpcli for the RoCE agent, and the lldpd daemon the chart's sidecar runs
#                   (same package, so both speak the same control-socket protocol)
# iproute2:         `rdma -j link`
# infiniband-diags: `ibnetdiscover`
# lldpcli is installed plain 0755 instead of Debian's setuid-_lldpd 4750 root:adm: the agent runs
# with no_new_privs and reaches the socket through the _lldpd group instead.
# policy-rc.d keeps the package scripts from starting lldpd during the build.
RUN set -eux; \
    groupadd --system --gid "${LLDPD_UID}" _lldpd; \
    useradd --system --uid "${LLDPD_UID}" --gid _lldpd --home-dir /run/lldpd --no-create-home \
        --shell /usr/sbin/nologin _lldpd; \
    dpkg-statoverride --add root root 0755 /usr/sbin/lldpcli; \
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; \
    chmod 0755 /usr/sbin/policy-rc.d; \
    apt-get update; \
    apt-get install -y --no-install-recommends lldpd iproute2 infiniband-diags; \
    rm -f /usr/sbin/policy-rc.d; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb; \
    groupadd --gid 65532 sky; \
    useradd --uid 65532 --gid sky --home-dir /nonexistent --no-create-home \
        --shell /usr/sbin/nologin sky

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Install from the builder's wheels only; the wheel directory is bind-mounted, not copied, so it
# leaves no layer behind.
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links=/wheels sky-scheduler \
    && sky-scheduler --help > /dev/null \
    && lldpcli -v && lldpd -v && rdma -V \
    && command -v ibnetdiscover

# numeric, so the kubelet can verify runAsNonRoot without reading /etc/passwd
USER 65532:65532
WORKDIR /
ENTRYPOINT ["sky-scheduler"]
CMD ["--help"]
