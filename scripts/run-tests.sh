#!/usr/bin/env bash
# `npm test [-- <file or folder>...]`: the suite, or the part named (a developer's inner loop),
# with node:test's TAP summary on stdout (what CI reads) and, at the end, the ten slowest files
# (each file's time in .test-timings.txt; issue 43). Files run TEST_CONCURRENCY at a time.
#
# The files run compiled (scripts/compile-tests.mjs: a tree under .test-build/ with each .ts's
# .js beside it), not under tsx: its loader cost about 1.1 s of CPU in each of some 500
# processes a run starts. Names in the output are the sources' (test/x.test.ts).
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
# One OAuth server for the whole run (test/helpers/oauth.ts startOAuthServer): each file
# starting its own cost 1.4 s of CPU, 109 times. Its stdin is this script's pipe, so it ends
# with the script however the script ends (OAUTH_SERVER_WATCH_STDIN).
if [ -z "${SB_TEST_ISSUER:-}" ]; then
  coproc ISSUER { OAUTH_SERVER_PORT=0 OAUTH_SERVER_WATCH_STDIN=1 exec "$node_bin" test/fixtures/oauth-server-process.js 2>&1; }
  issuer='' seen=''
  # Its first line of JSON names the issuer; anything before it (a warning) is kept for the message.
  while [ -z "$issuer" ] && IFS= read -r -t 30 line <&"${ISSUER[0]}"; do
    issuer=$("$node_bin" -e 'try { const { issuer } = JSON.parse(process.argv[1]); if (typeof issuer === "string") process.stdout.write(issuer); } catch {}' "$line")
    [ -z "$issuer" ] && seen+="$line"$'\n'
  done
  if [ -z "$issuer" ]; then
    echo "the shared OAuth server did not announce its issuer within 30 s:" >&2
    printf '%s' "$seen" >&2
    exit 2
  fi
  export SB_TEST_ISSUER=$issuer
  # Keep reading its output, so a full pipe never stalls it.
  cat <&"${ISSUER[0]}" >&2 &
fi
"$node_bin" --test --test-concurrency="${TEST_CONCURRENCY:-1}" --test-timeout=900000 \
  --test-reporter=tap --test-reporter-destination=stdout \
  --test-reporter=./scripts/file-timings.mjs --test-reporter-destination="$root/.test-timings.txt" \
  "${compiled[@]}"
status=$?
cd "$root"
if [ -s .test-timings.txt ]; then
  echo "# the ten slowest test files (seconds; all of them in .test-timings.txt):" >&2
  head -n 10 .test-timings.txt | sed 's/^/#   /' >&2
fi
exit $status
