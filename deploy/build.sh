#!/bin/sh
# Builds paymentd into OUTPUT the one way every build of this repository
# does: ./run.sh, task build, deploy/Containerfile and the benchmark's
# release build. The flags never vary, so Go's build cache serves any
# clone at any path: -trimpath leaves the clone's directory out of what is
# compiled (without it each new path recompiles the project's packages),
# CGO_ENABLED=0 makes a static binary, -tags grpcnotrace leaves out
# golang.org/x/net/trace (docs/performance.md, "Idle RSS"). The version and
# commit go in with -ldflags -X (linking only: they change no compiled
# package); PAYMENTD_VERSION and PAYMENTD_COMMIT override what git says
# (an image built from a context without .git).
#
#   deploy/build.sh OUTPUT
set -eu
out=${1:?usage: deploy/build.sh OUTPUT}
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
root="$(cd "$(dirname "$0")/.." && pwd)"
version=${PAYMENTD_VERSION:-$("$root/deploy/version.sh")}
commit=${PAYMENTD_COMMIT:-$(git -C "$root" rev-parse HEAD 2>/dev/null || true)}
cd "$root"
CGO_ENABLED=0 exec go build -trimpath -tags grpcnotrace \
	-ldflags "-s -w -X main.buildVersion=$version -X main.buildCommit=$commit" \
	-o "$out" ./cmd/paymentd
