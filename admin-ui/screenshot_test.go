package adminui_test

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// consoleShell is what every picture shows around its screen: the shell
// with its navigation, and the styles.
var consoleShell = []string{"admin-ui/src/main.ts", "admin-ui/src/routes.ts", "admin-ui/src/ui.ts", "admin-ui/src/style.css"}

// docsScreenshots are the pictures under docs/screenshots and the sources of
// the screen each shows (consoleShell besides).
var docsScreenshots = map[string][]string{
	"docs/screenshots/payments.png": {
		"admin-ui/src/export_form.ts",
		"admin-ui/src/views/payments.ts",
	},
	"docs/screenshots/audit-log.png": {
		"admin-ui/src/audit_change.ts",
		"admin-ui/src/views/audit.ts",
	},
	"docs/screenshots/dashboard-money-to-return.png": {
		"admin-ui/src/trends.ts",
		"admin-ui/src/views/dashboard.ts",
		"admin-ui/src/views/payments.ts",
		"admin-ui/src/views/trends.ts",
	},
	"docs/screenshots/refunds.png": {
		"admin-ui/src/export_form.ts",
		"admin-ui/src/refund_outcome.ts",
		"admin-ui/src/views/refunds.ts",
	},
	"docs/screenshots/dashboard.png": {
		"admin-ui/src/trends.ts",
		"admin-ui/src/views/dashboard.ts",
		"admin-ui/src/views/trends.ts",
	},
	"docs/screenshots/renewals.png": {
		"admin-ui/src/renewals.ts",
		"admin-ui/src/views/renewals.ts",
	},
}

// The README shows pictures of the console (the payments list, the
// dashboard's trends, its money to return, the refunds list, the audit log,
// the renewals); a change to the screens one shows,
// committed after it, makes it stale (payments.png once lacked the Refunds item of the
// navigation). `task ui-screenshot` takes them again with the browser tests;
// commit them with (or after) the change.
func TestDocsScreenshotIsNotOlderThanTheScreensItShows(t *testing.T) {
	t.Parallel()
	for picture, sources := range docsScreenshots {
		shot := lastCommitTime(t, picture)
		for _, src := range append(append([]string{}, consoleShell...), sources...) {
			changed := lastCommitTime(t, src)
			require.False(t, shot.Before(changed),
				"%s (committed %s) is older than %s (committed %s): run task ui-screenshot and commit the picture",
				picture, shot.Format(time.RFC3339), src, changed.Format(time.RFC3339))
		}
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
