package store_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/store"
)

// NotFound names a missing row for the caller and leaves every other error
// as it is; BugIfNotFound makes the same miss Internal, its cause kept for
// the logs.
func TestNotFoundAndBugIfNotFound(t *testing.T) {
	t.Parallel()
	missing := fmt.Errorf("get payment: %w", store.ErrNotFound)
	err := store.NotFound(missing, "payment %s not found", "p1")
	require.True(t, apperr.Is(err, apperr.NotFound))
	require.EqualError(t, err, "payment p1 not found")
	require.NoError(t, store.NotFound(nil, "payment %s not found", "p1"))
	require.Same(t, context.Canceled, store.NotFound(context.Canceled, "payment %s not found", "p1"))

	err = store.BugIfNotFound(missing, "lock payment")
	require.True(t, apperr.Is(err, apperr.Internal))
	require.ErrorIs(t, err, store.ErrNotFound)
	require.NoError(t, store.BugIfNotFound(nil, "lock payment"))
	lost := errors.New("connection lost")
	require.Same(t, lost, store.BugIfNotFound(lost, "lock payment"))
}

// Timestamp keeps what a timestamptz column keeps: UTC, microseconds.
func TestTimestampIsWhatTheColumnKeeps(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.FixedZone("CST", 8*3600))
	got := store.Timestamp(at)
	require.Equal(t, time.UTC, got.Location())
	require.Equal(t, 123456000, got.Nanosecond())
	require.True(t, got.Equal(at.Truncate(time.Microsecond)))
}

// Bug makes an impossible refusal Internal, but the database failing the
// call (terminated, restarting, busy, a conflict, the call's end) keeps its
// kind, so that the edge answers Unavailable or Aborted and the client
// retries.
func TestBugLeavesTheDatabaseFailingTheCallRetryable(t *testing.T) {
	t.Parallel()
	require.NoError(t, store.Bug(nil, "post"))
	bug := store.Bug(&store.Error{Kind: store.ErrCheckViolation, Code: "23514"}, "post %s", "x")
	require.True(t, apperr.Is(bug, apperr.Internal))
	require.EqualError(t, bug, "post x: store: check constraint violated")
	for _, transient := range []error{
		store.MapError(&pgconn.PgError{Code: "57P01"}), // pg_terminate_backend
		&pgconn.PgError{Code: "57P03"},                 // starting up
		fmt.Errorf("query: %w", io.ErrUnexpectedEOF),   // the connection dropped under the query
		errors.New("conn closed"),
		errors.New("closed pool"), // a pool closed at shutdown
		store.ErrPoolBusy,
		store.MapError(&pgconn.PgError{Code: "40001"}),
		context.DeadlineExceeded,
	} {
		err := store.Bug(transient, "post %s", "x")
		require.False(t, apperr.Is(err, apperr.Internal), "%v", transient)
		require.ErrorIs(t, err, transient)
		require.True(t, store.Transient(err), "%v", transient)
	}
}
