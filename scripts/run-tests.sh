#!/usr/bin/env bash
# `npm test [-- <file or folder>...]`: the suite, or the part named (a developer's inner loop),
# with node:test's TAP summary on stdout (what CI reads) and, at the end, the ten slowest files
# (each file's time in .test-timings.txt; issue 43). Files run TEST_CONCURRENCY at a time.
set -uo pipefail
cd "$(dirname "$0")/.."
node_bin=${npm_node_execpath:-node}
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(test)
# Slowest first (test/timings.txt, a full run's .test-timings.txt): with files run side by side,
# the long ones must not start last. Files it does not know yet go after, in name order.
mapfile -t files < <(find "${targets[@]}" -name '*.test.ts' | sort |
  awk -F'\t' 'NR == FNR { seconds[$2] = $1; next } { print ($0 in seconds ? seconds[$0] : 0) "\t" $0 }' test/timings.txt - |
  sort -t$'\t' -k1,1nr -s | cut -f2)
if [ ${#files[@]} -eq 0 ]; then
  echo "no *.test.ts under: ${targets[*]}" >&2
  exit 2
fi
"$node_bin" --import tsx --test --test-concurrency="${TEST_CONCURRENCY:-1}" --test-timeout=900000 \
  --test-reporter=tap --test-reporter-destination=stdout \
  --test-reporter=./scripts/file-timings.mjs --test-reporter-destination=.test-timings.txt \
  "${files[@]}"
status=$?
if [ -s .test-timings.txt ]; then
  echo "# the ten slowest test files (seconds; all of them in .test-timings.txt):" >&2
  head -n 10 .test-timings.txt | sed 's/^/#   /' >&2
fi
exit $status
