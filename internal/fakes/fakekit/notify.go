package fakekit

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Notification is one notify attempt and the merchant's answer.
type Notification struct {
	TradeNo    string
	OutTradeNo string
	Attempt    int // 1-based within its round
	Method     string
	URL        string     // the URL requested (GET: with the parameters in its query)
	Params     url.Values // what was sent, signature included
	At         time.Time
	Dropped    bool   // DropNotify was on: the attempt was "lost", nothing sent
	Status     int    // HTTP status; 0 on a transport error or when dropped
	Body       string // the answer, at most 1 KiB
	Err        string // building or sending the notify failed
	Acked      bool   // the answer was exactly the protocol's ack (spaces trimmed)
}

// NotifyOptions are what a protocol decides about its notifies.
type NotifyOptions struct {
	// Schedule is the wait before each attempt, the first counted from the
	// payment.
	Schedule []time.Duration
	// Scale multiplies every wait; 0 means 1.
	Scale float64
	// Timeout bounds one attempt; 0 means 10 s.
	Timeout time.Duration
	// Method is GET (parameters appended to the query) or POST (a form
	// body); empty means POST.
	Method string
	// ContentType of a POST body.
	ContentType string
	// UserAgent of every attempt.
	UserAgent string
	// Ack is the answer body (spaces trimmed) that acknowledges a notify;
	// the status code does not matter, as for the real gateways.
	Ack string
	// Client sends the attempts; nil means a private one whose idle
	// connections the host's Close closes.
	Client *http.Client
}

// Notifier runs the notify rounds of one fake and keeps every attempt.
type Notifier struct {
	host  *Host
	opts  NotifyOptions
	drop  atomic.Bool
	ended atomic.Int64

	mu   sync.Mutex
	sent []Notification
}

// NewNotifier builds the notifier of host's fake.
func NewNotifier(host *Host, opts NotifyOptions) *Notifier {
	if opts.Scale <= 0 {
		opts.Scale = 1
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Method != http.MethodGet {
		opts.Method = http.MethodPost
	}
	if opts.Client == nil {
		c := &http.Client{Transport: &http.Transport{}}
		opts.Client = c
		host.OnClose(c.CloseIdleConnections)
	}
	return &Notifier{host: host, opts: opts}
}

// Start runs one round for tradeNo in the background: attempts on the
// schedule until one is acknowledged, the schedule ends, or the host
// closes. prepare is called before each attempt for what to send as things
// stand then (TradeNo, OutTradeNo, URL — the notify_url —, Params, At; Err
// when it could not be signed); an empty URL means there is nowhere to
// notify and ends the round.
func (n *Notifier) Start(tradeNo string, prepare func() Notification) error {
	return n.host.Go(func() {
		defer n.ended.Add(1)
		for i, wait := range n.opts.Schedule {
			if !n.host.Sleep(context.Background(), time.Duration(float64(wait)*n.opts.Scale)) {
				return
			}
			if n.attempt(tradeNo, i+1, prepare()) {
				return
			}
		}
		n.host.log.Warn("notify schedule exhausted without success", "trade_no", tradeNo)
	})
}

// attempt sends nf and records it; true when acknowledged (or when there
// is nowhere to send it).
func (n *Notifier) attempt(tradeNo string, attempt int, nf Notification) bool {
	nf.Attempt = attempt
	nf.Method = n.opts.Method
	log := n.host.log.With("trade_no", tradeNo, "attempt", attempt)
	if nf.Err != "" {
		n.record(nf)
		return false
	}
	if nf.URL == "" {
		return true
	}
	var body io.Reader
	if nf.Method == http.MethodGet {
		nf.URL = AppendQuery(nf.URL, nf.Params.Encode())
	} else {
		body = strings.NewReader(nf.Params.Encode())
	}
	if n.drop.Load() {
		nf.Dropped = true
		n.record(nf)
		log.Info("notify dropped")
		return false
	}

	ctx, cancel := context.WithTimeout(n.host.Context(), n.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, nf.Method, nf.URL, body)
	if err != nil {
		nf.Err = err.Error()
		n.record(nf)
		return false
	}
	if body != nil {
		req.Header.Set("Content-Type", n.opts.ContentType)
	}
	req.Header.Set("User-Agent", n.opts.UserAgent)
	resp, err := n.opts.Client.Do(req)
	if err != nil {
		nf.Err = err.Error()
		n.record(nf)
		log.Info("notify failed", "error", err)
		return false
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	nf.Status = resp.StatusCode
	nf.Body = string(b)
	nf.Acked = strings.TrimSpace(nf.Body) == n.opts.Ack
	n.record(nf)
	log.Info("notify answered", "status", nf.Status, "acked", nf.Acked)
	return nf.Acked
}

func (n *Notifier) record(nf Notification) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.sent = append(n.sent, nf)
}

// Drop makes every attempt, while on, get "lost": recorded with Dropped
// set, nothing sent, and the round goes on to its next retry.
func (n *Notifier) Drop(drop bool) { n.drop.Store(drop) }

// RoundsEnded counts the rounds that have ended (acknowledged, schedule
// exhausted, nowhere to send, or the host closed): a test waits for it
// before asserting that a round made no further attempt.
func (n *Notifier) RoundsEnded() int { return int(n.ended.Load()) }

// Notifications returns every attempt so far, in order, with their own
// copies of the parameters.
func (n *Notifier) Notifications() []Notification {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]Notification, len(n.sent))
	for i, nf := range n.sent {
		nf.Params = CloneValues(nf.Params)
		out[i] = nf
	}
	return out
}

// Count is how many attempts were recorded so far.
func (n *Notifier) Count() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.sent)
}
