package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/rustbill/paymentd/internal/startstop"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testsignal"
)

// Waker wakes its subscribers when a notification arrives on a channel
// (Listener implements it). A wake-up is a hint; the channel is buffered
// and coalesces.
type Waker interface {
	Subscribe(channel string) (wake <-chan struct{}, unsubscribe func())
}

// The defaults of ElectorOptions (docs/api.md, "Limits"), and of
// [cluster].lease_ttl and lease_renew.
const (
	DefaultLeaseTTL   = 30 * time.Second
	DefaultLeaseRenew = 10 * time.Second
)

// ElectorOptions configure an Elector. Zero durations take the defaults
// above.
type ElectorOptions struct {
	// Role is the leader role (RoleBilling, RoleEventWorker).
	Role string
	// Holder is this node's id (NodeInfo.ID).
	Holder string
	// TTL is the lease's time to live ([cluster].lease_ttl).
	TTL time.Duration
	// RenewInterval is how often the leader renews and, at the latest, how
	// often a follower bids ([cluster].lease_renew).
	RenewInterval time.Duration
	// Margin is how long before its lease could expire the leader stops
	// trusting it (see the package doc). Default TTL/10; RenewInterval must
	// be shorter than TTL − Margin.
	Margin time.Duration
	// Waker, when set, wakes a follower at once when a leader resigns
	// (ChannelLeadership).
	Waker Waker
	// Now is the local clock used to measure the trust window; it must be
	// monotonic (time.Now, the default, is).
	Now    func() time.Time
	Logger *slog.Logger
	// Rounds and Stopping, set by tests only, let a test wait for the
	// elector instead of sleeping (internal/testsignal). Rounds counts the
	// bids and renewals whose answer (or failure) has been dealt with;
	// Stopping counts the stops that found a query on the wire and give it
	// stopGrace. Nil in the service: a nil check per bid or renewal.
	Rounds, Stopping *testsignal.Signal
	// stopGrace replaces the constant stopGrace when set (tests:
	// export_test.go).
	stopGrace time.Duration
}

// stopGrace is how long a bid or renewal already sent may still take once
// the elector is stopped. Cutting it off would close the connection under it
// (pgx closes a connection whose query is interrupted), and an elector on a
// connection of its own — the migration role's — could then not resign the
// term it holds: the lease would stand until it expired.
const stopGrace = time.Second

// queryContext bounds one query of the elector by timeout. Stopping (ctx
// done) cuts the query off only after stopGrace, so that one already on the
// wire is answered and its connection stays usable for the resignation.
func (e *Elector) queryContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	stop := context.AfterFunc(ctx, func() {
		time.AfterFunc(cmp.Or(e.opts.stopGrace, stopGrace), cancel)
		e.opts.Stopping.Done()
	})
	return qctx, func() { stop(); cancel() }
}

// Elector campaigns for one leader role and holds it while it can. Start
// it once; it is safe for concurrent use.
type Elector struct {
	db   store.DB
	opts ElectorOptions
	log  *slog.Logger

	mu      sync.Mutex
	leading bool
	// term is the lease this elector holds or last held, kept after the
	// loop stops so that Stop can resign it.
	term       *store.LeaderLease
	trustUntil time.Time
	subs       map[*chan bool]struct{}

	loop startstop.Loop
}

// NewElector returns an elector for opts.Role over db.
func NewElector(db store.DB, opts ElectorOptions) (*Elector, error) {
	if opts.Role == "" || opts.Holder == "" {
		return nil, errors.New("cluster: elector needs a role and a holder")
	}
	opts.TTL = cmp.Or(max(opts.TTL, 0), DefaultLeaseTTL)
	opts.RenewInterval = cmp.Or(max(opts.RenewInterval, 0), DefaultLeaseRenew)
	if opts.Margin <= 0 {
		opts.Margin = opts.TTL / 10
	}
	if opts.RenewInterval >= opts.TTL-opts.Margin {
		return nil, fmt.Errorf("cluster: renew interval %s must be shorter than the lease TTL %s minus the margin %s",
			opts.RenewInterval, opts.TTL, opts.Margin)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("role", opts.Role, "node", opts.Holder)
	return &Elector{db: db, opts: opts, log: log, subs: map[*chan bool]struct{}{}}, nil
}

// Role is the role this elector campaigns for.
func (e *Elector) Role() string { return e.opts.Role }

// IsLeader reports whether this instance holds the role and its trust window
// is still open. Work done as leader checks it right before acting.
func (e *Elector) IsLeader() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.leading && e.opts.Now().Before(e.trustUntil)
}

