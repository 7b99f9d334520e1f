package migrate

import (
	"context"

	"github.com/rustbill/paymentd/internal/store"
)

// WithBeforeMigration returns o with a hook called under the migration role
// before each migration is applied (tests pause a run with it).
func WithBeforeMigration(o Options, f func(ctx context.Context, version int64) error) Options {
	o.beforeMigration = f
	return o
}

// CompareSchema is compareSchema: how live differs from expected, and what
// refuses the start (newer: the database records migrations this build
// does not have).
func CompareSchema(expected, live []Object, newer bool) []Difference {
	return compareSchema(expected, live, newer)
}

// SameDefinition is sameDefinition: whether two renderings of an object
// are the same object.
func SameDefinition(a, b string) bool { return sameDefinition(a, b) }

// CheckBeforeUp is checkBeforeUp as a build that knows migrations up to
// known would run it on a database that records recorded.
func CheckBeforeUp(ctx context.Context, db store.DB, recorded, known int64) error {
	return checkBeforeUp(ctx, db, recorded, known)
}
