package store

import (
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// The worker's wake-up after the commit (docs/decisions.md, "wake-up").
//
// A NOTIFY makes the transaction that sends it take one lock for the whole
// database at commit, held through the commit's WAL flush: transactions
// that notify commit one at a time. The events insert trigger notifies for
// every insert, except one whose statement says that paymentd wakes the
// worker itself once the transaction has committed (migration 00018:
// paymentd.wake_after_commit). AppendEvent and AppendEvents say so in a
// transaction begun by WithTx or WithPipelinedTx on a handle registered
// with WakeAfterCommit, and that transaction's successful commit calls the
// handle's wake function. Any other insert (on an unregistered handle, in
// a savepoint, by hand) keeps the trigger's NOTIFY.

// wakers maps a registered handle (a pool) to its wake function.
var wakers sync.Map // TxBeginner → func()

// wakingTxs maps an open transaction begun on a registered handle to its
// state.
var wakingTxs sync.Map // pgx.Tx → *wakingTx

type wakingTx struct {
	wake     func()
	appended atomic.Bool // an event was inserted without the trigger's NOTIFY
}

// WakeAfterCommit registers db: an event appended in a transaction begun
// on it by WithTx or WithPipelinedTx is inserted without the trigger's
// NOTIFY, and wake is called once that transaction has committed. wake
// must not block (it signals whatever sends the NOTIFY). The function
// returned unregisters db.
func WakeAfterCommit(db TxBeginner, wake func()) (unregister func()) {
	wakers.Store(db, wake)
	return func() { wakers.Delete(db) }
}

// trackWake starts tracking tx, begun on db, when db is registered; the
// function returned ends the tracking and, when committed is true and an
// event was appended quietly, wakes.
func trackWake(db any, tx pgx.Tx) (end func(committed bool)) {
	w, ok := wakers.Load(db)
	if !ok || tx == nil {
		return func(bool) {}
	}
	st := &wakingTx{wake: w.(func())}
	wakingTxs.Store(tx, st)
	return func(committed bool) {
		wakingTxs.Delete(tx)
		if committed && st.appended.Load() {
			st.wake()
		}
	}
}

// wakeAfterCommit is the wake_after_commit parameter of an event insert on
// db: "on" (and the transaction is marked to wake after its commit) when
// db is a tracked transaction, else "off" (the trigger notifies).
func wakeAfterCommit(db DB) string {
	tx, ok := db.(pgx.Tx)
	if !ok {
		return "off"
	}
	st, ok := wakingTxs.Load(tx)
	if !ok {
		return "off"
	}
	st.(*wakingTx).appended.Store(true)
	return "on"
}
