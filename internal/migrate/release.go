package migrate

import (
	"context"
	"embed"
	"fmt"
	"strings"
	"sync"

	"github.com/rustbill/paymentd/internal/store"
)

// Release is a released version of paymentd, the newest migration it has
// and the commit it was made from. Its migrations are never edited
// (releases/migrations.txt holds their sums), and its schema is kept in
// releases/<version>.schema.txt.
type Release struct {
	Version   string
	Migration int64
	// Commit is empty in the release's own commit, which cannot name
	// itself; the next commit fills it in.
	Commit string
}

// Releases lists the released versions, oldest first. The spec's nine
// migrations are the first release's schema; a later schema change is a
// later migration (docs/decisions.md, "Released migrations").
var Releases = []Release{
	{Version: "v0.1.0", Migration: 9, Commit: "f8620e63e0db394189b234ca216b1bd1bac5ec53"},
}

// FirstRelease is the first released version: a database made by a build
// from before it has no upgrade path.
func FirstRelease() Release { return Releases[0] }

//go:embed releases
var releaseFiles embed.FS

// ReleasedSchema is the schema release version's migrations make.
func ReleasedSchema(version string) ([]Object, error) {
	raw, err := releaseFiles.ReadFile("releases/" + version + ".schema.txt")
	if err != nil {
		return nil, fmt.Errorf("migrate: no schema of release %s in this build: %w", version, err)
	}
	return ParseSchema(string(raw))
}

// ReleasedMigration is one line of releases/migrations.txt: a migration
// file of a release and its SHA-256.
type ReleasedMigration struct {
	Release, File, SHA256 string
}

// ReleasedMigrations lists every released migration file with its sum.
var ReleasedMigrations = sync.OnceValue(func() []ReleasedMigration {
	raw, err := releaseFiles.ReadFile("releases/migrations.txt")
	if err != nil {
		panic(err) // embedded
	}
	var out []ReleasedMigration
	for _, l := range strings.Split(string(raw), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if len(f) != 3 {
			panic("migrate: releases/migrations.txt: a line is a release, a file and its sha256: " + l)
		}
		out = append(out, ReleasedMigration{Release: f[0], File: f[1], SHA256: f[2]})
	}
	return out
})

// releaseAt is the release whose newest migration is version, if any.
func releaseAt(version int64) (Release, bool) {
	for _, r := range Releases {
		if r.Migration == version {
			return r, true
		}
	}
	return Release{}, false
}

// checkBeforeUp runs before migrations are applied to a database that
// records recorded, when this build has newer ones: a database at a
// release's newest migration must have that release's schema, or the
// newer migrations would run on what they were not written for (a
// pre-release build's tables, a hand change) and fail half way, or
// succeed on the wrong thing. Only refused differences stop it (the
// same rules as the check after the run); nothing is applied then.
func checkBeforeUp(ctx context.Context, conn store.DB, recorded, known int64) error {
	rel, ok := releaseAt(recorded)
	if !ok || recorded >= known {
		return nil // nothing newer to apply, or not a release's end: the check after the run says
	}
	want, err := ReleasedSchema(rel.Version)
	if err != nil {
		return err
	}
	live, err := ReadSchema(ctx, conn)
	if err != nil {
		return err
	}
	r := SchemaReport{Objects: len(want), Recorded: recorded, Known: known, Release: rel.Version,
		Differences: compareSchema(want, live, false)}
	return r.Err()
}

// preRelease says whether a database that records recorded may have been
// made by a build from before the first release: pre-release builds
// recorded the same nine migrations with other contents.
func preRelease(recorded int64) bool {
	return recorded > 0 && recorded <= FirstRelease().Migration
}
