package server_test

import (
	"compress/gzip"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	adminui "github.com/rustbill/paymentd/admin-ui"
	"github.com/rustbill/paymentd/internal/server"
)

const testIndex = `<!doctype html><html><head><base href="/admin/" /><script type="module" src="./assets/index-abc123.js"></script></head><body><div id="app"></div></body></html>`

func testBundle() fstest.MapFS {
	return fstest.MapFS{
		"index.html":             {Data: []byte(testIndex)},
		"favicon.svg":            {Data: []byte(`<svg xmlns="http://www.w3.org/2000/svg"></svg>`)},
		"assets/index-abc123.js": {Data: []byte(strings.Repeat("console.log('paymentd admin');\n", 100))},
	}
}

type consoleBundle struct {
	handler    http.Handler
	middleHits *atomic.Int64
}

func setupConsole(t *testing.T, dist fs.FS, adminPath string) *consoleBundle {
	t.Helper()
	var hits atomic.Int64
	srv := server.New(server.Options{
		AdminPath: adminPath,
		DB:        &fakeDB{},
		Logger:    slog.New(slog.NewTextHandler(t.Output(), nil)),
		AdminUI:   dist,
		Limits: []server.Middleware{func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				next.ServeHTTP(w, r)
			})
		}},
	})
	return &consoleBundle{handler: srv.Handler(), middleHits: &hits}
}

func (c *consoleBundle) do(t *testing.T, method, target string, header ...string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	c.handler.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

func requireSecurityHeaders(t *testing.T, resp *http.Response) {
	t.Helper()
	csp := resp.Header.Get("Content-Security-Policy")
	require.Contains(t, csp, "default-src 'self'")
	require.Contains(t, csp, "script-src 'self'")
	require.NotContains(t, csp, "unsafe-inline")
	require.Contains(t, csp, "frame-ancestors 'none'")
	require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	require.Equal(t, "no-referrer", resp.Header.Get("Referrer-Policy"))
}

func TestConsoleIndexHasTheAdminPathAsBaseAndIsRevalidated(t *testing.T) {
	t.Parallel()
	c := setupConsole(t, testBundle(), "/admin")
	resp := c.do(t, http.MethodGet, "/admin/")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Equal(t, "no-cache", resp.Header.Get("Cache-Control"))
	requireSecurityHeaders(t, resp)
	require.Contains(t, body(t, resp), `<base href="/admin/" />`)
	require.Zero(t, c.middleHits.Load(), "the console's files skip the middleware layers")
}

func TestConsoleDeepLinkAnswersIndexSoAReloadWorks(t *testing.T) {
	t.Parallel()
	c := setupConsole(t, testBundle(), "/admin")
	for _, p := range []string{"/admin/payments/7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f", "/admin/orders?status=paid", "/admin/index.html"} {
		resp := c.do(t, http.MethodGet, p)
		require.Equal(t, http.StatusOK, resp.StatusCode, p)
		require.Equal(t, "no-cache", resp.Header.Get("Cache-Control"), p)
		require.Contains(t, body(t, resp), `<div id="app">`, p)
	}
}

func TestConsoleHashedAssetsAreCachedForAYear(t *testing.T) {
	t.Parallel()
	c := setupConsole(t, testBundle(), "/admin")
	resp := c.do(t, http.MethodGet, "/admin/assets/index-abc123.js")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "public, max-age=31536000, immutable", resp.Header.Get("Cache-Control"))
	require.Contains(t, resp.Header.Get("Content-Type"), "javascript")
	requireSecurityHeaders(t, resp)
	require.Contains(t, body(t, resp), "paymentd admin")
}

func TestConsoleMissingAssetIsNotFoundRatherThanIndex(t *testing.T) {
	t.Parallel()
	c := setupConsole(t, testBundle(), "/admin")
	for _, p := range []string{"/admin/assets/index-old.js", "/admin/logo.png", "/admin/assets/nested/x"} {
		resp := c.do(t, http.MethodGet, p)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, p)
		require.NotContains(t, body(t, resp), "<html", p)
	}
}

func TestConsolePathWithoutSlashRedirects(t *testing.T) {
	t.Parallel()
	c := setupConsole(t, testBundle(), "/admin")
	resp := c.do(t, http.MethodGet, "/admin?x=1")
	require.Equal(t, http.StatusMovedPermanently, resp.StatusCode)
	require.Equal(t, "/admin/?x=1", resp.Header.Get("Location"))
}

func TestConsoleFollowsAnotherAdminPath(t *testing.T) {
	t.Parallel()
	c := setupConsole(t, testBundle(), "/ops/console")
	resp := c.do(t, http.MethodGet, "/ops/console/payments/7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body(t, resp), `<base href="/ops/console/" />`)

	resp = c.do(t, http.MethodGet, "/ops/console/assets/index-abc123.js")
	require.Equal(t, http.StatusOK, resp.StatusCode)

	resp = c.do(t, http.MethodGet, "/admin/")
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "the default path is not served when another is configured")
	require.Equal(t, int64(1), c.middleHits.Load(), "other paths go through the middleware to the mux")
}

func TestConsoleBaseIsEscapedForHTML(t *testing.T) {
	t.Parallel()
	c := setupConsole(t, testBundle(), `/a"b<c> d`)
	resp := c.do(t, http.MethodGet, "/a%22b%3Cc%3E%20d/")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	html := body(t, resp)
	require.Contains(t, html, `<base href="/a%22b%3Cc%3E%20d/" />`)
	require.NotContains(t, html, `"b<c>`)
}

