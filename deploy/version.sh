#!/bin/sh
# Prints the version the build scripts stamp into paymentd (deploy/build.sh,
# the image's org.opencontainers.image.version):
#   - `git describe` of the newest v* tag where one is reachable (v0.1.0, or
#     v0.1.0-3-g0123456789ab three commits later);
#   - else the newest release CHANGELOG.md names, because a tag may not reach
#     every clone: its heading `## v0.1.0 — <date>, commit <id>` gives the
#     version and its commit, and the same form follows (v0.1.0 at that
#     commit, v0.1.0-3-g0123456789ab three commits later); a heading without
#     a commit is the release's own commit, which cannot name itself;
#   - v0.0.0-<commits>-g<commit> before any release.
# -dirty when tracked files have uncommitted changes. Prints nothing outside
# a git checkout: the binary then falls back to what Go recorded (paymentd
# version).
set -eu
cd "$(dirname "$0")/.."
git rev-parse --verify -q HEAD >/dev/null 2>&1 || exit 0
if git describe --tags --match 'v[0-9]*' --dirty --abbrev=12 2>/dev/null; then
	exit 0
fi
dirty=""
git diff --quiet HEAD -- 2>/dev/null || dirty="-dirty"
short=$(git rev-parse --short=12 HEAD)
heading=$(grep -m1 -E '^## v[0-9]+\.[0-9]+\.[0-9]+' CHANGELOG.md 2>/dev/null || true)
if [ -n "$heading" ]; then
	version=$(printf '%s\n' "$heading" | sed -E 's/^## (v[0-9]+\.[0-9]+\.[0-9]+).*/\1/')
	commit=$(printf '%s\n' "$heading" | grep -oE '[0-9a-f]{40}' | head -n1 || true)
	n=0
	if [ -n "$commit" ]; then
		if ! git merge-base --is-ancestor "$commit" HEAD 2>/dev/null; then
			echo "deploy/version.sh: CHANGELOG.md names $version at commit $commit, which is not in this checkout's history" >&2
			exit 1
		fi
		n=$(git rev-list --count "$commit..HEAD")
	fi
	if [ "$n" -eq 0 ]; then
		echo "$version$dirty"
	else
		echo "$version-$n-g$short$dirty"
	fi
	exit 0
fi
echo "v0.0.0-$(git rev-list --count HEAD)-g$short$dirty"
