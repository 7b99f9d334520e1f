package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"buf.build/gen/go/bufbuild/protovalidate/protocolbuffers/go/buf/validate"
	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/timerange"
)

// Every time ParseTime takes is one the audit log's JSON can write, with a
// year of margin; every other is InvalidArgument naming the field, with
// the range in the message. The offsets decide: year 9999 as written can
// be year 10000 in UTC, and year 0000 can be year -1.
func TestParseTimeTakesOnlyTimesTheServiceCanStoreAndEncode(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"1970-01-01T00:00:00Z", "1970-01-01T00:00:00-00:01", "2026-11-28T23:00:00+08:00",
		"9998-12-31T23:59:59.999999999Z", "9998-12-31T23:59:59+23:59",
	} {
		got, err := ParseTime("ends_at", s)
		require.NoError(t, err, s)
		require.Equal(t, time.UTC, got.Location(), s)
		_, err = json.Marshal(got.AddDate(1, 0, 0))
		require.NoError(t, err, "%s: a year later still encodes", s)
	}
	for s, want := range map[string]string{
		"9999-12-31T23:59:59-23:59":      "validation error: ends_at: 9999-12-31T23:59:59-23:59 (10000-01-01T23:58:59Z in UTC) is outside the accepted range 1970-01-01T00:00:00Z to 9999-01-01T00:00:00Z (UTC, end excluded)",
		"9999-01-01T00:00:00Z":           "9999-01-01T00:00:00Z is outside",
		"9999-01-01T08:00:00+08:00":      "(9999-01-01T00:00:00Z in UTC) is outside",
		"0000-01-01T00:00:00+23:59":      "(-0001-12-31T00:01:00Z in UTC) is outside",
		"0001-01-01T00:00:00Z":           "is outside",
		"1969-12-31T23:59:59.999999999Z": "is outside",
		"1970-01-01T00:00:00+00:01":      "is outside",
		"tomorrow":                       `validation error: ends_at: "tomorrow" is not an RFC 3339 time`,
		"":                               `validation error: ends_at: "" is not an RFC 3339 time`,
		"2026-11-28 23:00:00Z":           "is not an RFC 3339 time",
		"99999-01-01T00:00:00Z":          "is not an RFC 3339 time",
	} {
		_, err := ParseTime("ends_at", s)
		require.True(t, apperr.Is(err, apperr.InvalidArgument), "%s: %v", s, err)
		require.ErrorContains(t, err, want, s)
	}
	none, err := OptionalTime("expires_at", "")
	require.NoError(t, err)
	require.Nil(t, none)
	_, err = OptionalTime("expires_at", "9999-12-31T23:59:59-23:59")
	require.ErrorContains(t, err, "validation error: expires_at: ")
}

// A field's violation reaches the client as the request validator's own
// do: the message, and a buf.validate.Violations detail naming the field
// with the rule's id.
func TestAFieldViolationCarriesTheValidatorsDetail(t *testing.T) {
	t.Parallel()
	_, perr := ParseTime("due_at", "9999-12-31T23:59:59-23:59")
	err := Error(context.Background(), slog.New(slog.DiscardHandler), perr)
	var ce *connect.Error
	require.True(t, errors.As(err, &ce))
	require.Equal(t, connect.CodeInvalidArgument, ce.Code())
	require.Contains(t, ce.Message(), "validation error: due_at: 9999-12-31T23:59:59-23:59")
	require.Len(t, ce.Details(), 1)
	v, err := ce.Details()[0].Value()
	require.NoError(t, err)
	vs, ok := v.(*validate.Violations)
	require.True(t, ok, "%T", v)
	require.Len(t, vs.GetViolations(), 1)
	got := vs.GetViolations()[0]
	require.Equal(t, "due_at", got.GetField().GetElements()[0].GetFieldName())
	require.Equal(t, timerange.RuleRange, got.GetRuleId())
	require.Contains(t, got.GetMessage(), "is outside the accepted range")

	plain := Error(context.Background(), slog.New(slog.DiscardHandler), apperr.New(apperr.InvalidArgument, "amount exceeds the payment"))
	require.Empty(t, plain.(*connect.Error).Details(), "an error about no one field has no detail")
}
