#!/usr/bin/env bash
# Installs what the admin console's build and end-to-end test need, so that
# `task test` works on a fresh machine:
#
#   ensure-deps.sh            npm ci in admin-ui/ unless node_modules already
#                             matches package-lock.json
#   ensure-deps.sh --browser  the same, and Debian's chromium (apt-get, only as
#                             root) when /usr/bin/chromium is missing
#
# Browsers are never downloaded by a tool of their own (no `playwright
# install`): the test drives the system's Chromium through playwright-core.
# Every failure is one line on stderr saying what to install.
set -euo pipefail
cd "$(dirname "$0")"

fail() { echo "admin-ui: $*" >&2; exit 1; }

command -v node >/dev/null 2>&1 || fail "node is not installed: Node.js 20.19 or newer is needed (Debian: apt-get install -y nodejs npm)"
command -v npm >/dev/null 2>&1 || fail "npm is not installed (Debian: apt-get install -y npm)"
node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a===20&&b>=19)?0:1)' ||
  fail "Node.js $(node --version) is too old: 20.19 or newer is needed"

# One npm ci at a time (go test runs packages in parallel with task steps).
if command -v flock >/dev/null 2>&1; then
  exec 9>"${TMPDIR:-/tmp}/paymentd-admin-ui-npm.lock"
  flock 9
fi
stamp=node_modules/.paymentd-lock-sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "admin-ui: npm ci" >&2
  npm ci --no-audit --no-fund --loglevel=error >&2 || fail "npm ci failed (is the npm registry reachable?)"
  echo "$want" >"$stamp"
fi

if [ "${1:-}" = "--browser" ]; then
  chromium=${PAYMENTD_CHROMIUM:-/usr/bin/chromium}
  if [ ! -x "$chromium" ]; then
    [ "$(id -u)" = 0 ] || fail "$chromium is missing: install Debian's chromium as root (apt-get install -y chromium)"
    echo "admin-ui: apt-get install chromium" >&2
    export DEBIAN_FRONTEND=noninteractive
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium; } >&2 ||
      fail "apt-get install chromium failed"
    [ -x "$chromium" ] || fail "chromium was installed but $chromium is still missing"
  fi
fi
