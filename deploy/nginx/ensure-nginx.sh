#!/usr/bin/env bash
# Installs what deploy/nginx_test.go needs to run the reverse-proxy example:
# Debian's nginx (apt-get, only as root) when no nginx binary is found.
# PAYMENTD_NGINX names a binary to use instead. Prints the binary's path on
# stdout; every failure is one line on stderr saying what to install.
set -euo pipefail

fail() { echo "deploy/nginx: $*" >&2; exit 1; }

find_nginx() {
  if [ -n "${PAYMENTD_NGINX:-}" ]; then
    [ -x "$PAYMENTD_NGINX" ] && { echo "$PAYMENTD_NGINX"; return 0; }
    return 1
  fi
  command -v nginx 2>/dev/null && return 0
  [ -x /usr/sbin/nginx ] && { echo /usr/sbin/nginx; return 0; }
  return 1
}

if find_nginx; then exit 0; fi
[ -z "${PAYMENTD_NGINX:-}" ] || fail "PAYMENTD_NGINX=$PAYMENTD_NGINX is not an executable"
[ "$(id -u)" = 0 ] || fail "nginx is missing: install Debian's nginx as root (apt-get install -y nginx) or set PAYMENTD_NGINX"

# One install at a time (go test may run this from several tests).
if command -v flock >/dev/null 2>&1; then
  exec 9>"${TMPDIR:-/tmp}/paymentd-nginx-install.lock"
  flock 9
  if find_nginx; then exit 0; fi
fi
echo "deploy/nginx: apt-get install nginx" >&2
export DEBIAN_FRONTEND=noninteractive
{ apt-get update -qq && apt-get install -y -qq --no-install-recommends nginx; } >&2 ||
  fail "apt-get install nginx failed"
find_nginx || fail "nginx was installed but no nginx binary is on PATH or in /usr/sbin"
