package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// Upstream keeps what the HTTP answers of the plugin calls made with its
// context said, so that the caller can keep their words out of what it
// shows. An admin may point a plugin at any URL (an interface's api_url):
// if the plugin's message quoted the answer, TestGatewayInterface would
// read any page the service can reach — its own metrics, a cloud's
// metadata — for whoever may edit a config. Withhold cuts such a quote.
//
// It holds the bodies until it is dropped: make one per operation, never
// one per process.
type Upstream struct {
	mu       sync.Mutex
	texts    [][]byte // each body, and the strings of the JSON ones decoded
	statuses []int
	hosts    []string
}

type upstreamKey struct{}

// WithUpstream returns ctx with a new Upstream that the http_* host
// functions of the plugin calls made with ctx report their answers to.
func WithUpstream(ctx context.Context) (context.Context, *Upstream) {
	u := &Upstream{}
	return context.WithValue(ctx, upstreamKey{}, u), u
}

// UpstreamOf is ctx's Upstream, or nil.
func UpstreamOf(ctx context.Context) *Upstream {
	if ctx == nil {
		return nil
	}
	u, _ := ctx.Value(upstreamKey{}).(*Upstream)
	return u
}

// maxDecodedBytes bounds the JSON decoding of an answer for its strings:
// the raw bytes are kept whole, and a quote from a JSON document past the
// bound is still found there unless it held escapes.
const maxDecodedBytes = 1 << 20

func (u *Upstream) record(target *url.URL, status int, body []byte) {
	texts := [][]byte{body}
	if !utf8.Valid(body) {
		// The plugin reads "body" with the bad bytes replaced.
		texts = append(texts, []byte(strings.ToValidUTF8(string(body), "\uFFFD")))
	}
	if s := jsonStrings(body); len(s) > 0 {
		texts = append(texts, s)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.texts = append(u.texts, texts...)
	u.statuses = append(u.statuses, status)
	if !slices.Contains(u.hosts, target.Host) {
		u.hosts = append(u.hosts, target.Host)
	}
}

// jsonStrings is the strings of a JSON body (keys and values) decoded and
// joined by NUL, or nil when it is not JSON: a plugin that decodes the
// answer quotes "订单" where the body says "\u8ba2\u5355".
func jsonStrings(body []byte) []byte {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || (trimmed[0] != '{' && trimmed[0] != '[') || len(body) > maxDecodedBytes || !bytes.Contains(body, []byte(`\`)) {
		return nil // not JSON, too long, or no escape: the raw bytes say it all
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	var out []byte
	for {
		tok, err := dec.Token()
		if err != nil { // io.EOF at the end, or not JSON after all
			return out
		}
		if s, ok := tok.(string); ok {
			out = append(append(out, s...), 0)
		}
	}
}

// Hosts are the hosts the calls sent requests to, in order, each once.
func (u *Upstream) Hosts() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string{}, u.hosts...)
}

// quoteBytes is the shortest run of an answer's bytes that Withhold
// recognises in a message. Shorter runs are common words ("HTTP", "error")
// that a message has of its own; an answer shorter than it is recognised
// whole from minWholeAnswer bytes on.
const (
	quoteBytes     = 8
	minWholeAnswer = 3
)

// Withhold returns msg cut where it starts quoting an answer the calls
// received (a run of quoteBytes bytes of one, or a short answer whole), and
// whether it cut. The cut message says so and gives the answers' HTTP
// statuses instead; what precedes the quote (the plugin's own words) stays.
func (u *Upstream) Withhold(msg string) (string, bool) {
	if u == nil || msg == "" {
		return msg, false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	cut := len(msg)
	var windows map[string]int
	if len(msg) >= quoteBytes {
		windows = make(map[string]int, len(msg))
		for i := len(msg) - quoteBytes; i >= 0; i-- {
			windows[msg[i:i+quoteBytes]] = i // the earliest wins
		}
	}
	for _, t := range u.texts {
		if whole := bytes.TrimSpace(t); len(whole) < quoteBytes {
			if len(whole) >= minWholeAnswer {
				if i := strings.Index(msg, string(whole)); i >= 0 && i < cut {
					cut = i
				}
			}
			continue
		}
		if windows == nil {
			continue
		}
		for i := 0; i+quoteBytes <= len(t); i++ {
			if j, ok := windows[string(t[i:i+quoteBytes])]; ok && j < cut {
				if cut = j; cut == 0 {
					break
				}
			}
		}
	}
	if cut == len(msg) {
		return msg, false
	}
	note := fmt.Sprintf("the rest is withheld: it quotes the answer of the upstream (HTTP %s)", u.statusList())
	head := strings.TrimRight(msg[:cut], " \t\n:;,.-([{\"'=")
	if head == "" {
		return strings.ToUpper(note[:1]) + note[1:], true
	}
	// The cut may fall inside a UTF-8 sequence of the plugin's own words.
	return strings.ToValidUTF8(head, "") + " (" + note + ")", true
}

func (u *Upstream) statusList() string {
	if len(u.statuses) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(u.statuses))
	for _, s := range u.statuses {
		if p := fmt.Sprint(s); !slices.Contains(parts, p) {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, ", ")
}
