package migrate_test

import (
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/migrate"
)

// sourceVersions are the versions of this build's migrations, in order:
// the tests count them instead of spelling a number that every new
// migration would change.
func sourceVersions(t testing.TB) []int64 {
	t.Helper()
	names, err := fs.Glob(migrate.FS(), "*.sql")
	require.NoError(t, err)
	var out []int64
	for _, n := range names {
		v, err := strconv.ParseInt(strings.SplitN(n, "_", 2)[0], 10, 64)
		require.NoError(t, err, n)
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// migrationCount is how many migrations this build has.
func migrationCount(t testing.TB) int { return len(sourceVersions(t)) }

// lastVersion is this build's newest migration.
func lastVersion(t testing.TB) int64 {
	v := sourceVersions(t)
	return v[len(v)-1]
}
