package cluster

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rustbill/paymentd/internal/startstop"
)

// ConnectFunc opens the listener's dedicated connection.
type ConnectFunc func(ctx context.Context) (*pgx.Conn, error)

// ConnectLike returns a ConnectFunc that opens connections configured like
// pool's (same server, credentials, TLS), outside the pool, named
// applicationName in pg_stat_activity.
func ConnectLike(pool *pgxpool.Pool, applicationName string) ConnectFunc {
	base := pool.Config().ConnConfig
	return func(ctx context.Context) (*pgx.Conn, error) {
		cfg := base.Copy()
		if applicationName != "" {
			cfg.RuntimeParams["application_name"] = applicationName
		}
		return pgx.ConnectConfig(ctx, cfg)
	}
}

// ListenerOptions configure a Listener.
type ListenerOptions struct {
	// Channels to LISTEN on; default Channels.
	Channels []string
	// HealthInterval is how long the connection may stay quiet before it
	// is pinged (default 30 s).
	HealthInterval time.Duration
	// MinBackoff and MaxBackoff bound the wait between reconnect attempts
	// (defaults 100 ms and 5 s).
	MinBackoff time.Duration
	MaxBackoff time.Duration
	Logger     *slog.Logger
}

// Listener holds one connection with LISTEN on its channels and wakes the
// subscribers of a channel when a notification arrives. See the package doc.
type Listener struct {
	connect ConnectFunc
	opts    ListenerOptions
	log     *slog.Logger

	mu        sync.Mutex
	subs      map[string]map[*chan struct{}]struct{}
	connected bool

	loop startstop.Loop
}

// NewListener returns a listener that connects with connect.
func NewListener(connect ConnectFunc, opts ListenerOptions) *Listener {
	if len(opts.Channels) == 0 {
		opts.Channels = Channels
	}
	if opts.HealthInterval <= 0 {
		opts.HealthInterval = 30 * time.Second
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 100 * time.Millisecond
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(5*time.Second, opts.MinBackoff)
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Listener{connect: connect, opts: opts, log: log, subs: map[string]map[*chan struct{}]struct{}{}}
}

// Subscribe returns a channel that receives a wake-up after a notification
// on channel arrives, and after every (re)connect. Wake-ups coalesce: a
// reader that is busy gets one for all that arrived meanwhile.
func (l *Listener) Subscribe(channel string) (wake <-chan struct{}, unsubscribe func()) {
	ch := make(chan struct{}, 1)
	l.mu.Lock()
	if l.subs[channel] == nil {
		l.subs[channel] = map[*chan struct{}]struct{}{}
	}
	l.subs[channel][&ch] = struct{}{}
	l.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			l.mu.Lock()
			delete(l.subs[channel], &ch)
			l.mu.Unlock()
		})
	}
}

// Connected reports whether the listener currently listens.
func (l *Listener) Connected() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.connected
}

// Start connects and listens in the background until ctx is cancelled or
// Stop is called. It does not wait for the first connection.
func (l *Listener) Start(ctx context.Context) error {
	return l.loop.Start(ctx, func(ctx context.Context, _ <-chan struct{}) { l.run(ctx) })
}

// Stop closes the connection and waits for the listener to end.
func (l *Listener) Stop() { l.loop.Stop() }

func (l *Listener) run(ctx context.Context) {
	failures := 0
	everConnected := false
	for ctx.Err() == nil {
		conn, err := l.listen(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			if failures == 1 {
				l.log.Warn("listener cannot connect; consumers fall back to polling", "err", err)
			}
			if !sleep(ctx, l.backoff(failures)) {
				return
			}
			continue
		}
		if everConnected || failures > 0 {
			l.log.Info("listener reconnected", "channels", l.opts.Channels)
		} else {
			l.log.Info("listening", "channels", l.opts.Channels)
		}
		everConnected, failures = true, 0
		l.setConnected(true)
		// Whatever was notified while nobody listened is lost: let every
		// consumer look once.
		l.wakeAll()
		err = l.receive(ctx, conn)
		l.setConnected(false)
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_ = conn.Close(closeCtx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		l.log.Warn("listener connection lost; reconnecting", "err", err)
		failures = 1
		if !sleep(ctx, l.backoff(failures)) {
			return
		}
	}
}

// listen connects and issues LISTEN for every channel.
func (l *Listener) listen(ctx context.Context) (*pgx.Conn, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := l.connect(cctx)
	if err != nil {
		return nil, err
	}
	for _, ch := range l.opts.Channels {
		if _, err := conn.Exec(cctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			_ = conn.Close(context.WithoutCancel(cctx))
			return nil, err
		}
	}
	return conn, nil
}

// receive dispatches notifications until the connection fails or ctx ends.
func (l *Listener) receive(ctx context.Context, conn *pgx.Conn) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, l.opts.HealthInterval)
		n, err := conn.WaitForNotification(wctx)
		quiet := wctx.Err() != nil
		cancel()
		switch {
		case err == nil:
			l.wake(n.Channel)
			continue
		case ctx.Err() != nil:
			return ctx.Err()
		case quiet && !conn.IsClosed():
			// Quiet for a while: make sure the connection is still alive
			// (a timed-out wait leaves it usable).
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err = conn.Ping(pctx)
			cancel()
			if err != nil {
				return err
			}
			continue
		}
		return err
	}
}

func (l *Listener) backoff(failures int) time.Duration {
	d := l.opts.MinBackoff
	for i := 1; i < failures && d < l.opts.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, l.opts.MaxBackoff)
}

func (l *Listener) setConnected(c bool) {
	l.mu.Lock()
	l.connected = c
	l.mu.Unlock()
}

func (l *Listener) wake(channel string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for ch := range l.subs[channel] {
		select {
		case *ch <- struct{}{}:
		default:
		}
	}
}

func (l *Listener) wakeAll() {
	for _, ch := range l.opts.Channels {
		l.wake(ch)
	}
}

// sleep waits d or until ctx is done; false when ctx is done.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
