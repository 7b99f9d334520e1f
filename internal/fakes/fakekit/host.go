package fakekit

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Host is the life of one fake server: listening, the goroutines Close
// must wait for (handlers, notify rounds), and the context that ends their
// waits. A fake embeds one and keeps its own lock for its own state.
type Host struct {
	name      string // "epay": errors read "epay fake: …", logs "fake epay …"
	errClosed error
	log       *slog.Logger
	ctx       context.Context
	cancel    context.CancelFunc

	mu        sync.Mutex
	closed    bool
	started   bool
	srv       *http.Server
	baseURL   string
	onClose   []func()
	wg        sync.WaitGroup
	serveDone chan struct{}
}

// NewHost builds a host for the fake called name. publicURL, when set, is
// the base URL reported instead of the listener's; errClosed is what Start
// and Go return once the host is closed (the fake's own ErrClosed). log
// may be nil.
func NewHost(name, publicURL string, errClosed error, log *slog.Logger) *Host {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Host{
		name:      name,
		errClosed: errClosed,
		log:       log,
		baseURL:   strings.TrimRight(publicURL, "/"),
		serveDone: make(chan struct{}),
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	return h
}

// Start listens on addr (empty: 127.0.0.1 on a free port) and serves
// handler in the background.
func (h *Host) Start(addr string, handler http.Handler) error {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return h.errClosed
	}
	if h.started {
		return fmt.Errorf("%s fake: already started", h.name)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s fake: listen %s: %w", h.name, addr, err)
	}
	h.started = true
	if h.baseURL == "" {
		h.baseURL = "http://" + l.Addr().String()
	}
	h.srv = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(h.serveDone)
		_ = h.srv.Serve(l)
	}()
	h.log.Info("fake "+h.name+" listening", "url", h.baseURL)
	return nil
}

// URL is the base URL: the public URL, or http://<listener address> once
// started, or empty.
func (h *Host) URL() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.baseURL
}

// Context is cancelled by Close: waits of handlers and rounds end on it.
func (h *Host) Context() context.Context { return h.ctx }

// OnClose registers f to run at the end of Close, after every goroutine
// has finished (to close a private HTTP client's connections, say).
func (h *Host) OnClose(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.onClose = append(h.onClose, f)
}

// Close stops listening, cancels the context and waits for every goroutine
// the host admitted. It may be called more than once.
func (h *Host) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	srv, started, onClose := h.srv, h.started, h.onClose
	h.mu.Unlock()

	h.cancel()
	if started {
		_ = srv.Close()
		<-h.serveDone
	}
	h.wg.Wait()
	for _, f := range onClose {
		f()
	}
	h.log.Info("fake " + h.name + " closed")
}

// enter admits a goroutine that Close must wait for; false once closed.
func (h *Host) enter() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.wg.Add(1)
	return true
}

// Go runs f in the background, Close waiting for it; the host's ErrClosed
// once closed.
func (h *Host) Go(f func()) error {
	if !h.enter() {
		return h.errClosed
	}
	go func() {
		defer h.wg.Done()
		f()
	}()
	return nil
}

// Guard admits each request of next as a goroutine Close waits for, and
// answers 503 once the host is closed.
func (h *Host) Guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.enter() {
			http.Error(w, "closed", http.StatusServiceUnavailable)
			return
		}
		defer h.wg.Done()
		next.ServeHTTP(w, r)
	})
}

// Sleep waits d; false, and at once, when ctx ends or the host closes
// first. A d of 0 or less does not wait, but still reports an ended
// context or a closed host.
func (h *Host) Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil && h.ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-h.ctx.Done():
		return false
	}
}
