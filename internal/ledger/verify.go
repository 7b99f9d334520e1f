package ledger

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/store"
)

// Violation is one broken rule: its name (see the package documentation),
// the ids of the rows involved and a short text.
type Violation struct {
	Rule   string
	IDs    []string
	Detail string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s [%s]: %s", v.Rule, strings.Join(v.IDs, " "), v.Detail)
}

// Totals is what Verify looked at.
type Totals = store.LedgerTotals

// Report is the outcome of Verify.
type Report struct {
	// Violations lists every broken rule, in check order; empty means the
	// ledger is clean.
	Violations []Violation
	// Totals counts the rows and sums the money Verify checked.
	Totals Totals
	// Took is how long the checks ran.
	Took time.Duration
}

// OK reports whether no rule is broken.
func (r Report) OK() bool { return len(r.Violations) == 0 }

// Rules lists each broken rule once, with how often it is broken.
func (r Report) Rules() map[string]int {
	out := map[string]int{}
	for _, v := range r.Violations {
		out[v.Rule]++
	}
	return out
}

// String is the report for people: a summary line, then one line per
// violation.
func (r Report) String() string {
	var b strings.Builder
	t := r.Totals
	status := "clean"
	if !r.OK() {
		status = fmt.Sprintf("%d violations", len(r.Violations))
	}
	fmt.Fprintf(&b, "ledger %s: %d payments (%d settled, %s received, %s captured, %s to return, %s refunded), %d refunds (%d pending), "+
		"%d orders, %d invoices, %d customers (balances %s, %d balance transactions), "+
		"%d events (%d done, %d pending, %d processing, %d failed); checked in %s",
		status, t.Payments, t.SettledPayments, t.Received, t.Captured, t.ToReturn, t.Refunded, t.Refunds, t.PendingRefunds,
		t.Orders, t.Invoices, t.Customers, t.Balances, t.BalanceTransactions,
		t.Events, t.EventsDone, t.EventsPending, t.EventsProcessing, t.EventsFailed, r.Took.Round(time.Millisecond))
	if t.EventsPastClaim > 0 {
		fmt.Fprintf(&b, "\n  %d processing event(s) past their claim, waiting for the event worker's leader to reclaim them (no leader holds the role, or it has had under a minute since it was elected and the claim ran out)", t.EventsPastClaim)
	}
	for _, v := range r.Violations {
		b.WriteString("\n  ")
		b.WriteString(v.String())
	}
	return b.String()
}

// Verify checks that payments, refunds, orders, invoices, events and the
// balance ledger agree (see the package documentation for the rules) and
// reports every violation. The error is for a check that could not run
// (the database failed), never for a violation.
//
// On a pool or connection it runs in its own REPEATABLE READ, READ ONLY
// transaction, so every check sees one snapshot while the service keeps
// writing; in a transaction the caller owns (a savepoint is opened), the
// caller's isolation level applies.
func Verify(ctx context.Context, db store.DB) (Report, error) {
	start := time.Now()
	var r Report
	_, inTx := db.(pgx.Tx)
	err := store.WithTx(ctx, db, func(tx pgx.Tx) error {
		r = Report{}
		if !inTx {
			if err := store.Q(tx).LedgerSnapshot(ctx); err != nil {
				return fmt.Errorf("ledger: snapshot: %w", err)
			}
		}
		for _, c := range store.LedgerChecks {
			found, err := c.Run(ctx, tx)
			if err != nil {
				return fmt.Errorf("ledger: check %s: %w", c.Name, err)
			}
			for _, f := range found {
				r.Violations = append(r.Violations, Violation(f))
			}
		}
		t, err := store.Q(tx).LedgerTotals(ctx)
		if err != nil {
			return fmt.Errorf("ledger: totals: %w", err)
		}
		r.Totals = t
		return nil
	})
	if err != nil {
		return Report{}, err
	}
	r.Took = time.Since(start)
	return r, nil
}
