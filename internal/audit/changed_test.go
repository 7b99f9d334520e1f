package audit_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/rustbill/paymentd/internal/audit"
)

// A change keeps the fields that changed, went or came, each side with its
// own value, and nothing else; what is not an object is not reduced.
func TestChangedKeepsOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	b, a, ok := audit.Changed(
		[]byte(`{"id":"p1","status":"pending","amount":"10.00","failure_reason":"x","source":{"kind":"callback","at":1}}`),
		[]byte(`{"id":"p1","status":"success","amount":"10.00","paid_at":"2026-11-26T00:00:00Z","source":{"kind":"callback","at":2}}`))
	require.True(t, ok)
	require.JSONEq(t, `{"status":"pending","failure_reason":"x","source":{"kind":"callback","at":1}}`, string(b))
	require.JSONEq(t, `{"status":"success","paid_at":"2026-11-26T00:00:00Z","source":{"kind":"callback","at":2}}`, string(a))

	b, a, ok = audit.Changed([]byte(`{"a":1}`), []byte(` { "a" : 1 } `))
	require.True(t, ok)
	require.Equal(t, "{}", string(b))
	require.Equal(t, "{}", string(a))

	// Strings holding the structure's characters are values, not structure.
	b, a, ok = audit.Changed([]byte(`{"n":"a\",\"b:{","m":[1,{"x":"]"}]}`), []byte(`{"n":"a\",\"b:{","m":[1,{"x":"}"}]}`))
	require.True(t, ok)
	require.Equal(t, `{"m":[1,{"x":"]"}]}`, string(b))
	require.Equal(t, `{"m":[1,{"x":"}"}]}`, string(a))

	for _, notObjects := range [][2]string{{`[1]`, `{"a":1}`}, {`{"a":1}`, `"x"`}, {`{"a":1`, `{}`}, {`{"a":1}x`, `{}`}, {`{"a" 1}`, `{}`}, {``, `{}`}} {
		_, _, ok := audit.Changed([]byte(notObjects[0]), []byte(notObjects[1]))
		require.False(t, ok, "%q", notObjects)
	}
}

// Whatever two snapshots are, the state after is the state before with
// the reduced change applied: the fields before names and after does not
// removed, those after names set. That is what makes an entity's history
// of reduced rows as complete as one of whole snapshots.
func TestChangedRowsRebuildTheStateAfter(t *testing.T) {
	t.Parallel()
	value := rapid.OneOf(
		rapid.Just[any](nil), rapid.Bool().AsAny(), rapid.IntRange(-3, 3).AsAny(),
		rapid.SampledFrom([]string{"", "pending", "success", "10.00", `a"b`, "{", "]"}).AsAny(),
		rapid.SliceOfN(rapid.IntRange(0, 2), 0, 2).AsAny(),
		rapid.MapOfN(rapid.SampledFrom([]string{"k", "l"}), rapid.IntRange(0, 2), 0, 2).AsAny(),
	)
	state := rapid.MapOfN(rapid.SampledFrom([]string{"id", "status", "amount", "paid_at", "reason", "source"}), value, 0, 6)
	rapid.Check(t, func(t *rapid.T) {
		before, after := state.Draw(t, "before"), state.Draw(t, "after")
		bj, err := json.Marshal(before)
		require.NoError(t, err)
		aj, err := json.Marshal(after)
		require.NoError(t, err)
		b, a, ok := audit.Changed(bj, aj)
		require.True(t, ok)

		var gone, set map[string]any
		require.NoError(t, json.Unmarshal(b, &gone))
		require.NoError(t, json.Unmarshal(a, &set))
		rebuilt := map[string]any{}
		require.NoError(t, json.Unmarshal(bj, &rebuilt))
		for k := range gone {
			if _, named := set[k]; !named {
				delete(rebuilt, k)
			}
		}
		for k, v := range set {
			rebuilt[k] = v
		}
		var want map[string]any
		require.NoError(t, json.Unmarshal(aj, &want))
		require.Equal(t, want, rebuilt)
		// And nothing unchanged is kept.
		for k := range set {
			bv, _ := json.Marshal(before[k])
			av, _ := json.Marshal(after[k])
			_, had := before[k]
			require.False(t, had && string(bv) == string(av), "unchanged %s kept", k)
		}
	})
}
