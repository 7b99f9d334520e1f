package clustertest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/rustbill/paymentd/internal/ledger"
	"github.com/rustbill/paymentd/internal/money"
)

// Settle waits (up to timeout) until the system has caught up with the
// load: every payment the gateway took is settled, every event is done or
// failed, no order that was paid still waits to be provisioned. Notify
// rounds of the fake, the reconciler and the event worker do the work; the
// harness only watches.
func (w *Bundle) Settle(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	w.book.mu.Lock()
	ids := make([]string, 0, len(w.book.paid))
	for id := range w.book.paid {
		ids = append(ids, id)
	}
	w.book.mu.Unlock()
	var last string
	renotified := time.Now()
	for {
		var unsettled, busy, waiting int
		err := w.C.Pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM unnest($1::uuid[]) AS p(id) LEFT JOIN payments USING (id)
			  WHERE payments.status IS DISTINCT FROM 'success' AND payments.status IS DISTINCT FROM 'refunded'
			    AND NOT (payments.status = 'failed' AND payments.captured_amount = payments.amount)),
			(SELECT count(*) FROM events WHERE status IN ('pending', 'processing')),
			(SELECT count(*) FROM orders WHERE status IN ('paid', 'provisioning'))`, ids).Scan(&unsettled, &busy, &waiting)
		if err == nil {
			if unsettled == 0 && busy == 0 && waiting == 0 {
				return nil
			}
			last = fmt.Sprintf("%d paid payments unsettled, %d events pending or processing, %d orders paid but not active", unsettled, busy, waiting)
			// A real gateway keeps notifying for hours (epay: 11 attempts
			// over 3.5 h); the fake's scaled schedule is over in minutes,
			// so unsettled payments are notified again every few seconds,
			// as the merchant console's "re-send notification" would.
			if unsettled > 0 && time.Since(renotified) > 5*time.Second {
				renotified = time.Now()
				w.renotifyUnsettled(ctx, ids)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("clustertest: not settled after %s: %s (%v)", timeout, last, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Result is what Check found.
type Result struct {
	// Ledger is ledger.Verify's report.
	Ledger ledger.Report
	// Problems are the harness's own findings: money the gateway took but
	// the service did not record (lost) or recorded without the gateway
	// (doubled, invented), refunds that disagree, hostile callbacks that
	// were accepted, answers no fault explains.
	Problems []string
	// Figures summarise the run.
	Figures string
	// Lost and Doubled are the cents the gateway and the database disagree
	// about (both 0 in a good run).
	Lost, Doubled int64
	// Captured is the money the gateway took for payments that could no
	// longer take it, recorded as captured to return.
	Captured int64
}

// OK reports whether the run ended with nothing lost, doubled or broken.
func (r Result) OK() bool { return r.Ledger.OK() && len(r.Problems) == 0 }

func (r Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\nmoney lost %s, doubled %s, captured to return %s\n%s", r.Figures, formatCents(r.Lost), formatCents(r.Doubled), formatCents(r.Captured), r.Ledger)
	for _, p := range r.Problems {
		b.WriteString("\nPROBLEM: ")
		b.WriteString(p)
	}
	return b.String()
}

// Check compares the service's database with the fake gateway's books and
// runs ledger.Verify.
//
// Lost: a payment the gateway was paid for that is not settled, or settled
// for another amount. Doubled: a settled payment of the interface the
// gateway was never paid for. Refunds: what the gateway refunded for a
// payment must lie between the payment's succeeded refunds and its
// succeeded + pending ones (pending: outcome unknown, left for an admin).
func (w *Bundle) Check(ctx context.Context) (Result, error) {
	var r Result
	rep, err := ledger.Verify(ctx, w.C.Pool)
	if err != nil {
		return r, err
	}
	r.Ledger = rep

	type row struct {
		status              string
		amount              money.Amount
		succeeded, reserved int64
		captured            bool
	}
	db := map[string]row{}
	rows, err := w.C.Pool.Query(ctx, `SELECT p.id::text, p.status, p.amount, p.captured_amount = p.amount,
			coalesce(sum(r.amount) FILTER (WHERE r.status = 'succeeded'), 0)::numeric(12,2),
			coalesce(sum(r.amount) FILTER (WHERE r.status IN ('succeeded', 'pending')), 0)::numeric(12,2)
		FROM payments AS p LEFT JOIN refunds AS r ON r.payment_id = p.id
		WHERE p.gateway_interface_id = $1
		GROUP BY p.id`, w.Gateway)
	if err != nil {
		return r, err
	}
	for rows.Next() {
		var id string
		var x row
		var ok, res money.Amount
		if err := rows.Scan(&id, &x.status, &x.amount, &x.captured, &ok, &res); err != nil {
			rows.Close()
			return r, err
		}
		x.succeeded, x.reserved = ok.Cents(), res.Cents()
		db[id] = x
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return r, err
	}

	problem := func(format string, args ...any) {
		if len(r.Problems) < 100 {
			r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
		}
	}
	w.book.mu.Lock()
	paid := make(map[string]int64, len(w.book.paid))
	for k, v := range w.book.paid {
		paid[k] = v
	}
	hostile := append([]string(nil), w.book.hostileAccepted...)
	unexpected := append([]string(nil), w.book.unexpected...)
	w.book.mu.Unlock()

	for id, cents := range paid {
		x, ok := db[id]
		switch {
		case !ok:
			r.Lost += cents
			problem("lost: the gateway took %s for payment %s, which the database does not have", formatCents(cents), id)
		case x.status == "failed" && x.captured:
			// Money that came for a payment that can no longer take it
			// (its order ended meanwhile): recorded, listed to return.
			r.Captured += cents
		case x.status != "success" && x.status != "refunded":
			r.Lost += cents
			problem("lost: the gateway took %s for payment %s, which is %s", formatCents(cents), id, x.status)
		case x.amount.Cents() != cents:
			problem("payment %s settled as %s, the gateway took %s", id, x.amount, formatCents(cents))
		}
	}
	for id, x := range db {
		if _, ok := paid[id]; ok || (x.status != "success" && x.status != "refunded") {
			continue
		}
		if o, ok := w.Fake.Order(id); ok && o.Paid {
			continue // paid outside the book (a payment created by a test itself)
		}
		r.Doubled += x.amount.Cents()
		problem("doubled: payment %s is %s for %s, but the gateway was never paid", id, x.status, x.amount)
	}
	refunded := map[string]int64{}
	for _, f := range w.Fake.Refunds() {
		refunded[f.OutTradeNo] += mustCents(f.Money)
	}
	for id, cents := range refunded {
		x := db[id]
		if cents < x.succeeded || cents > x.reserved {
			problem("refunds of payment %s: the gateway refunded %s, the database has %s succeeded and %s with pending ones",
				id, formatCents(cents), formatCents(x.succeeded), formatCents(x.reserved))
		}
	}
	for id, x := range db {
		if _, ok := refunded[id]; !ok && x.succeeded > 0 {
			problem("refunds of payment %s: %s succeeded in the database, nothing at the gateway", id, formatCents(x.succeeded))
		}
	}
	if err := w.checkInvoicesAndPeriods(ctx, problem); err != nil {
		return r, err
	}
	for _, h := range hostile {
		problem("hostile callback accepted: %s", h)
	}
	for _, u := range unexpected {
		problem("unexpected: %s", u)
	}
	r.Figures = w.Figures()
	return r, nil
}

// renotifyUnsettled starts a new notify round for every paid payment that
// is not settled yet.
func (w *Bundle) renotifyUnsettled(ctx context.Context, ids []string) {
	rows, err := w.C.Pool.Query(ctx, `SELECT p.id::text FROM unnest($1::uuid[]) AS p(id)
		LEFT JOIN payments USING (id) WHERE payments.status IS DISTINCT FROM 'success' AND payments.status IS DISTINCT FROM 'refunded'
		  AND NOT (payments.status = 'failed' AND payments.captured_amount = payments.amount)`, ids)
	if err != nil {
		return
	}
	var todo []string
	for rows.Next() {
		var id string
		if rows.Scan(&id) == nil {
			todo = append(todo, id)
		}
	}
	rows.Close()
	for _, id := range todo {
		_ = w.Fake.Renotify(id)
	}
}

// invoiceRules are the money rules of renewal invoices and service
// periods; each query lists what breaks its rule.
var invoiceRules = []struct{ rule, sql string }{
	{"every period paid once: an invoice's settled payments never exceed it", `
		SELECT i.id::text || ': ' || sum(p.amount)::text || ' settled of ' || i.amount::text
		FROM invoices i JOIN payments p ON p.invoice_id = i.id AND p.status IN ('success', 'refunded')
		GROUP BY i.id HAVING sum(p.amount) > i.amount`},
	{"every paid invoice's money applied: paid_amount is its settled payments, all of it when paid", `
		SELECT i.id::text || ': ' || i.status || ', paid ' || i.paid_amount::text || ' of ' || i.amount::text
		   || ', settled ' || coalesce(s.total, 0)::text
		FROM invoices i LEFT JOIN (SELECT invoice_id, sum(amount) AS total FROM payments
		                           WHERE status IN ('success', 'refunded') GROUP BY invoice_id) s ON s.invoice_id = i.id
		WHERE i.paid_amount <> coalesce(s.total, 0) OR (i.status = 'paid' AND i.paid_amount <> i.amount)`},
	{"a paid renewal invoice's period was paid", `
		SELECT 'order ' || sp.order_id::text || ' period ' || sp.seq || ': ' || sp.status
		FROM service_periods sp JOIN invoices i ON i.id = sp.invoice_id
		WHERE i.status = 'paid' AND sp.paid_at IS NULL`},
	{"a paid later period has its invoice paid", `
		SELECT 'order ' || sp.order_id::text || ' period ' || sp.seq || ': invoice ' || i.status
		FROM service_periods sp JOIN invoices i ON i.id = sp.invoice_id
		WHERE sp.paid_at IS NOT NULL AND i.status <> 'paid'`},
	{"one invoice per period", `
		SELECT invoice_id::text FROM service_periods WHERE invoice_id IS NOT NULL GROUP BY invoice_id HAVING count(*) > 1`},
	{"nothing captured and forgotten: captured money only on a failed payment, all of it, returned at most once", `
		SELECT id::text FROM payments
		WHERE (captured_amount <> 0 AND (status <> 'failed' OR captured_amount <> amount))
		   OR (status = 'failed' AND refunded_amount > captured_amount)`},
	{"no open invoice of an ended order but a partly paid one", `
		SELECT i.id::text || ' of ' || o.status || ' order ' || o.id::text
		FROM invoices i JOIN orders o ON o.id = i.order_id
		WHERE i.status IN ('issued', 'overdue') AND i.paid_amount = 0
		  AND o.status IN ('refunded', 'terminated', 'completed', 'cancelled')`},
}

// checkInvoicesAndPeriods runs invoiceRules.
func (w *Bundle) checkInvoicesAndPeriods(ctx context.Context, problem func(string, ...any)) error {
	for _, r := range invoiceRules {
		rows, err := w.C.Pool.Query(ctx, r.sql)
		if err != nil {
			return fmt.Errorf("clustertest: %s: %w", r.rule, err)
		}
		for rows.Next() {
			var what string
			if err := rows.Scan(&what); err != nil {
				rows.Close()
				return err
			}
			problem("%s: %s", r.rule, what)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	return nil
}
