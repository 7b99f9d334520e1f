package adminui_test

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// docsScreenshotShows are the sources of what docs/screenshots/payments.png
// shows: the shell with its navigation, the payments list, their styles.
var docsScreenshotShows = []string{
	"admin-ui/src/main.ts",
	"admin-ui/src/routes.ts",
	"admin-ui/src/ui.ts",
	"admin-ui/src/style.css",
	"admin-ui/src/views/payments.ts",
}

// The README shows docs/screenshots/payments.png; a change to the screens
// it shows, committed after it, makes it stale (it once lacked the Refunds
// item of the navigation). `task ui-screenshot` takes it again with the
// browser test; commit it with (or after) the change.
func TestDocsScreenshotIsNotOlderThanTheScreensItShows(t *testing.T) {
	t.Parallel()
	shot := lastCommitTime(t, "docs/screenshots/payments.png")
	for _, src := range docsScreenshotShows {
		changed := lastCommitTime(t, src)
		require.False(t, shot.Before(changed),
			"docs/screenshots/payments.png (committed %s) is older than %s (committed %s): run task ui-screenshot and commit the picture",
			shot.Format(time.RFC3339), src, changed.Format(time.RFC3339))
	}
}

// lastCommitTime is the commit time of the last commit that touched path.
func lastCommitTime(t *testing.T, path string) time.Time {
	t.Helper()
	out, err := exec.Command("git", "-C", "..", "log", "-1", "--format=%ct", "--", path).Output()
	require.NoError(t, err, "git log %s: the check needs the git history of a checkout", path)
	s := strings.TrimSpace(string(out))
	require.NotEmpty(t, s, "%s was never committed", path)
	sec, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err)
	return time.Unix(sec, 0)
}
