#!/bin/sh
# The README's run command: builds paymentd (Go's build cache makes a rebuild
# take a few seconds) into .data/bin and runs `paymentd dev` in this process's
# place (exec), so Ctrl-C, SIGINT or SIGTERM sent to the process this command
# started reach paymentd itself: it stops gracefully, then stops the private
# PostgreSQL it started. Not `go run`: go run ignores SIGINT and dies of
# SIGTERM without passing either on. Not task: task compiles its own
# dependencies first. Arguments go to paymentd dev (--keep-db, --config FILE).
# -tags grpcnotrace: as deploy/Containerfile (docs/performance.md, "Idle RSS").
set -eu
cd "$(dirname "$0")"
mkdir -p .data/bin
go build -tags grpcnotrace -o .data/bin/paymentd ./cmd/paymentd
exec .data/bin/paymentd dev "$@"
