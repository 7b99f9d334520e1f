package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

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
