package plugin

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A message that quotes an answer the call received is cut where the
// quote starts, whether the plugin quoted the raw bytes or the decoded
// strings of a JSON answer; its own words stay.
func TestUpstreamWithholdsWhatQuotesAnAnswer(t *testing.T) {
	t.Parallel()
	const metrics = "# HELP go_build_info Build information about the main Go module.\ngo_build_info{path=\"x\"} 1\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metrics":
			_, _ = w.Write([]byte(metrics))
		case "/json":
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"msg":"\u5546\u6237\u5bc6\u94a5\u9519\u8bef-internal-detail"}`))
		case "/short":
			_, _ = w.Write([]byte("pwned"))
		}
	}))
	t.Cleanup(srv.Close)
	hb := setupHTTP(t)
	call := func(body string) (string, *Upstream) {
		ctx, up := WithUpstream(context.Background())
		out, err := hb.load(t, probe(strings.ReplaceAll(body, "URL", srv.URL))).Call(ctx, "test_config", "{}", "{}")
		require.NoError(t, err)
		return out, up
	}

	out, up := call(`local r = json_decode(http_get("URL/metrics")); return json_encode({ok = false, message = "not the API: " .. r.body})`)
	require.Contains(t, out, "go_build_info", "the plugin did quote it")
	msg, cut := up.Withhold(`not the API: ` + metrics)
	require.True(t, cut)
	require.Equal(t, "not the API (the rest is withheld: it quotes the answer of the upstream (HTTP 200))", msg)
	require.Equal(t, []string{strings.TrimPrefix(srv.URL, "http://")}, up.Hosts())

	_, up = call(`local r = json_decode(http_get("URL/json")); return json_encode({ok = false, message = json_decode(r.body).msg})`)
	msg, cut = up.Withhold("refused: 商户密钥错误-internal-detail")
	require.True(t, cut, "the decoded JSON string is recognised")
	require.Equal(t, "refused (the rest is withheld: it quotes the answer of the upstream (HTTP 403))", msg)

	_, up = call(`http_get("URL/short"); return json_encode({ok = true, message = ""})`)
	msg, cut = up.Withhold("pwned")
	require.True(t, cut, "a short answer is recognised whole")
	require.NotContains(t, msg, "pwned")

	msg, cut = up.Withhold("secret key accepted (test mode)")
	require.False(t, cut, "the plugin's own words are not an answer's")
	require.Equal(t, "secret key accepted (test mode)", msg)

	var none *Upstream
	msg, cut = none.Withhold("anything")
	require.False(t, cut)
	require.Equal(t, "anything", msg)
}
