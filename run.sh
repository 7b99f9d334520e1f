#!/bin/sh
# The README's run command: builds paymentd (Go's build cache makes a rebuild
# take a few seconds) into .data/bin and runs `paymentd dev` in this process's
# place (exec), so Ctrl-C, SIGINT or SIGTERM sent to the process this command
# started reach paymentd itself: it stops gracefully, then stops the private
# PostgreSQL it started. Not `go run`: go run ignores SIGINT and dies of
# SIGTERM without passing either on. Not task: task compiles its own
# dependencies first. Arguments go to paymentd dev (--keep-db, --config FILE).
# deploy/build.sh builds as the image and the benchmark do (-trimpath and
# the same flags each time, so the build cache serves a clone at any path;
# the version from git describe).
set -eu
cd "$(dirname "$0")"
mkdir -p .data/bin
deploy/build.sh .data/bin/paymentd
exec .data/bin/paymentd dev "$@"
