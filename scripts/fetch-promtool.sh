#!/usr/bin/env bash
# promtool, Prometheus' rule checker and rule unit tester, for test/deploy/alert-rules.test.ts
# (the chart's alerts evaluated over made-up series). No npm package ships it; Debian's
# `prometheus` package does: download it (not installed: no service, no system user) and
# unpack only promtool. Prints the binary's path. Idempotent: reuses .cache/promtool/promtool.
# `fetch-promtool.sh prometheus` unpacks the Prometheus server of the same package instead
# (.cache/prometheus/prometheus), for scripts/dashboard-screenshot.ts.
set -euo pipefail
cd "$(dirname "$0")/.."
tool=${1:-promtool}
case "$tool" in promtool|prometheus) ;; *) echo "usage: $0 [promtool|prometheus]" >&2; exit 2 ;; esac
target=.cache/$tool/$tool
if [ -x "$target" ]; then echo "$PWD/$target"; exit 0; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
(cd "$work" && apt-get download prometheus >/dev/null 2>&1)
dpkg-deb -x "$work"/prometheus_*.deb "$work/unpacked"
mkdir -p "$(dirname "$target")"
cp "$work/unpacked/usr/bin/$tool" "$target"
chmod +x "$target"
"$target" --version 2>&1 | head -1 >&2
echo "$PWD/$target"
