#!/usr/bin/env bash
# `npm test [-- <file or folder>...]`: the suite, or the part named (a developer's inner loop),
# with node:test's TAP summary on stdout (what CI reads) and, at the end, the ten slowest files
# (each file's time in .test-timings.txt; issue 43). Files run TEST_CONCURRENCY at a time (default 3
# on the 2-core build machine: a file often waits, and a third keeps the cores busy then — 787 s
# against 843 s at two, docs/testing.md; TEST_CONCURRENCY=1 runs them one after another).
#
# The files run compiled (scripts/compile-tests.mjs: a tree under .test-build/ with each .ts's
# .js beside it), not under tsx: its loader cost about 1.1 s of CPU in each of some 500
# processes a run starts. Names in the output are the sources' (the .ts).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
node_bin=${npm_node_execpath:-node}
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(test)
# Slowest first (test/timings.txt, a full run's .test-timings.txt): with files run side by side,
# the long ones must not start last. Files it does not know yet go after, in name order.
mapfile -t files < <(find "${targets[@]}" -name '*.test.ts' | sed 's#^\./##' | sort |
  awk -F'\t' 'NR == FNR { seconds[$2] = $1; next } { print ($0 in seconds ? seconds[$0] : 0) "\t" $0 }' test/timings.txt - |
  sort -t$'\t' -k1,1nr -s | cut -f2)
