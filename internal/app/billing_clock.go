package app

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/rustbill/paymentd/internal/order/orderrpc"
	"github.com/rustbill/paymentd/internal/order/renewal"
)

// billingTestClock is the billing clock when [billing].test_clock is on:
// the service's clock plus an offset that AdvanceBillingClock moves
// forward, never back. Everything that starts, ends, prices or dates a
// period reads it (the billing run, an order going active, a renewal
// invoice's payment), so that a rehearsal that buys after moving the
// clock behaves as one that bought first. It is this instance's: a rehearsal runs on one
// instance (paymentd dev), where the advance's own pass and the periodic
// ones all see it.
type billingTestClock struct {
	base   func() time.Time
	offset atomic.Int64
	run    *renewal.Run
}

// clock is c's Now, nil when c is (the test clock is off: the services'
// own clock is the billing clock).
func (c *billingTestClock) clock() func() time.Time {
	if c == nil {
		return nil
	}
	return c.Now
}

// Now is the billing clock's time.
func (c *billingTestClock) Now() time.Time {
	return c.base().Add(time.Duration(c.offset.Load()))
}

// Advance implements orderrpc.BillingClock: the clock moves forward by d and
// a billing pass runs at once as of the new time, before any periodic pass
// of this instance sees it, so that the counts it reports are what fell due.
func (c *billingTestClock) Advance(ctx context.Context, d time.Duration) (orderrpc.ClockAdvanced, error) {
	r, err := c.run.RunAfter(ctx, func() { c.offset.Add(int64(d)) })
	if err != nil {
		return orderrpc.ClockAdvanced{}, err
	}
	return orderrpc.ClockAdvanced{
		Now: c.Now(), Issued: r.Issued, AutoPaid: r.AutoPaid, Overdue: r.Overdue,
		Suspended: r.Suspended, Terminated: r.Terminated, Ended: r.Ended,
	}, nil
}
