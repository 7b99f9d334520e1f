package configschema_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/configschema"
)

func TestParseRefusesWhatItCannotHonour(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ schema, want string }{
		{`true`, "must be a JSON object"},
		{`{"$ref": "other.json"}`, "references outside the schema are not allowed"},
		{`{"$schema": "https://example.com/my-meta"}`, "references outside the schema are not allowed"},
		{`{"x-secret": true}`, "only on properties"},
		{`{"properties": {"k": {"type": "string", "x-secret": "yes"}}}`, "must be true or false"},
		{`{"properties": {"k": {"type": "integer", "x-secret": true}}}`, `must have "type": "string"`},
		{`{"$defs": {"k": {"type": "string", "x-secret": true}}}`, "only on properties"},
		{`{"type": "nonsense"}`, "does not compile"},
	} {
		_, err := configschema.Parse([]byte(tc.schema))
		require.ErrorContains(t, err, tc.want, tc.schema)
	}
	s, err := configschema.Parse([]byte(`{"properties": {"auth": {"type": "object", "properties": {"token": {"type": "string", "x-secret": true}}}, "key": {"type": "string", "x-secret": true}}}`))
	require.NoError(t, err)
	require.Equal(t, []string{"auth.token", "key"}, s.Secrets())
	masked := s.Mask(map[string]any{"auth": map[string]any{"token": "t", "user": "u"}, "key": ""})
	require.Equal(t, map[string]any{"auth": map[string]any{"token": configschema.Mask, "user": "u"}, "key": ""}, masked)
	merged := s.Merge(map[string]any{"auth": map[string]any{"token": "t"}, "key": "k"}, map[string]any{"auth": map[string]any{"token": configschema.Mask}})
	require.Equal(t, map[string]any{"auth": map[string]any{"token": "t"}, "key": "k"}, merged)
}