if [ ${#files[@]} -eq 0 ]; then
  echo "no *.test.ts under: ${targets[*]}" >&2
  exit 2
fi
tree=$("$node_bin" scripts/compile-tests.mjs) || { echo "compiling the tests failed" >&2; exit 2; }
trap 'rm -rf "$tree"' EXIT
cd "$tree"
compiled=("${files[@]/%.ts/.js}")
# Short files that change nothing the process shares run a few to a process, each in a suite of
# its own (scripts/group-tests.mjs): a process's module loading cost as much as such a file's
# tests. TEST_GROUPS=0 gives every file its own process.
mapfile -t compiled < <("$node_bin" scripts/group-tests.mjs "$tree" test/timings.txt "${compiled[@]}")
if [ ${#compiled[@]} -eq 0 ]; then
  echo "grouping the test files failed" >&2
  exit 2
fi
# The value of "<field>" in the first line of <log> that starts {"<field>":"…", once a shared
# server started in the background has written it; bounded at <seconds>. On timeout: the log
# to stderr, status 1.
ready_value() {
  local log=$1 field=$2 seconds=$3 what=$4 value=''
  for _ in $(seq 1 $((seconds * 10))); do
    value=$(grep -o -m1 "^{\"$field\":\"[^\"]*\"" "$log" 2>/dev/null | cut -d'"' -f4)
    [ -n "$value" ] && { echo "$value"; return 0; }
    sleep 0.1
  done
  echo "$what did not announce its $field within $seconds s; its output:" >&2
  cat "$log" >&2
  return 1
}
# One OAuth server for the whole run (test/helpers/oauth.ts startOAuthServer): each file
# starting its own cost 1.4 s of CPU, 109 times. Its stdin is this script's pipe, so it ends
# with the script however the script ends (OAUTH_SERVER_WATCH_STDIN); its output goes to a
# file, which nothing has to keep reading for it to go on.
if [ -z "${SB_TEST_ISSUER:-}" ]; then
  issuer_log="$tree/oauth-server.log"
  coproc ISSUER { OAUTH_SERVER_PORT=0 OAUTH_SERVER_WATCH_STDIN=1 exec "$node_bin" test/fixtures/oauth-server-process.js > "$issuer_log" 2>&1; }
  # Its ready line, {"issuer":…,"port":…}, names the issuer.
  SB_TEST_ISSUER=$(ready_value "$issuer_log" issuer 30 'the shared OAuth server') || exit 2
  export SB_TEST_ISSUER
fi
# One Chromium for the run's browser files (test/fixtures/browser-server-process.ts; each file
# connects, test/helpers/browser.ts): a launch cost about 3 s of CPU, 28 times. Started only
# when a file given drives a browser (scripts/uses-browser.mjs). Its stdin is a pipe from this
# script, so it closes Chromium and ends with the script, however the script ends.
if [ -z "${SB_TEST_BROWSER_WS:-}" ] && "$node_bin" scripts/uses-browser.mjs "${files[@]}"; then
  browser_log="$tree/browser-server.log"
  exec {browser_stdin}> >(exec "$node_bin" test/fixtures/browser-server-process.js > "$browser_log" 2>&1)
  # Its ready line, {"wsEndpoint":…}, names the browser.
  SB_TEST_BROWSER_WS=$(ready_value "$browser_log" wsEndpoint 60 'the shared browser') || exit 2
  export SB_TEST_BROWSER_WS
fi
# In this order (node --test would sort them by name): scripts/run-node-tests.mjs. Each file's
# CPU, its children's included, goes to .test-cpu.txt (scripts/file-cpu-probe.mjs).
: > "$root/.test-cpu.txt"
# The whole machine's CPU while the files run, from /proc/stat (proc(5)): what the files'
# figures miss (the runner, the shared OAuth server, processes reparented to init such as
# Chromium's renderers) and how much of the two cores stood idle. One line every 5 s,
# `<epoch s> <busy ticks> <idle ticks>`, read with builtins only (no process per sample).
machine_cpu() {
  local label user nice system idle iowait irq softirq steal rest
  while :; do
    read -r label user nice system idle iowait irq softirq steal rest < /proc/stat
    echo "$EPOCHSECONDS $((user + nice + system + irq + softirq + steal)) $((idle + iowait))"
    sleep 5
  done
}
machine_cpu > "$root/.test-machine-cpu.txt" 2>/dev/null &
sampler=$!
trap 'kill "$sampler" 2>/dev/null; rm -rf "$tree"' EXIT
SB_TEST_CPU_LOG="$root/.test-cpu.txt" "$node_bin" --import ./scripts/file-cpu-probe.mjs scripts/run-node-tests.mjs "${TEST_CONCURRENCY:-3}" 900000 "$root/.test-timings.txt" "${compiled[@]}"
status=$?
kill "$sampler" 2>/dev/null
if [ -n "${issuer_log:-}" ] && [ "$(wc -l < "$issuer_log")" -gt 1 ]; then
  echo "# what the shared OAuth server wrote besides its ready line (the last 50 lines):" >&2
  tail -n +2 "$issuer_log" | tail -n 50 | sed 's/^/#   /' >&2
fi
cd "$root"
if [ -s .test-timings.txt ]; then
  echo "# the ten slowest test files (seconds; all of them in .test-timings.txt):" >&2
  head -n 10 .test-timings.txt | sed 's/^/#   /' >&2
fi
if [ -s .test-cpu.txt ]; then
  sort -t$'\t' -k1,1nr -o .test-cpu.txt .test-cpu.txt
  echo "# CPU of the test files, with the processes each started: $(awk -F'\t' '{ s += $1 } END { printf "%.0f s in %d files", s, NR }' .test-cpu.txt); the ten heaviest (all, own, children; all in .test-cpu.txt):" >&2
  head -n 10 .test-cpu.txt | cut -f1-4 | sed 's/^/#   /' >&2
fi
if [ "$(wc -l < .test-machine-cpu.txt 2>/dev/null || echo 0)" -gt 1 ]; then
  # USER_HZ is 100 on Linux: ticks / 100 = seconds of one core.
  awk -v cores="$(nproc)" 'NR == 1 { t0 = $1; b0 = $2; i0 = $3 } { t = $1; b = $2; i = $3 }
    END { busy = (b - b0) / 100; idle = (i - i0) / 100; printf "# the machine while the files ran (%d s, %d cores): %.0f s of CPU busy, %.0f s idle (%.0f %% busy; every process on it, not only the tests)\n", t - t0, cores, busy, idle, 100 * busy / (busy + idle) }' .test-machine-cpu.txt >&2
fi
if [ -s .test-cpu.txt ] && [ -s .test-machine-cpu.txt ]; then
  "$node_bin" scripts/test-timeline.mjs .test-cpu.txt .test-machine-cpu.txt "${TEST_CONCURRENCY:-3}" >&2
fi
exit $status
