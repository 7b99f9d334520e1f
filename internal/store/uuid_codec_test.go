package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/store"
)

// With RegisterTypes, uuid.UUID values and columns travel as their 16
// bytes (not through driver.Valuer and sql.Scanner and their text form),
// and mean exactly what they meant before: NULL is a nil *uuid.UUID, or
// uuid.Nil in a uuid.UUID.
func TestUUIDsTravelAsBytesAndKeepTheirMeaning(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	cfg := b.pool.Config().ConnConfig.Copy()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer conn.Close(ctx)
	require.NoError(t, store.RegisterTypes(ctx, conn))

	m := conn.TypeMap()
	for _, v := range []any{uuid.New(), ptr(uuid.New())} {
		plan := m.PlanEncode(pgtype.UUIDOID, pgtype.BinaryFormatCode, v)
		require.NotNil(t, plan)
		require.NotContains(t, fmt.Sprintf("%T", plan), "DriverValuer", "%T", v)
	}

	id := uuid.New()
	var got uuid.UUID
	var gotPtr, gotNull *uuid.UUID
	var nullInto uuid.UUID = uuid.New()
	var text string
	require.NoError(t, conn.QueryRow(ctx, `SELECT $1::uuid, $2::uuid, NULL::uuid, NULL::uuid, $1::uuid::text`, id, &id).
		Scan(&got, &gotPtr, &gotNull, &nullInto, &text))
	require.Equal(t, id, got)
	require.NotNil(t, gotPtr)
	require.Equal(t, id, *gotPtr)
	require.Nil(t, gotNull)
	require.Equal(t, uuid.Nil, nullInto)
	require.Equal(t, id.String(), text)

	var isNull bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT $1::uuid IS NULL`, (*uuid.UUID)(nil)).Scan(&isNull))
	require.True(t, isNull)

	// A row of the store, through the generated code.
	p := b.pendingPayment()
	ins, err := b.q.InsertPayment(ctx, p)
	require.NoError(t, err)
	row, err := store.Q(conn).GetPayment(ctx, ins.ID)
	require.NoError(t, err)
	require.Equal(t, ins, row)
}
