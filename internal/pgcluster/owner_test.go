package pgcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

func TestCheckTraversableNamesTheDirectoryThatBlocksTheServerUser(t *testing.T) {
	t.Parallel()
	// A stranger: neither the owner of the temp dirs nor in their group.
	stranger := &owner{name: "stranger", uid: 54321, gid: 54321}
	parent := openTempDir(t)
	blocked := filepath.Join(parent, "blocked")
	require.NoError(t, os.Mkdir(blocked, 0o700))
	dir := filepath.Join(blocked, "data", "postgres")

	err := checkTraversable(dir, stranger)
	require.ErrorContains(t, err, "stranger (uid 54321), which cannot enter "+blocked)
	require.ErrorContains(t, err, "(mode 0700)")
	require.ErrorContains(t, err, "chmod o+x "+blocked)

	require.NoError(t, os.Chmod(blocked, 0o711))
	require.NoError(t, os.MkdirAll(filepath.Dir(dir), 0o755))
	require.NoError(t, checkTraversable(dir, stranger))
}

func TestCheckTraversableIsANoOpWhenNotRoot(t *testing.T) {
	t.Parallel()
	require.NoError(t, checkTraversable("/nonexistent/really/not", nil))
}

func TestCanSearchUsesOwnerThenGroupThenOtherBits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fi := func(mode os.FileMode) os.FileInfo {
		require.NoError(t, os.Chmod(dir, mode))
		st, err := os.Stat(dir)
		require.NoError(t, err)
		return st
	}
	uid, gid := uint32(os.Getuid()), uint32(os.Getgid())
	self := &owner{uid: uid, gid: gid}
	groupMate := &owner{uid: uid + 1000, gid: 99999, groups: []uint32{gid}}
	stranger := &owner{uid: uid + 1000, gid: 99999}

	require.True(t, canSearch(fi(0o700), self))
	require.False(t, canSearch(fi(0o077), self), "owner bits decide for the owner, even when others may")
	require.True(t, canSearch(fi(0o710), groupMate))
	require.False(t, canSearch(fi(0o701), groupMate))
	require.True(t, canSearch(fi(0o701), stranger))
	require.False(t, canSearch(fi(0o770), stranger))
}

func TestConfQuoteEscapesQuotesAndBackslashes(t *testing.T) {
	t.Parallel()
	require.Equal(t, `'/tmp/it''s\\here'`, confQuote(`/tmp/it's\here`))
}

// openTempDir is a t.TempDir that other users may enter: t.TempDir's parent
// is 0700, so a server running as postgres could not reach anything inside.
func openTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pgcluster-test-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
