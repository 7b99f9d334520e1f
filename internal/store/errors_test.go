package store_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/store"
)

func TestMapError(t *testing.T) {
	t.Parallel()
	pgErr := func(code, constraint string) error {
		return fmt.Errorf("query: %w", &pgconn.PgError{
			Code:           code,
			Message:        `duplicate key value violates unique constraint "x"`,
			Detail:         "Key (username)=(secret-value) already exists.",
			InternalQuery:  "SELECT secret FROM t",
			TableName:      "payments",
			ConstraintName: constraint,
		})
	}
	cases := []struct {
		name string
		in   error
		kind error
	}{
		{"NoRows", pgx.ErrNoRows, store.ErrNotFound},
		{"WrappedNoRows", fmt.Errorf("get: %w", pgx.ErrNoRows), store.ErrNotFound},
		{"UniqueViolation", pgErr("23505", "payments_one_pending_key"), store.ErrConflict},
		{"ExclusionViolation", pgErr("23P01", "x_excl"), store.ErrConflict},
		{"CheckViolation", pgErr("23514", "payments_amount_check"), store.ErrCheckViolation},
		{"ForeignKeyViolation", pgErr("23503", "payments_order_fkey"), store.ErrForeignKeyViolation},
		{"NotNullViolation", pgErr("23502", ""), store.ErrNotNullViolation},
		{"NumericOutOfRange", pgErr("22003", ""), store.ErrInvalidValue},
		{"InvalidTextRepresentation", pgErr("22P02", ""), store.ErrInvalidValue},
		{"SerializationFailure", pgErr("40001", ""), store.ErrRetryable},
		{"Deadlock", pgErr("40P01", ""), store.ErrRetryable},
		{"LockNotAvailable", pgErr("55P03", ""), store.ErrLockNotAvailable},
		{"TerminatedByAnAdmin", pgErr("57P01", ""), store.ErrUnavailable},
		{"CannotConnectNow", pgErr("57P03", ""), store.ErrUnavailable},
		{"TooManyConnections", pgErr("53300", ""), store.ErrUnavailable},
		{"ConnectionFailure", pgErr("08006", ""), store.ErrUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := store.MapError(tc.in)
			require.ErrorIs(t, got, tc.kind)
			require.NotContains(t, got.Error(), "secret", "no SQL text or row values in the message")
			require.NotContains(t, got.Error(), "SELECT")
			require.Equal(t, got, store.MapError(got), "mapping twice changes nothing")

			var pe *pgconn.PgError
			if errors.As(tc.in, &pe) {
				var se *store.Error
				require.ErrorAs(t, got, &se)
				require.Equal(t, pe.Code, se.Code)
				require.Equal(t, pe.ConstraintName, se.Constraint)
				require.Equal(t, "payments", se.Table)
				require.Equal(t, pe.ConstraintName, store.ConstraintOf(got))
				if pe.ConstraintName != "" {
					require.Contains(t, got.Error(), pe.ConstraintName)
				}
			}
		})
	}
}

func TestMapErrorLeavesOtherErrorsAlone(t *testing.T) {
	t.Parallel()
	require.NoError(t, store.MapError(nil))

	for _, err := range []error{
		context.Canceled,
		fmt.Errorf("conn: %w", context.DeadlineExceeded),
		errors.New("network is unreachable"),
		&pgconn.PgError{Code: "42P01"}, // undefined_table: a bug, not a domain error
	} {
		require.Equal(t, err, store.MapError(err))
	}
	require.Empty(t, store.ConstraintOf(errors.New("x")))
}

func TestMapErrorNamesTheConstraintFromTheDatabase(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.pool.Exec(ctx, `INSERT INTO customers (email, password_hash, currency) VALUES ('A@example.com', 'h', 'CNY')`)
	err = store.MapError(err)
	require.ErrorIs(t, err, store.ErrConflict)
	require.Equal(t, "customers_email_lower_key", store.ConstraintOf(err))
	require.Equal(t, "store: conflict with an existing row (constraint customers_email_lower_key)", err.Error())

	_, err = b.pool.Exec(ctx, `INSERT INTO customers (email, password_hash) VALUES ('c@example.com', 'h')`)
	err = store.MapError(err)
	require.ErrorIs(t, err, store.ErrNotNullViolation)
	require.Equal(t, "store: required value missing (column customers.currency)", err.Error())
}

func TestIsUnavailableKnowsALostDatabaseFromEverythingElse(t *testing.T) {
	t.Parallel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for name, err := range map[string]error{
		"terminated":    &pgconn.PgError{Code: "57P01"},
		"mapped":        store.MapError(&pgconn.PgError{Code: "08006"}),
		"refused":       fmt.Errorf("acquire: %w", refused),
		"reset":         fmt.Errorf("read: %w", syscall.ECONNRESET),
		"cut off":       io.ErrUnexpectedEOF,
		"closed by pgx": errors.New("conn closed"),
		"pool connect":  fmt.Errorf("begin: %w", &pgconn.ConnectError{}),
		"net closed":    net.ErrClosed,
	} {
		require.True(t, store.IsUnavailable(err), name)
	}
	for name, err := range map[string]error{
		"nil":       nil,
		"canceled":  context.Canceled,
		"deadline":  context.DeadlineExceeded,
		"not found": store.ErrNotFound,
		"unique":    &pgconn.PgError{Code: "23505"},
		"deadlock":  &pgconn.PgError{Code: "40P01"},
		"anything":  errors.New("boom"),
	} {
		require.False(t, store.IsUnavailable(err), name)
	}
}