func TestConsoleIsGzippedWhenAcceptedAndAnswers304ToItsETag(t *testing.T) {
	t.Parallel()
	c := setupConsole(t, testBundle(), "/admin")
	plain := c.do(t, http.MethodGet, "/admin/assets/index-abc123.js")
	plainBody := body(t, plain)
	require.Empty(t, plain.Header.Get("Content-Encoding"))
	require.Equal(t, "Accept-Encoding", plain.Header.Get("Vary"))

	gz := c.do(t, http.MethodGet, "/admin/assets/index-abc123.js", "Accept-Encoding", "br, gzip")
	require.Equal(t, "gzip", gz.Header.Get("Content-Encoding"))
	zr, err := gzip.NewReader(gz.Body)
	require.NoError(t, err)
	unzipped, err := io.ReadAll(zr)
	require.NoError(t, err)
	require.Equal(t, plainBody, string(unzipped))
	require.NotEqual(t, plain.Header.Get("ETag"), gz.Header.Get("ETag"), "each encoding has its own validator")

	notModified := c.do(t, http.MethodGet, "/admin/assets/index-abc123.js", "If-None-Match", plain.Header.Get("ETag"))
	require.Equal(t, http.StatusNotModified, notModified.StatusCode)
	require.Empty(t, body(t, notModified))

	refused := c.do(t, http.MethodGet, "/admin/assets/index-abc123.js", "Accept-Encoding", "gzip;q=0")
	require.Empty(t, refused.Header.Get("Content-Encoding"))
}

func TestConsoleAnswersOnlyGetAndHead(t *testing.T) {
	t.Parallel()
	c := setupConsole(t, testBundle(), "/admin")
	resp := c.do(t, http.MethodPost, "/admin/")
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	require.Equal(t, "GET, HEAD", resp.Header.Get("Allow"))

	head := c.do(t, http.MethodHead, "/admin/")
	require.Equal(t, http.StatusOK, head.StatusCode)
	require.Empty(t, body(t, head))
}

func TestConsoleBundleWithoutBasePlaceholderAnswers503AndTheAPIStillWorks(t *testing.T) {
	t.Parallel()
	bad := testBundle()
	bad["index.html"] = &fstest.MapFile{Data: []byte("<!doctype html><title>x</title>")}
	c := setupConsole(t, bad, "/admin")
	require.Equal(t, http.StatusServiceUnavailable, c.do(t, http.MethodGet, "/admin/").StatusCode)
	require.Equal(t, http.StatusOK, c.do(t, http.MethodGet, "/ready").StatusCode)
}

var assetRef = regexp.MustCompile(`(?:src|href)="\./(assets/[^"]+)"`)

// The committed build (admin-ui/dist) is what the binary serves: it must
// load, and every asset its index.html names must be in it.
func TestCommittedConsoleBundleIsComplete(t *testing.T) {
	t.Parallel()
	dist := adminui.Dist()
	c := setupConsole(t, dist, "/admin")
	resp := c.do(t, http.MethodGet, "/admin/")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	html := body(t, resp)
	require.Contains(t, html, `<base href="/admin/" />`)
	require.NotRegexp(t, `<script>|<script [^>]*>[^<]`, html, "no inline script: the CSP forbids it")
	refs := assetRef.FindAllStringSubmatch(html, -1)
	require.NotEmpty(t, refs, "index.html names its script and stylesheet")
	for _, m := range refs {
		_, err := fs.Stat(dist, m[1])
		require.NoError(t, err, "index.html names %s", m[1])
		resp := c.do(t, http.MethodGet, "/admin/"+m[1])
		require.Equal(t, http.StatusOK, resp.StatusCode, m[1])
		require.Equal(t, "public, max-age=31536000, immutable", resp.Header.Get("Cache-Control"))
	}
}

// countingFS counts the opens of each file of a bundle.
type countingFS struct {
	fs.FS
	opens map[string]*atomic.Int64
}

func (c countingFS) Open(name string) (fs.File, error) {
	if n := c.opens[name]; n != nil {
		n.Add(1)
	}
	return c.FS.Open(name)
}

// The console's files are read at their first request, once: a service
// whose console nobody opens holds none of the bundle in memory.
func TestConsoleFilesAreReadAtTheirFirstRequestOnly(t *testing.T) {
	t.Parallel()
	const asset = "assets/index-abc123.js"
	opens := map[string]*atomic.Int64{asset: {}, "favicon.svg": {}}
	c := setupConsole(t, countingFS{FS: testBundle(), opens: opens}, "/admin")
	require.Zero(t, opens[asset].Load(), "the script is not read at start")
	require.Zero(t, opens["favicon.svg"].Load())

	var etags []string
	for range 3 {
		resp := c.do(t, http.MethodGet, "/admin/"+asset, "Accept-Encoding", "gzip")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "gzip", resp.Header.Get("Content-Encoding"))
		zr, err := gzip.NewReader(resp.Body)
		require.NoError(t, err)
		body, err := io.ReadAll(zr)
		require.NoError(t, err)
		require.Equal(t, testBundle()[asset].Data, body)
		etags = append(etags, resp.Header.Get("ETag"))
	}
	require.Equal(t, int64(1), opens[asset].Load(), "read once, at the first request")
	require.Equal(t, etags[0], etags[2])
	require.Zero(t, opens["favicon.svg"].Load(), "a file nobody asked for is still unread")
}
