#!/bin/sh
# Prints the version the build scripts stamp into paymentd (deploy/build.sh,
# the image's org.opencontainers.image.version): `git describe` of the
# newest v* tag (v1.2.0, or v1.2.0-3-g0123456789ab three commits later),
# and v0.0.0-<commits>-g<commit> while no tag exists; -dirty when tracked
# files have uncommitted changes. Prints nothing outside a git checkout:
# the binary then falls back to what Go recorded (paymentd version).
set -eu
cd "$(dirname "$0")/.."
git rev-parse --verify -q HEAD >/dev/null 2>&1 || exit 0
if git describe --tags --match 'v[0-9]*' --dirty --abbrev=12 2>/dev/null; then
	exit 0
fi
dirty=""
git diff --quiet HEAD -- 2>/dev/null || dirty="-dirty"
echo "v0.0.0-$(git rev-list --count HEAD)-g$(git rev-parse --short=12 HEAD)$dirty"