// Subscribe returns a channel that holds the latest leadership state (true:
// leader): the current state at once, then every change. A slow reader
// misses intermediate states, never the latest. Call unsubscribe when done.
func (e *Elector) Subscribe() (changes <-chan bool, unsubscribe func()) {
	ch := make(chan bool, 1)
	e.mu.Lock()
	ch <- e.leading
	e.subs[&ch] = struct{}{}
	e.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			e.mu.Lock()
			delete(e.subs, &ch)
			e.mu.Unlock()
		})
	}
}

// Start campaigns in the background until ctx is cancelled or Stop is
// called. Cancelling ctx stops without resigning, as a crash would; Stop
// resigns.
func (e *Elector) Start(ctx context.Context) error {
	// Subscribed before the loop starts, so no wake-up is missed.
	var wake <-chan struct{}
	unsubscribe := func() {}
	if e.opts.Waker != nil {
		wake, unsubscribe = e.opts.Waker.Subscribe(ChannelLeadership)
	}
	err := e.loop.Start(ctx, func(ctx context.Context, _ <-chan struct{}) {
		defer unsubscribe()
		e.run(ctx, wake)
	})
	if err != nil {
		unsubscribe()
		return err
	}
	e.log.Info("leader election started", "ttl", e.opts.TTL.String(), "renew", e.opts.RenewInterval.String())
	return nil
}

// Stop ends the campaign and, when this instance holds the role, resigns it
// so that another instance takes over at once.
func (e *Elector) Stop() {
	if !e.loop.Stop() {
		return
	}
	ctx, cancelResign := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelResign()
	e.resign(ctx)
}

