package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
)

// serverUser is the account the cluster runs as when we are root; it is the
// one Debian's postgresql package creates.
const serverUser = "postgres"

// owner is the OS account initdb, pg_ctl and the server run as when we are
// root. A nil *owner means "the current user, unchanged".
type owner struct {
	name   string
	home   string
	uid    uint32
	gid    uint32
	groups []uint32 // supplementary groups, without gid
}

func (o *owner) String() string {
	return fmt.Sprintf("%s (uid %d)", o.name, o.uid)
}

func (o *owner) credential() *syscall.Credential {
	return &syscall.Credential{Uid: o.uid, Gid: o.gid, Groups: o.groups}
}

func (o *owner) inGroup(gid uint32) bool {
	return gid == o.gid || slices.Contains(o.groups, gid)
}

// chown hands paths we created as root to the server's account; a nil owner
// means we are not root and already own them.
func (o *owner) chown(paths ...string) error {
	if o == nil {
		return nil
	}
	for _, p := range paths {
		if err := os.Lchown(p, int(o.uid), int(o.gid)); err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
	}
	return nil
}

// serverOwner decides who runs the server. Not root: ourselves (nil). Root:
// the owner of an existing data directory when that is not root (someone
// initialised it before, perhaps as their own user), else the postgres system
// user, created when it is missing and create is set.
func serverOwner(ctx context.Context, dir string, create bool, logf func(string, ...any)) (*owner, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	if fi, err := os.Stat(dir); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 {
			return ownerByID(st.Uid, st.Gid)
		}
	}
	u, err := user.Lookup(serverUser)
	if errors.As(err, new(user.UnknownUserError)) && create {
		logf("pgcluster: running as root and there is no %s user; creating it (useradd --system)", serverUser)
		out, uerr := exec.CommandContext(ctx, "useradd", "--system", "--user-group", "--no-create-home",
			"--home-dir", "/var/lib/postgresql", "--shell", "/bin/sh", serverUser).CombinedOutput()
		if uerr != nil {
			return nil, fmt.Errorf("pgcluster: PostgreSQL refuses to run as root and creating the %s user failed: %w: %s",
				serverUser, uerr, oneLine(out))
		}
		u, err = user.Lookup(serverUser)
	}
	if err != nil {
		return nil, fmt.Errorf("pgcluster: PostgreSQL refuses to run as root and there is no %s user: %w", serverUser, err)
	}
	return ownerFromUser(u)
}

func ownerByID(uid, gid uint32) (*owner, error) {
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		// A data directory from a container volume may belong to a uid
		// without a passwd entry; the ids alone are enough to run as it.
		return &owner{name: "uid " + strconv.FormatUint(uint64(uid), 10), home: "/", uid: uid, gid: gid}, nil
	}
	return ownerFromUser(u)
}

func ownerFromUser(u *user.User) (*owner, error) {
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: user %s: uid %q: %w", u.Username, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: user %s: gid %q: %w", u.Username, u.Gid, err)
	}
	o := &owner{name: u.Username, home: u.HomeDir, uid: uint32(uid), gid: uint32(gid)}
	if ids, err := u.GroupIds(); err == nil {
		for _, s := range ids {
			if g, err := strconv.ParseUint(s, 10, 32); err == nil && uint32(g) != o.gid {
				o.groups = append(o.groups, uint32(g))
			}
		}
	}
	return o, nil
}

// checkTraversable makes sure o can walk from / down to dir's parent: the
// usual failure when root keeps a checkout under /root (mode 0700) or in a
// t.TempDir, and postgres then fails with an obscure "Permission denied".
func checkTraversable(dir string, o *owner) error {
	if o == nil {
		return nil
	}
	var ancestors []string
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		ancestors = append(ancestors, p)
		if p == filepath.Dir(p) {
			break
		}
	}
	// From / down, so the message names the outermost blocker.
	for _, p := range slices.Backward(ancestors) {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // the rest we create, with mode 0755
		}
		if err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
		if !canSearch(fi, o) {
			return fmt.Errorf("pgcluster: PostgreSQL runs as %s, which cannot enter %s (mode %04o), so it cannot reach %s: "+
				"run chmod o+x %s, choose a data directory elsewhere, or set [db].url", o, p, fi.Mode().Perm(), dir, p)
		}
	}
	return nil
}

func canSearch(fi os.FileInfo, o *owner) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return true
	}
	perm := fi.Mode().Perm()
	switch {
	case st.Uid == o.uid:
		return perm&0o100 != 0
	case o.inGroup(st.Gid):
		return perm&0o010 != 0
	default:
		return perm&0o001 != 0
	}
}

// serverOf is how the existing cluster in dir runs: the binaries of its
// major version and the user that owns it, for a cluster made from it (a
// standby, a copy).
func serverOf(ctx context.Context, dir string, logf func(string, ...any)) (binDir string, runAs *owner, err error) {
	if binDir, err = ensureBinaries(ctx, logf); err != nil {
		return "", nil, err
	}
	if binDir, err = binariesFor(ctx, dir, binDir); err != nil {
		return "", nil, err
	}
	if runAs, err = serverOwner(ctx, dir, false, logf); err != nil {
		return "", nil, err
	}
	return binDir, runAs, nil
}
