package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/store"
)

// The claim fence travels with BEGIN and a handler transaction's first
// statement in one batch (WithClaimTx). Whatever that first statement is —
// Exec, QueryRow, Query, or nothing at all — a claim that is not the
// event's commits nothing, even when the function swallows the error and
// goes on writing; a claim that is commits everything, and a statement that
// fails rolls it all back with its error.
func TestWithClaimTxCommitsOnlyUnderTheClaimWhateverItsFirstStatement(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ev, err := store.Q(b.pool).InsertEvent(ctx, store.InsertEventParams{
		EventType: "order_paid", OrderID: b.orderID, Payload: []byte(`{}`),
	})
	require.NoError(t, err)
	claimed, err := store.ClaimEvents(ctx, b.pool, "node-1", 1, time.Minute, nil, "")
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	require.Equal(t, ev.ID, claimed[0].ID)
	held := store.ClaimOf(claimed[0])
	lost := held
	lost.Token = uuid.New()

	description := func() string {
		var d string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT description FROM orders WHERE id = $1`, b.orderID).Scan(&d))
		return d
	}
	const update = `UPDATE orders SET description = $2 WHERE id = $1 RETURNING description`
	firsts := map[string]func(tx pgx.Tx, text string) error{
		"Exec": func(tx pgx.Tx, text string) error {
			_, err := tx.Exec(ctx, update, b.orderID, text)
			return err
		},
		"QueryRow": func(tx pgx.Tx, text string) error {
			var got string
			return tx.QueryRow(ctx, update, b.orderID, text).Scan(&got)
		},
		"Query": func(tx pgx.Tx, text string) error {
			rows, err := tx.Query(ctx, update, b.orderID, text)
			if err != nil {
				return err
			}
			got, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err == nil && (len(got) != 1 || got[0] != text) {
				t.Errorf("the first statement returned %v", got)
			}
			return err
		},
		"a savepoint": func(tx pgx.Tx, text string) error {
			return store.WithTx(ctx, tx, func(sp pgx.Tx) error {
				_, err := sp.Exec(ctx, update, b.orderID, text)
				return err
			})
		},
	}
	for name, first := range firsts {
		// Lost: the first statement returns ErrClaimLost; a function that
		// swallows it and writes again still commits nothing.
		err := store.WithClaimTx(ctx, b.pool, lost, "", func(tx pgx.Tx) error {
			require.ErrorIs(t, first(tx, "lost "+name), store.ErrClaimLost, name)
			_, err := tx.Exec(ctx, `UPDATE orders SET description = 'after a lost fence' WHERE id = $1`, b.orderID)
			require.ErrorIs(t, err, store.ErrClaimLost, name)
			return nil
		})
		require.ErrorIs(t, err, store.ErrClaimLost, name)
		require.NotContains(t, description(), "lost", name)
		require.NotEqual(t, "after a lost fence", description(), name)

		// Held: the first statement and the later ones commit.
		require.NoError(t, store.WithClaimTx(ctx, b.pool, held, "", func(tx pgx.Tx) error {
			if err := first(tx, "held "+name); err != nil {
				return err
			}
			var d string
			return tx.QueryRow(ctx, `SELECT description FROM orders WHERE id = $1`, b.orderID).Scan(&d)
		}), name)
		require.Equal(t, "held "+name, description(), name)
	}

	// A failing first statement: its error, and nothing committed.
	err = store.WithClaimTx(ctx, b.pool, held, "", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE orders SET total_amount = -1, description = 'negative' WHERE id = $1`, b.orderID)
		return err
	})
	require.Error(t, err)
	require.NotErrorIs(t, err, store.ErrClaimLost)
	require.NotEqual(t, "negative", description())

	// Only statements that wait (an audit row: nobody reads its result),
	// then the commit: they go with BEGIN and the fence, and the COMMIT
	// waits for the fence's answer, so a lost claim commits nothing even
	// though PostgreSQL took the statements.
	audit := func(id string) func(tx pgx.Tx) error {
		return func(tx pgx.Tx) error {
			return store.AppendAudit(ctx, tx, store.AuditRecord{ActorKind: store.ActorSystem, ActorID: "test", Action: "test.waiting", EntityType: "test", EntityID: id, At: time.Now()})
		}
	}
	audits := func(id string) int {
		var n int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE entity_id = $1`, id).Scan(&n))
		return n
	}
	require.ErrorIs(t, store.WithClaimTx(ctx, b.pool, lost, "", audit("waiting-lost")), store.ErrClaimLost)
	require.Zero(t, audits("waiting-lost"))
	require.NoError(t, store.WithClaimTx(ctx, b.pool, held, "", audit("waiting-held")))
	require.Equal(t, 1, audits("waiting-held"))

	// Nothing sent: no transaction, nothing to refuse.
	require.NoError(t, store.WithClaimTx(ctx, b.pool, lost, "", func(pgx.Tx) error { return nil }))

	// With a leader role the node does not hold: lost as well.
	err = store.WithClaimTx(ctx, b.pool, held, "event_worker", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, update, b.orderID, "without the lease")
		return err
	})
	require.ErrorIs(t, err, store.ErrClaimLost)
	require.NotEqual(t, "without the lease", description())

	// The event is still held by its claim, which completes it.
	require.NoError(t, store.CompleteEvent(ctx, b.pool, held))
}
