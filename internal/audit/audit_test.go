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
