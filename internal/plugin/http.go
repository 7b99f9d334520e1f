package plugin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	lua "github.com/yuin/gopher-lua"

	"github.com/rustbill/paymentd/internal/outbound"
)

// httpOptions is options_json: {"timeout_ms": 5000, "retry": true}. Unknown
// keys are refused: a misspelt "retry" must not silently mean "no retry" —
// nor the other way round.
type httpOptions struct {
	TimeoutMS float64 `json:"timeout_ms"`
	Retry     bool    `json:"retry"`
}

// mtlsRequest is http_mtls's request_json.
type mtlsRequest struct {
	Headers map[string]string `json:"headers"`
	CertPEM string            `json:"cert_pem"`
	KeyPEM  string            `json:"key_pem"`
	CAPEM   string            `json:"ca_pem"`
}

// request is one outbound call prepared by a host function.
type request struct {
	fname      string
	method     string
	url        string
	body       []byte
	header     http.Header
	opts       httpOptions
	idempotent bool
	binary     bool         // answer with body_base64
	mtls       *mtlsRequest // send with a one-off client holding this certificate
}

func hostHTTPGet(s *state, L *lua.LState, a args) int {
	r := request{fname: "http_get", method: http.MethodGet, url: a.str(1), idempotent: true}
	r.header = s.parseHeaders(L, r.fname, "headers_json", a, 2)
	return s.doHTTP(L, &r)
}

func hostHTTPPost(s *state, L *lua.LState, a args) int {
	r := request{fname: "http_post", method: http.MethodPost, url: a.str(1), header: http.Header{}}
	body, _ := a.opt(2)
	r.body = []byte(body)
	if ct, ok := a.opt(3); ok && ct != "" {
		r.header.Set("Content-Type", ct)
	}
	r.opts = s.parseOptions(L, r.fname, a, 4)
	r.idempotent = r.opts.Retry
	return s.doHTTP(L, &r)
}

func hostHTTPPostHeaders(s *state, L *lua.LState, a args) int {
	r := request{fname: "http_post_headers", method: http.MethodPost, url: a.str(1)}
	body, _ := a.opt(2)
	r.body = []byte(body)
	r.header = s.parseHeaders(L, r.fname, "headers_json", a, 3)
	r.opts = s.parseOptions(L, r.fname, a, 4)
	r.idempotent = r.opts.Retry
	return s.doHTTP(L, &r)
}

func hostHTTPPostBinary(s *state, L *lua.LState, a args) int {
	r := request{fname: "http_post_binary", method: http.MethodPost, url: a.str(1), binary: true}
	if b64, ok := a.opt(2); ok {
		body, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			L.RaiseError("http_post_binary: argument 2 (body_base64): %s", err.Error())
		}
		r.body = body
	}
	r.header = s.parseHeaders(L, r.fname, "headers_json", a, 4)
	if ct, ok := a.opt(3); ok && ct != "" {
		r.header.Set("Content-Type", ct)
	}
	r.opts = s.parseOptions(L, r.fname, a, 5)
	r.idempotent = r.opts.Retry
	return s.doHTTP(L, &r)
}

func hostHTTPMTLS(s *state, L *lua.LState, a args) int {
	r := request{fname: "http_mtls", method: strings.ToUpper(a.str(1)), url: a.str(2)}
	switch r.method {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		L.RaiseError("http_mtls: argument 1 (method) must be GET, POST, PUT, PATCH or DELETE")
	}
	body, _ := a.opt(3)
	r.body = []byte(body)
	spec := &mtlsRequest{}
	if raw, ok := a.opt(4); ok && raw != "" {
		if err := strictUnmarshal(raw, spec); err != nil {
			L.RaiseError("http_mtls: argument 4 (request_json): %s", err.Error())
		}
	}
	if spec.CertPEM == "" || spec.KeyPEM == "" {
		L.RaiseError("http_mtls: argument 4 (request_json) needs cert_pem and key_pem")
	}
	r.header = http.Header{}
	for k, v := range spec.Headers {
		r.header.Set(k, v)
	}
	r.mtls = spec
	r.opts = s.parseOptions(L, r.fname, a, 5)
	// The rules of the other http_* functions: a GET may be retried, any
	// other method only when the plugin says "retry": true.
	r.idempotent = r.method == http.MethodGet || r.opts.Retry
	return s.doHTTP(L, &r)
}

