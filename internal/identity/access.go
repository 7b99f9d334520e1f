package identity

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/store"
)

// AccessState is what decides, besides its signature and expiry, whether a
// customer's access token still works: the token generation it must carry
// and whether the account is disabled. Every change of it (a password
// change, a sign-out everywhere, disabling, enabling) adds one to
// Generation, so of two states the one with the greater generation is the
// newer: caches keep the greatest they saw, and a token carrying a greater
// generation than a cached state proves that state stale.
type AccessState struct {
	Generation int64
	Disabled   bool
}

// AccessCache is an optional cache of customers' access states shared by
// every instance (Redis). The database stays the system of record: a cache
// that fails is bypassed, never trusted. Implementations must be safe for
// concurrent use.
type AccessCache interface {
	// Get returns the customer's cached state, and false when there is none.
	Get(ctx context.Context, customer uuid.UUID) (AccessState, bool, error)
	// Put stores s unless the cache already holds a greater generation,
	// for at most the cache's own time to live.
	Put(ctx context.Context, customer uuid.UUID, s AccessState) error
}

const (
	// accessLocalTTL is how long an instance answers from its own memory
	// before asking the shared cache (or, without one, the database) again:
	// the delay with which a change made on another instance is seen here.
	accessLocalTTL = time.Second
	// accessCacheSize bounds the instance's memory of access states (about
	// 80 bytes each).
	accessCacheSize = 16384
)

// accessStates answers a customer's access state on every request that
// carries an access token: from this instance's memory for a second, then
// from the shared cache, then from the database. The instance that makes a
// change writes the new state into both at once; another instance sees it
// when its memory of the customer is a second old. Without a shared cache
// the database is read at most once a second per customer and instance.
type accessStates struct {
	db     store.DB
	shared AccessCache
	now    func() time.Time
	log    *slog.Logger

	mu    sync.Mutex
	local map[uuid.UUID]localAccess
}

type localAccess struct {
	state  AccessState
	readAt time.Time
}

func newAccessStates(db store.DB, shared AccessCache, now func() time.Time, log *slog.Logger) *accessStates {
	return &accessStates{db: db, shared: shared, now: now, log: log, local: make(map[uuid.UUID]localAccess)}
}

// get returns the customer's access state as it is now, give or take a
// second, for a token of generation tokenGen: a token newer than what is
// remembered means the memory is stale, and the database is asked.
// store.ErrNotFound when the customer does not exist.
func (a *accessStates) get(ctx context.Context, customer uuid.UUID, tokenGen int64) (AccessState, error) {
	now := a.now()
	a.mu.Lock()
	l, ok := a.local[customer]
	a.mu.Unlock()
	if ok && now.Sub(l.readAt) < accessLocalTTL && now.Sub(l.readAt) > -accessLocalTTL && l.state.Generation >= tokenGen {
		return l.state, nil
	}
	if a.shared != nil {
		s, ok, err := a.shared.Get(ctx, customer)
		switch {
		case err != nil:
			a.log.WarnContext(ctx, "access cache get failed; reading the database", "customer", customer.String(), "err", err)
		case ok && s.Generation >= tokenGen:
			a.remember(customer, s, now)
			return s, nil
		}
	}
	c, err := store.GetCustomerAccess(ctx, a.db, customer)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			a.forget(customer)
		}
		return AccessState{}, err
	}
	s := AccessState{Generation: c.TokenGeneration, Disabled: c.Disabled}
	a.publish(ctx, customer, s)
	return s, nil
}

// publish makes s, just read from or written to the database, this
// instance's and (unless a newer one is there) the shared cache's state of
// the customer.
func (a *accessStates) publish(ctx context.Context, customer uuid.UUID, s AccessState) {
	a.remember(customer, s, a.now())
	if a.shared != nil {
		if err := a.shared.Put(ctx, customer, s); err != nil {
			a.log.WarnContext(ctx, "access cache put failed", "customer", customer.String(), "err", err)
		}
	}
}

// remember keeps s unless a greater generation is remembered already (a
// change this instance just made must not be overwritten by a read that
// started before it).
func (a *accessStates) remember(customer uuid.UUID, s AccessState, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if l, ok := a.local[customer]; ok && l.state.Generation > s.Generation {
		return
	}
	if _, ok := a.local[customer]; !ok && len(a.local) >= accessCacheSize {
		drop := max(1, accessCacheSize/10)
		for k, l := range a.local {
			if now.Sub(l.readAt) >= accessLocalTTL {
				delete(a.local, k)
			}
		}
		for k := range a.local {
			if len(a.local) < accessCacheSize-drop {
				break
			}
			delete(a.local, k)
		}
	}
	a.local[customer] = localAccess{state: s, readAt: now}
}

func (a *accessStates) forget(customer uuid.UUID) {
	a.mu.Lock()
	delete(a.local, customer)
	a.mu.Unlock()
}
