package audit_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/logging"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testdb"
)

// Each kind of caller is named as the audit log's actor_kind check allows:
// an API key by its id (whoever owns it), an admin and a customer by theirs.
func TestOfNamesTheCredentialThatActed(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	require.Equal(t, audit.Actor{Kind: store.ActorAdmin, ID: id.String()}, audit.Of(auth.Principal{Role: auth.RoleAdmin, ID: id}))
	require.Equal(t, audit.Actor{Kind: store.ActorCustomer, ID: id.String()}, audit.Of(auth.Principal{Role: auth.RoleCustomer, ID: id}))
	require.Equal(t, audit.Actor{Kind: store.ActorAPIKey, ID: "k1"},
		audit.Of(auth.Principal{Role: auth.RoleCustomer, ID: id, Kind: auth.KindAPIKey, CredentialID: "k1"}))
	require.Equal(t, audit.Actor{Kind: store.ActorGateway, ID: id.String()}, audit.Gateway(id))
	require.Equal(t, audit.Actor{Kind: store.ActorSystem, ID: "reconciler"}, audit.System("reconciler"))
}

// A row holds the actor, the entity, its snapshots as JSON (NULL for none),
// the writer's time and the request id of the context.
func TestWriteAppendsOneRowWithTheRequestID(t *testing.T) {
	t.Parallel()
	ctx, _ := logging.NewScope(context.Background(), "req-1")
	db := testdb.Pool(t)
	at := time.Date(2026, 11, 25, 3, 4, 5, 0, time.UTC)
	require.NoError(t, audit.Write(ctx, db, audit.System("test"), at, "thing.change", "thing", "t-1",
		nil, map[string]any{"status": "after"}))

	var kind, actorID, action, entity, entityID, requestID string
	var before, after *string
	var created time.Time
	require.NoError(t, db.QueryRow(ctx, `SELECT actor_kind, actor_id, action, entity_type, entity_id, before::text, after::text, request_id, created_at
		FROM audit_log WHERE entity_id = 't-1'`).Scan(&kind, &actorID, &action, &entity, &entityID, &before, &after, &requestID, &created))
	require.Equal(t, []string{"system", "test", "thing.change", "thing", "t-1", "req-1"}, []string{kind, actorID, action, entity, entityID, requestID})
	require.Nil(t, before)
	require.JSONEq(t, `{"status": "after"}`, *after)
	require.True(t, at.Equal(created), "created_at is the writer's time: %s", created)

	// A zero time is now.
	require.NoError(t, audit.Write(ctx, db, audit.System("test"), time.Time{}, "thing.change", "thing", "t-2", nil, nil))
	require.NoError(t, db.QueryRow(ctx, `SELECT created_at FROM audit_log WHERE entity_id = 't-2'`).Scan(&created))
	require.WithinDuration(t, time.Now(), created, time.Minute)
}

// A change's row holds what changed; a note's row both sides whole; a
// creation's the whole entity.
func TestWriteKeepsWhatChangedAndNoteKeepsEverything(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Pool(t)
	type payment struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Amount string `json:"amount"`
		PaidAt string `json:"paid_at,omitempty"`
	}
	pending := payment{ID: "p-1", Status: "pending", Amount: "10.00"}
	paid := payment{ID: "p-1", Status: "success", Amount: "10.00", PaidAt: "2026-11-26T00:00:00Z"}
	require.NoError(t, audit.Write(ctx, db, audit.System("test"), time.Time{}, "payment.create", "payment", "p-1", nil, pending))
	require.NoError(t, audit.Write(ctx, db, audit.System("test"), time.Time{}, "payment.success", "payment", "p-1", pending, paid))
	require.NoError(t, audit.Note(ctx, db, audit.System("test"), time.Time{}, "payment.anomaly", "payment", "p-1", paid, map[string]any{"kind": "amount_mismatch", "amount": "10.00"}))

	rows, err := db.Query(ctx, `SELECT action, coalesce(before::text, ''), after::text FROM audit_log WHERE entity_id = 'p-1' ORDER BY id`)
	require.NoError(t, err)
	var got [][3]string
	for rows.Next() {
		var r [3]string
		require.NoError(t, rows.Scan(&r[0], &r[1], &r[2]))
		got = append(got, r)
	}
	require.NoError(t, rows.Err())
	require.Len(t, got, 3)
	require.Empty(t, got[0][1])
	require.JSONEq(t, `{"id":"p-1","status":"pending","amount":"10.00"}`, got[0][2])
	require.JSONEq(t, `{"status":"pending"}`, got[1][1])
	require.JSONEq(t, `{"status":"success","paid_at":"2026-11-26T00:00:00Z"}`, got[1][2])
	require.JSONEq(t, `{"id":"p-1","status":"success","amount":"10.00","paid_at":"2026-11-26T00:00:00Z"}`, got[2][1])
	require.JSONEq(t, `{"kind":"amount_mismatch","amount":"10.00"}`, got[2][2])
}
