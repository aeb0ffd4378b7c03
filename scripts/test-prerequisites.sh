#!/usr/bin/env bash
# What the integration tests need besides npm packages: a redis-server binary (tests start
# their own servers on free loopback ports; with a Docker engine they use testcontainers)
# and Debian's chromium at /usr/bin/chromium (browser tests drive it with playwright-core), and
# openssl (a test makes a throwaway certificate for an https collector).
# Installs them from Debian packages when missing and we may (root or passwordless sudo).
set -euo pipefail

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
((${#missing[@]})) || exit 0

if [ "$(id -u)" -eq 0 ]; then
  sudo=''
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  sudo='sudo -n'
else
  echo "tests need: ${missing[*]} — install with: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "tests need: ${missing[*]} (no apt-get here; install it with your package manager)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
