package server

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"html"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
)

// The admin console is a single-page app built by Vite with relative URLs
// (base "./"); its index.html carries this <base href>, which is rewritten to
// [server].admin_path + "/" so that one build works under any path.
const adminBasePlaceholder = `<base href="/admin/" />`

// adminCSP allows the console's own files and nothing else: no inline script
// or style, no framing, and API calls only to this origin.
const adminCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; " +
	"connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'"

// Cache policies: assets/ names carry a content hash, so they never change;
// everything else (index.html, favicon) is revalidated on every load.
const (
	cacheImmutable  = "public, max-age=31536000, immutable"
	cacheRevalidate = "no-cache"
)

// adminFile is one file of the console. Its bytes, gzip form and ETag are
// read from the embedded bundle at its first request, not at start: a
// process whose console nobody opens holds none of it (about 0.9 MB of
// heap for the 300 KB script and its compression, docs/performance.md,
// "Idle RSS").
type adminFile struct {
	name        string
	dist        fs.FS
	contentType string
	cache       string

	once sync.Once
	err  error
	body []byte
	gz   []byte // nil when compressing does not pay
	etag string
}

// adminUI serves the embedded console under prefix ("/admin"): files as they
// are, any other path without a file extension as index.html (deep links
// such as /admin/payments/<id> survive a reload), and 404 for a missing
// asset, so a stale script URL never receives HTML.
type adminUI struct {
	prefix string
	files  map[string]*adminFile
	index  *adminFile
}

// newAdminUI lists every file of dist and reads index.html, whose base it
// rewrites to prefix; the other files are read at their first request. It
// fails on a bundle without index.html or without the <base> placeholder
// (a build defect the tests catch).
func newAdminUI(dist fs.FS, prefix string) (*adminUI, error) {
	ui := &adminUI{prefix: prefix, files: map[string]*adminFile{}}
	err := fs.WalkDir(dist, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		cache := cacheRevalidate
		if strings.HasPrefix(name, "assets/") {
			cache = cacheImmutable
		}
		ui.files[name] = &adminFile{name: name, dist: dist, cache: cache}
		return nil
	})
	if err != nil {
		return nil, err
	}
	ui.index = ui.files["index.html"]
	if ui.index == nil {
		return nil, errors.New("admin UI: the bundle has no index.html (run task ui)")
	}
	body, err := fs.ReadFile(dist, "index.html")
	if err != nil {
		return nil, err
	}
	if !bytes.Contains(body, []byte(adminBasePlaceholder)) {
		return nil, fmt.Errorf("admin UI: index.html has no %s to rewrite", adminBasePlaceholder)
	}
	ui.index.once.Do(func() { ui.index.set(bytes.Replace(body, []byte(adminBasePlaceholder), []byte(baseTag(prefix)), 1)) })
	return ui, nil
}

// baseTag is the <base> element for prefix, escaped for a URL path and for HTML.
func baseTag(prefix string) string {
	u := url.URL{Path: prefix + "/"}
	return `<base href="` + html.EscapeString(u.EscapedPath()) + `" />`
}

// load reads the file from the bundle once.
func (f *adminFile) load() error {
	f.once.Do(func() {
		body, err := fs.ReadFile(f.dist, f.name)
		if err != nil {
			f.err = err
			return
		}
		f.set(body)
	})
	return f.err
}

// set takes body as the file's bytes, with its ETag and its gzip form.
func (f *adminFile) set(body []byte) {
	sum := sha256.Sum256(body)
	f.body = body
	f.etag = `"` + hex.EncodeToString(sum[:12]) + `"`
	f.contentType = consoleType(f.name)
	if f.contentType == "" {
		f.contentType = http.DetectContentType(body)
	}
	if compressible(f.contentType) && len(body) > 512 {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		_, _ = zw.Write(body)
		_ = zw.Close()
		if buf.Len() < len(body)*9/10 {
			f.gz = buf.Bytes()
		}
	}
}

// consoleTypes are the types of what Vite writes into the bundle, the
// same on every system. Anything else asks the mime package, which reads
// the system's whole mime.types (0.4 MB of heap) the first time it is
// asked: never at start, where index.html is read.
var consoleTypes = map[string]string{
	".html":  "text/html; charset=utf-8",
	".js":    "text/javascript; charset=utf-8",
	".css":   "text/css; charset=utf-8",
	".svg":   "image/svg+xml",
	".png":   "image/png",
	".json":  "application/json",
	".woff2": "font/woff2",
}

func consoleType(name string) string {
	if t, ok := consoleTypes[path.Ext(name)]; ok {
		return t
	}
	return mime.TypeByExtension(path.Ext(name))
}

func compressible(contentType string) bool {
	ct, _, _ := strings.Cut(contentType, ";")
	switch ct {
	case "text/html", "text/css", "text/javascript", "application/javascript", "application/json", "image/svg+xml", "text/plain":
		return true
	}
	return false
}

func (ui *adminUI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", adminCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Path == ui.prefix {
		target := url.URL{Path: ui.prefix + "/", RawQuery: r.URL.RawQuery}
		http.Redirect(w, r, target.String(), http.StatusMovedPermanently)
		return
	}
	rel := strings.TrimPrefix(r.URL.Path, ui.prefix+"/")
	f := ui.files[rel]
	if rel == "" || rel == "index.html" {
		f = ui.index
	}
	if f == nil {
		if strings.HasPrefix(rel, "assets/") || path.Ext(rel) != "" {
			h.Set("Cache-Control", "no-store")
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		// A screen of the app (deep link): the app's router draws it.
		f = ui.index
	}
	serveAdminFile(w, r, f)
}

func serveAdminFile(w http.ResponseWriter, r *http.Request, f *adminFile) {
	h := w.Header()
	if err := f.load(); err != nil {
		h.Set("Cache-Control", "no-store")
		http.Error(w, "the console's file could not be read", http.StatusInternalServerError)
		return
	}
	body, etag := f.body, f.etag
	if f.gz != nil {
		h.Add("Vary", "Accept-Encoding")
		if acceptsGzip(r.Header.Get("Accept-Encoding")) {
			body, etag = f.gz, strings.TrimSuffix(f.etag, `"`)+`-gz"`
			h.Set("Content-Encoding", "gzip")
		}
	}
	h.Set("Content-Type", f.contentType)
	h.Set("Cache-Control", f.cache)
	h.Set("ETag", etag)
	if etagMatches(r.Header.Get("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// acceptsGzip reads Accept-Encoding for gzip with a non-zero quality.
func acceptsGzip(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			continue
		}
		q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}

func etagMatches(header, etag string) bool {
	if header == "" {
		return false
	}
	for part := range strings.SplitSeq(header, ",") {
		t := strings.TrimPrefix(strings.TrimSpace(part), "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}
