package plugin

import (
	"github.com/rustbill/paymentd/internal/text"

	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// maxHostParams is the contract's bound on a host function's parameters.
const maxHostParams = 5

// Log lines per call and bytes per line: a script looping over log() must not
// flood the service's logs.
const (
	maxLogLines = 100
	maxLogBytes = 2048
)

// hostFunc is one function the service offers to scripts. Every argument is
// a string or nil (json_encode, str, snippet and json_table excepted, which
// take any value, form_encode and sign_string's params, a table, and clip's
// max_bytes and format_time's unix, a number); a call with
// more arguments than params, or an argument of another type, raises an error
// naming the function and the argument.
type hostFunc struct {
	name   string
	params []string
	fn     func(s *state, L *lua.LState, a args) int
}

// hostFunctions is the list of docs/plugins.md.
var hostFunctions = []hostFunc{
	{"log", []string{"level", "message"}, hostLog},
	{"http_get", []string{"url", "headers_json"}, hostHTTPGet},
	{"http_post", []string{"url", "body", "content_type", "options_json"}, hostHTTPPost},
	{"http_post_headers", []string{"url", "body", "headers_json", "options_json"}, hostHTTPPostHeaders},
	{"http_post_binary", []string{"url", "body_base64", "content_type", "headers_json", "options_json"}, hostHTTPPostBinary},
	{"http_mtls", []string{"method", "url", "body", "request_json", "options_json"}, hostHTTPMTLS},
	{"md5", []string{"s"}, hostMD5},
	{"sha256", []string{"s"}, hostSHA256},
	{"hmac_sha256", []string{"key", "message", "encoding"}, hostHMACSHA256},
	{"rsa_sha256_sign", []string{"private_key_pem", "message"}, hostRSASHA256Sign},
	{"rsa_sha256_verify", []string{"public_key_pem", "message", "signature_base64"}, hostRSASHA256Verify},
	{"aes_256_gcm_decrypt", []string{"key", "nonce", "associated_data", "ciphertext_base64"}, hostAES256GCMDecrypt},
	{"constant_time_equals", []string{"a", "b"}, hostConstantTimeEquals},
	{"base64_encode", []string{"s"}, hostBase64Encode},
	{"base64_decode", []string{"s"}, hostBase64Decode},
	{"urlencode", []string{"s"}, hostURLEncode},
	{"urldecode", []string{"s"}, hostURLDecode},
	{"json_encode", []string{"value"}, hostJSONEncode},
	{"json_decode", []string{"s"}, hostJSONDecode},
	{"clip", []string{"s", "max_bytes"}, hostClip},
	{"str", []string{"value"}, hostStr},
	{"snippet", []string{"value"}, hostSnippet},
	{"json_table", []string{"s"}, hostJSONTable},
	{"form_encode", []string{"params"}, hostFormEncode},
	{"sign_string", []string{"params", "exclude"}, hostSignString},
	{"parse_query", []string{"s"}, hostParseQuery},
	{"now", nil, hostNow},
	{"now_unix", nil, hostNowUnix},
	{"format_time", []string{"unix", "utc_offset", "layout"}, hostFormatTime},
}

func init() {
	for _, h := range hostFunctions {
		if len(h.params) > maxHostParams {
			panic("plugin: host function " + h.name + " has more than 5 parameters")
		}
	}
}

// args reads the arguments of one host call.
type args struct {
	h *hostFunc
	L *lua.LState
}

// str returns argument i (1-based) as a string; nil is an error.
func (a args) str(i int) string {
	v, ok := a.opt(i)
	if !ok {
		a.L.RaiseError("%s: argument %d (%s) is required", a.h.name, i, a.h.params[i-1])
	}
	return v
}

// opt returns argument i, or "" and false when it is nil or absent.
func (a args) opt(i int) (string, bool) {
	switch v := a.L.Get(i).(type) {
	case lua.LString:
		return string(v), true
	case *lua.LNilType:
		return "", false
	default:
		a.L.RaiseError("%s: argument %d (%s) must be a string, got %s", a.h.name, i, a.h.params[i-1], v.Type())
		return "", false
	}
}

func (s *state) hostFunction(h hostFunc) lua.LGFunction {
	return func(L *lua.LState) int {
		if n := L.GetTop(); n > len(h.params) {
			L.RaiseError("%s: takes at most %d %s, got %d", h.name, len(h.params), plural(len(h.params), "argument"), n)
		}
		return h.fn(s, L, args{h: &h, L: L})
	}
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// pushString returns a host function's string result, charged to the budget.
func (s *state) pushString(L *lua.LState, str string) int {
	s.budget.alloc(L, int64(len(str)))
	L.Push(lua.LString(str))
	return 1
}

var logLevels = map[string]slog.Level{
	"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError,
}

func hostLog(s *state, L *lua.LState, a args) int {
	level, ok := logLevels[a.str(1)]
	if !ok {
		L.RaiseError("log: argument 1 (level) must be debug, info, warn or error")
	}
	s.log(level, a.str(2))
	return 0
}

// luaPrint replaces print: its arguments, tab-separated, logged at info.
func (s *state) luaPrint(L *lua.LState) int {
	var sb strings.Builder
	for i := 1; i <= L.GetTop(); i++ {
		if i > 1 {
			sb.WriteByte('\t')
		}
		sb.WriteString(L.ToStringMeta(L.Get(i)).String())
		if sb.Len() > maxLogBytes {
			break
		}
	}
	s.log(slog.LevelInfo, sb.String())
	return 0
}

func (s *state) log(level slog.Level, msg string) {
	s.logs++
	if s.logs > maxLogLines {
		return
	}
	ctx := s.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	if !s.env.logger.Enabled(ctx, level) {
		return
	}
	if s.logs == maxLogLines {
		msg = "log line limit reached, further lines of this call are dropped"
		level = slog.LevelWarn
	}
	s.env.logger.Log(ctx, level, text.Clip(msg, maxLogBytes),
		slog.String("plugin", s.script.name), slog.String("function", s.fn))
}

func hostMD5(s *state, L *lua.LState, a args) int {
	in := a.str(1)
	s.budget.charge(L, int64(len(in)/64))
	sum := md5.Sum([]byte(in))
	return s.pushString(L, hex.EncodeToString(sum[:]))
}

func hostSHA256(s *state, L *lua.LState, a args) int {
	in := a.str(1)
	s.budget.charge(L, int64(len(in)/64))
	sum := sha256.Sum256([]byte(in))
	return s.pushString(L, hex.EncodeToString(sum[:]))
}

func hostBase64Encode(s *state, L *lua.LState, a args) int {
	in := a.str(1)
	s.budget.alloc(L, int64(base64.StdEncoding.EncodedLen(len(in))))
	L.Push(lua.LString(base64.StdEncoding.EncodeToString([]byte(in))))
	return 1
}

func hostBase64Decode(s *state, L *lua.LState, a args) int {
	in := a.str(1)
	out, err := base64.StdEncoding.DecodeString(in)
	if err != nil {
		L.RaiseError("base64_decode: %s", err.Error())
	}
	return s.pushString(L, string(out))
}

// urlencode and urldecode use form encoding (space ↔ "+"), as the
// application/x-www-form-urlencoded bodies and query strings gateways sign.
func hostURLEncode(s *state, L *lua.LState, a args) int {
	in := a.str(1)
	s.budget.alloc(L, int64(3*len(in))) // the worst case, before building
	L.Push(lua.LString(url.QueryEscape(in)))
	return 1
}

func hostURLDecode(s *state, L *lua.LState, a args) int {
	out, err := url.QueryUnescape(a.str(1))
	if err != nil {
		L.RaiseError("urldecode: %s", err.Error())
	}
	return s.pushString(L, out)
}

// maxClip bounds clip's max_bytes: what a message or a log line holds.
const maxClip = 64 << 10

// hostClip keeps at most max_bytes of s for a message, cut before a
// character, never inside one, with "…" when it cut; bytes that are not
// UTF-8 and NULs become "?". What it answers can always go out through
// json_encode (text.Clip, as the service clips what it stores).
func hostClip(s *state, L *lua.LState, a args) int {
	in := a.str(1)
	n, ok := L.Get(2).(lua.LNumber)
	if !ok || n < 1 || n > maxClip || n != lua.LNumber(int(n)) {
		L.RaiseError("clip: argument 2 (max_bytes) must be a whole number from 1 to %d", maxClip)
	}
	return s.pushString(L, text.Clip(in, int(n)))
}

func hostJSONEncode(s *state, L *lua.LState, _ args) int {
	L.Push(lua.LString(s.json.encode(L, L.Get(1))))
	return 1
}

func hostJSONDecode(s *state, L *lua.LState, a args) int {
	L.Push(s.jsonDecode(L, a.str(1)))
	return 1
}

// hostParseQuery splits a query string or form body into a table of the
// first value of each key, both exactly as received: no percent-decoding, no
// "+" to space. A gateway signs the values it sent, and any re-encoding can
// break the comparison; urldecode is there when a decoded value is wanted.
func hostParseQuery(s *state, L *lua.LState, a args) int {
	in := a.str(1)
	t := L.NewTable()
	n := 0
	for part := range strings.SplitSeq(in, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		if k == "" || t.RawGetString(k) != lua.LNil {
			continue // the first of repeated keys wins
		}
		t.RawSetString(k, lua.LString(v))
		n++
	}
	s.budget.charge(L, int64(n))
	s.budget.alloc(L, int64(jsonTableCost+n*jsonValueCost))
	L.Push(t)
	return 1
}

func hostNow(s *state, L *lua.LState, _ args) int {
	return s.pushString(L, s.env.now().UTC().Format(time.RFC3339))
}

// The seconds format_time takes: the years 0001 to 9999, which every
// layout writes in four digits.
var (
	minFormatUnix = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).Unix() + 14*3600
	maxFormatUnix = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Unix() - 14*3600
)

// hostFormatTime is format_time(unix, utc_offset, layout): whole seconds
// since 1970 written in Go's reference layout ("2006-01-02 15:04:05",
// "2006-01-02T15:04:05Z07:00") at a fixed offset from UTC ("+08:00",
// "-05:30", "Z"). Gateways that read times in their own zone (Alipay's and
// WeChat Pay's Beijing time) once each carried a civil-date algorithm in Lua.
func hostFormatTime(s *state, L *lua.LState, a args) int {
	n, ok := L.Get(1).(lua.LNumber)
	if !ok || n != lua.LNumber(int64(n)) || int64(n) < minFormatUnix || int64(n) > maxFormatUnix {
		L.RaiseError("format_time: argument 1 (unix) must be whole seconds since 1970 within the years 0001 to 9999")
	}
	offset, layout := a.str(2), a.str(3)
	zone, err := fixedZone(offset)
	if err != nil {
		L.RaiseError("format_time: argument 2 (utc_offset) %s", err)
	}
	if layout == "" || len(layout) > 64 {
		L.RaiseError("format_time: argument 3 (layout) must be a Go time layout of 1 to 64 bytes, such as \"2006-01-02 15:04:05\"")
	}
	return s.pushString(L, time.Unix(int64(n), 0).In(zone).Format(layout))
}

// fixedZone reads "Z" or "±hh:mm" (at most ±14:00).
func fixedZone(offset string) (*time.Location, error) {
	if offset == "Z" {
		return time.UTC, nil
	}
	bad := fmt.Errorf("must be \"Z\" or \"+hh:mm\"/\"-hh:mm\" up to 14:00, got %q", text.Clip(offset, 32))
	if len(offset) != 6 || (offset[0] != '+' && offset[0] != '-') || offset[3] != ':' {
		return nil, bad
	}
	h, errH := strconv.Atoi(offset[1:3])
	m, errM := strconv.Atoi(offset[4:6])
	if errH != nil || errM != nil || h > 14 || m > 59 || (h == 14 && m > 0) || offset[1] == '+' || offset[1] == '-' || offset[4] == '+' || offset[4] == '-' {
		return nil, bad
	}
	secs := h*3600 + m*60
	if offset[0] == '-' {
		secs = -secs
	}
	return time.FixedZone(offset, secs), nil
}