func strictUnmarshal(raw string, v any) error {
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

func (s *state) parseHeaders(L *lua.LState, fname, pname string, a args, i int) http.Header {
	h := http.Header{}
	raw, ok := a.opt(i)
	if !ok || raw == "" {
		return h
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		L.RaiseError("%s: argument %d (%s) must be a JSON object of strings: %s", fname, i, pname, err.Error())
	}
	for k, v := range m {
		h.Set(k, v)
	}
	return h
}

func (s *state) parseOptions(L *lua.LState, fname string, a args, i int) httpOptions {
	var o httpOptions
	raw, ok := a.opt(i)
	if !ok || raw == "" {
		return o
	}
	if err := strictUnmarshal(raw, &o); err != nil {
		L.RaiseError("%s: argument %d (options_json): %s", fname, i, err.Error())
	}
	if o.TimeoutMS < 0 {
		L.RaiseError("%s: argument %d (options_json): timeout_ms must be positive", fname, i)
	}
	return o
}

// httpContext is the context of the call's requests: the caller's context
// (cancellation, values) with the call's deadline. It is made on the first
// request only, so a call without HTTP costs no timer.
func (s *state) httpContext() context.Context {
	if s.httpCtx == nil {
		s.httpCtx, s.httpCancel = context.WithDeadline(s.ctx, s.deadline)
	}
	return s.httpCtx
}

func (s *state) doHTTP(L *lua.LState, r *request) int {
	if s.ctx == nil {
		L.RaiseError("%s: not available while the script loads", r.fname)
	}
	if s.env.http == nil {
		L.RaiseError("%s: outbound HTTP is not configured", r.fname)
	}
	u, err := url.Parse(r.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		L.RaiseError("%s: argument (url) must be an absolute http or https URL", r.fname)
	}
	if r.mtls != nil && u.Scheme != "https" {
		L.RaiseError("%s: argument 2 (url) must be an https URL", r.fname)
	}
	if !time.Now().Before(s.deadline) {
		s.budget.trip(context.DeadlineExceeded)
		L.RaiseError("%s", context.DeadlineExceeded.Error())
	}
	ctx := s.httpContext()
	if r.opts.TimeoutMS > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(r.opts.TimeoutMS*float64(time.Millisecond)))
		defer cancel()
	}
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u.String(), body)
	if err != nil {
		L.RaiseError("%s: %s", r.fname, err.Error())
	}
	if r.header != nil {
		req.Header = r.header
	}
	s.budget.charge(L, 1)
	// A POST carrying the plugin's Idempotency-Key may be resent: the
	// gateway answers the resend with its first answer.
	r.idempotent = outbound.Resendable(req, r.idempotent)

	var resp *Response
	if r.mtls != nil {
		resp, err = s.sendMTLS(req, r.mtls, r.idempotent)
	} else {
		resp, err = s.env.http.Do(req, r.idempotent)
	}
	if err != nil {
		// Kept for Call: a failing call wraps it, so the service can tell an
		// open circuit (Unavailable) from a script failure (Internal).
		s.hostErr = err
		if !time.Now().Before(s.deadline) {
			s.budget.trip(context.DeadlineExceeded)
		}
		L.RaiseError("%s: %s", r.fname, err.Error())
	}
	if resp == nil {
		L.RaiseError("%s: no response", r.fname)
	}
	if up := UpstreamOf(s.ctx); up != nil {
		up.record(u, resp.Status, resp.Body)
	}
	// Refuse a body beyond the bound before building anything from it.
	if int64(len(resp.Body)) > s.budget.remaining() {
		s.budget.alloc(L, int64(len(resp.Body)))
	}
	out := responseJSON(resp, r.binary)
	s.budget.alloc(L, int64(len(out)))
	L.Push(lua.LString(out))
	return 1
}

// responseJSON is {"status": 200, "headers": {…}, "body": "…"}. Header values
// of one name are joined with ", ". A body that is not UTF-8 (a GBK page, a
// binary file) cannot travel in a JSON string: "body" then carries it with
// the bad bytes replaced and "body_base64" the exact bytes. http_post_binary
// answers with "body_base64" only.
func responseJSON(resp *Response, binary bool) []byte {
	keys := make([]string, 0, len(resp.Header))
	for k := range resp.Header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	buf := make([]byte, 0, 64+len(resp.Body)*5/4)
	buf = append(buf, `{"status":`...)
	buf = strconv.AppendInt(buf, int64(resp.Status), 10)
	buf = append(buf, `,"headers":{`...)
	for i, k := range keys {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendJSONString(buf, strings.ToValidUTF8(k, "\uFFFD"))
		buf = append(buf, ':')
		buf = appendJSONString(buf, strings.ToValidUTF8(strings.Join(resp.Header[k], ", "), "\uFFFD"))
	}
	buf = append(buf, '}')
	if binary || !utf8.Valid(resp.Body) {
		if !binary {
			buf = append(buf, `,"body":`...)
			buf = appendJSONString(buf, strings.ToValidUTF8(string(resp.Body), "\uFFFD"))
		}
		buf = append(buf, `,"body_base64":"`...)
		buf = base64.StdEncoding.AppendEncode(buf, resp.Body)
		buf = append(buf, '"')
	} else {
		buf = append(buf, `,"body":`...)
		buf = appendJSONString(buf, string(resp.Body))
	}
	return append(buf, '}')
}

// mTLS requests go through Options.HTTP like every other request — the
// outbound client, with its breaker per host, its timeouts and its bound on
// the answer — when it can present a client certificate (MTLSDoer). The
// certificate is per gateway configuration: the request names it by a
// hash of certificate, key and CA, so the client keeps one transport (and
// its keep-alive connections) per certificate. The call is retried only
// when its options_json says "retry": true, like any POST; redirects are
// not followed (the certificate would go along).
func (s *state) sendMTLS(req *http.Request, spec *mtlsRequest, idempotent bool) (*Response, error) {
	doer, ok := s.env.http.(MTLSDoer)
	if !ok {
		return nil, errors.New("mutual TLS is not configured")
	}
	cert, err := tls.X509KeyPair([]byte(spec.CertPEM), []byte(spec.KeyPEM))
	if err != nil {
		return nil, fmt.Errorf("client certificate: %w", err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if spec.CAPEM != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(spec.CAPEM)) {
			return nil, errors.New("ca_pem holds no certificate")
		}
		cfg.RootCAs = pool
	}
	h := sha256.New()
	for _, part := range []string{spec.CertPEM, spec.KeyPEM, spec.CAPEM} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return doer.DoTLS(req, idempotent, hex.EncodeToString(h.Sum(nil)), cfg)
}
