package event_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"buf.build/gen/go/bufbuild/protovalidate/protocolbuffers/go/buf/validate"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	eventpb "github.com/rustbill/paymentd/gen/billing/event"
	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/event"
	"github.com/rustbill/paymentd/internal/testdb"
)

// event.Types is the one list of event types: the schema's CHECK and the
// column's comment list the same values, and the API's filter takes
// exactly them (a protovalidate "in" rule on ListEventsRequest.event_type,
// were one put back, would have to list them too).
func TestTypesAreTheSchemasAndTheAPIs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.Pool(t)

	var check, comment string
	require.NoError(t, pool.QueryRow(ctx, `
		SELECT pg_get_constraintdef(oid), col_description('events'::regclass,
			(SELECT attnum FROM pg_attribute WHERE attrelid = 'events'::regclass AND attname = 'event_type'))
		FROM pg_constraint WHERE conname = 'events_event_type_check'`).Scan(&check, &comment))
	var inCheck []string
	for _, m := range regexp.MustCompile(`'(\w+)'`).FindAllStringSubmatch(check, -1) {
		inCheck = append(inCheck, m[1])
	}
	require.Equal(t, event.Types, inCheck, "events_event_type_check (sql/migrations/00007_events.sql) against event.Types")
	require.Equal(t, strings.Join(event.Types, " | ")+".", comment, "COMMENT ON COLUMN events.event_type against event.Types")

	field := (&eventpb.ListEventsRequest{}).ProtoReflect().Descriptor().Fields().ByName("event_type")
	rules, _ := proto.GetExtension(field.Options(), validate.E_Field).(*validate.FieldRules)
	if in := rules.GetString().GetIn(); len(in) > 0 {
		require.Equal(t, event.Types, in, "ListEventsRequest.event_type's \"in\" rule against event.Types")
	}

	for _, typ := range event.Types {
		require.NoError(t, event.CheckType(typ))
	}
	err := event.CheckType("order_exploded")
	require.True(t, apperr.Is(err, apperr.InvalidArgument))
	require.ErrorContains(t, err, `"order_exploded"`)
}