func (e *Elector) run(ctx context.Context, wake <-chan struct{}) {
	for {
		lease, trust, ok := e.campaign(ctx, wake)
		if !ok {
			return
		}
		if ctx.Err() != nil {
			// Elected by a bid answered after the stop: not leading, but
			// the term is kept for Stop to resign.
			e.mu.Lock()
			e.term = &lease
			e.mu.Unlock()
			return
		}
		e.gain(lease, trust)
		reason, keepTerm := e.hold(ctx)
		e.lose(reason)
		if !keepTerm {
			// The term may still stand in the database (the renew was not
			// answered in time): give it up, so that nobody waits for it.
			rctx, cancel := e.queryContext(ctx, e.opts.RenewInterval)
			e.resign(rctx)
			cancel()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// campaign bids until this instance is elected (true) or ctx is done
// (false). It returns the new lease and the end of its trust window.
func (e *Elector) campaign(ctx context.Context, wake <-chan struct{}) (store.LeaderLease, time.Time, bool) {
	failures := 0
	lastHolder := ""
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		e.opts.Rounds.Begin()
		sent := e.opts.Now()
		cctx, cancel := e.queryContext(ctx, e.opts.RenewInterval)
		lease, err := store.Q(e.db).LeaderAttemptElect(cctx, store.LeaderAttemptElectParams{
			Role: e.opts.Role, Holder: e.opts.Holder, Ttl: e.opts.TTL,
		})
		wait := e.opts.RenewInterval
		switch {
		case err == nil:
			cancel()
			e.opts.Rounds.Done() // won: run takes the role next
			return lease, sent.Add(e.opts.TTL - e.opts.Margin), true
		case errors.Is(err, store.ErrNotFound):
			if failures > 0 {
				e.log.Info("leader election: database reachable again")
			}
			failures = 0
			// Held by someone: bid again the moment that lease runs out.
			r, err := store.Q(e.db).LeaderLeaseRemaining(cctx, e.opts.Role)
			switch {
			case err == nil:
				wait = min(wait, r.Remaining+5*time.Millisecond)
				if r.Holder != lastHolder {
					lastHolder = r.Holder
					e.log.Info("leadership held", "holder", r.Holder, "expires_at", r.ExpiresAt)
				}
			case errors.Is(err, store.ErrNotFound): // resigned in between: bid now
				wait = 5 * time.Millisecond
			}
		default:
			if ctx.Err() != nil {
				cancel()
				e.opts.Rounds.Done()
				return store.LeaderLease{}, time.Time{}, false
			}
			failures++
			if failures == 1 {
				e.log.Warn("leader election: cannot reach the database", "err", err)
			}
			wait = min(e.opts.RenewInterval, time.Duration(failures)*100*time.Millisecond)
		}
		cancel()
		e.opts.Rounds.Done()
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return store.LeaderLease{}, time.Time{}, false
		case <-timer.C:
		case <-wake:
			// A leader resigned: bid now.
			if !timer.Stop() {
				<-timer.C
			}
		}
	}
}

// hold renews the lease every RenewInterval until it is lost, cannot be
// confirmed within the trust window, or ctx is done. It says why it stopped
// and whether the term is known to be over in the database (keepTerm false:
// it may still stand and should be resigned).
func (e *Elector) hold(ctx context.Context) (reason string, keepTerm bool) {
	timer := time.NewTimer(e.opts.RenewInterval)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return "stopped", true
		case <-timer.C:
		}
		failures := 0
		for {
			e.mu.Lock()
			term, trust := *e.term, e.trustUntil
			e.mu.Unlock()
			sent := e.opts.Now()
			left := trust.Sub(sent)
			if left <= 0 {
				return "could not renew the lease within its trust window", false
			}
			// The renew may take until the trust window closes, no longer.
			e.opts.Rounds.Begin()
			rctx, cancel := e.queryContext(ctx, left)
			_, err := store.Q(e.db).LeaderReElect(rctx, store.LeaderReElectParams{
				Role: e.opts.Role, Holder: e.opts.Holder, ElectedAt: term.ElectedAt, Ttl: e.opts.TTL,
			})
			cancel()
			if err == nil {
				e.extend(sent.Add(e.opts.TTL - e.opts.Margin))
			}
			// The round has ended: the trust window moved, or the role is
			// given up next (hold returns), or the renewal is retried.
			e.opts.Rounds.Done()
			if err == nil {
				if failures > 0 {
					e.log.Info("lease renewed again", "failed_renewals", failures)
				}
				break
			}
			if errors.Is(err, store.ErrNotFound) {
				return "lease expired or taken over", true
			}
			if ctx.Err() != nil {
				return "stopped", true
			}
			failures++
			if failures == 1 {
				e.log.Warn("lease renewal failed; retrying until the trust window closes", "err", err,
					"trust_left", left.Round(time.Millisecond).String())
			}
			retry := time.NewTimer(min(e.opts.RenewInterval/5, time.Until(trust)))
			select {
			case <-ctx.Done():
				retry.Stop()
				return "stopped", true
			case <-retry.C:
			}
		}
		timer.Reset(e.opts.RenewInterval)
	}
}

func (e *Elector) gain(lease store.LeaderLease, trust time.Time) {
	e.mu.Lock()
	e.leading, e.term, e.trustUntil = true, &lease, trust
	e.publishLocked(true)
	e.mu.Unlock()
	e.log.Info("leadership gained", "elected_at", lease.ElectedAt, "expires_at", lease.ExpiresAt)
}

func (e *Elector) extend(trust time.Time) {
	e.mu.Lock()
	e.trustUntil = trust
	e.mu.Unlock()
}

func (e *Elector) lose(reason string) {
	e.mu.Lock()
	was := e.leading
	e.leading, e.trustUntil = false, time.Time{}
	e.publishLocked(false)
	e.mu.Unlock()
	switch {
	case !was:
	case reason == "stopped":
		e.log.Info("leadership given up: elector stopped")
	default:
		e.log.Warn("leadership lost", "reason", reason)
	}
}

// resign gives up the held term, if any, within ctx. Resigning a term that
// is already over changes nothing.
func (e *Elector) resign(ctx context.Context) {
	e.mu.Lock()
	term := e.term
	e.term = nil
	e.mu.Unlock()
	if term == nil {
		return
	}
	resigned, err := store.Resign(ctx, e.db, e.opts.Role, e.opts.Holder, term.ElectedAt)
	switch {
	case err != nil:
		e.log.Warn("resigning leadership failed; the lease runs out on its own", "err", err)
	case resigned:
		e.log.Info("leadership resigned")
	}
}

// publishLocked replaces the state in every subscriber's channel; e.mu is held.
func (e *Elector) publishLocked(leading bool) {
	for ch := range e.subs {
		select {
		case <-*ch:
		default:
		}
		*ch <- leading
	}
}
