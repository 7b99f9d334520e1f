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
	merged, err := s.Merge(map[string]any{"auth": map[string]any{"token": "t"}, "key": "k"}, map[string]any{"auth": map[string]any{"token": configschema.Mask}})
	require.NoError(t, err)
	require.Equal(t, map[string]any{"auth": map[string]any{"token": "t"}, "key": "k"}, merged)
}

func TestEndpointMarkerIsRefusedWhereMergeCannotFindIt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ schema, want string }{
		{`{"x-endpoint": true}`, "only on properties"},
		{`{"properties": {"u": {"type": "string", "x-endpoint": 1}}}`, "must be true or false"},
		{`{"properties": {"u": {"type": "object", "x-endpoint": true}}}`, `endpoint property config.u must have "type": "string"`},
		{`{"anyOf": [{"properties": {"u": {"type": "string", "x-endpoint": true}}}]}`, "only on properties"},
	} {
		_, err := configschema.Parse([]byte(tc.schema))
		require.ErrorContains(t, err, tc.want, tc.schema)
	}
}

// endpointSchema is epay's shape: a URL the plugin sends the secret key to.
const endpointSchema = `{"properties": {
  "api_url": {"type": "string", "x-endpoint": true},
  "gateway_url": {"type": "string", "x-endpoint": true, "default": "https://gw.example/"},
  "pid": {"type": "string"},
  "key": {"type": "string", "x-secret": true}}}`

func TestMaskIsRefusedWhenTheSameUpdateChangesAnEndpoint(t *testing.T) {
	t.Parallel()
	s, err := configschema.Parse([]byte(endpointSchema))
	require.NoError(t, err)
	require.Equal(t, []string{"api_url", "gateway_url"}, s.Endpoints())
	stored := map[string]any{"api_url": "https://pay.example/", "pid": "1", "key": "merchant-key"}

	for name, incoming := range map[string]map[string]any{
		"mask":     {"api_url": "http://listener.invalid/", "pid": "1", "key": configschema.Mask},
		"omitted":  {"api_url": "http://listener.invalid/", "pid": "1"},
		"removed":  {"pid": "1", "key": configschema.Mask},
		"other gw": {"api_url": "https://pay.example/", "gateway_url": "http://listener.invalid/", "pid": "1"},
	} {
		_, err := s.Merge(stored, incoming)
		var kept *configschema.KeptSecretsError
		require.ErrorAs(t, err, &kept, name)
		require.Equal(t, [][]string{{"key"}}, kept.Secrets, name)
		require.Contains(t, err.Error(), "send config.key again", name)
		require.NotContains(t, err.Error(), "merchant-key", name)
	}

	// The secret sent again: accepted, and the update says what it replaced.
	incoming := map[string]any{"api_url": "http://new.example/", "pid": "1", "key": "new-key"}
	merged, err := s.Merge(stored, incoming)
	require.NoError(t, err)
	require.Equal(t, "new-key", merged["key"])
	require.Equal(t, []string{"api_url"}, s.ChangedEndpoints(stored, merged))
	require.Equal(t, []string{"key"}, s.SecretsSent(incoming))

	// Endpoints unchanged (the default written out counts as unchanged):
	// the mask keeps the stored value, as before.
	merged, err = s.Merge(stored, map[string]any{"api_url": "https://pay.example/", "gateway_url": "https://gw.example/", "pid": "2", "key": configschema.Mask})
	require.NoError(t, err)
	require.Equal(t, "merchant-key", merged["key"])
	require.Empty(t, s.SecretsSent(map[string]any{"key": configschema.Mask}))

	// Nothing stored to keep: a changed endpoint needs nothing sent again.
	_, err = s.Merge(map[string]any{"api_url": "https://pay.example/"}, map[string]any{"api_url": "https://other.example/", "key": configschema.Mask})
	require.NoError(t, err)
}
