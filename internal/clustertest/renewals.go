package clustertest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"connectrpc.com/connect"

	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	"github.com/rustbill/paymentd/gen/billing/order/orderpbconnect"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
)

// RenewalEnv are the settings every node needs for Renewals: the billing
// test clock ([billing].test_clock, which AdvanceBillingClock moves), a
// pass every second, and renewal invoices paid from the balance by the
// billing run.
var RenewalEnv = []string{
	"PAYMENTD_BILLING__TEST_CLOCK=true",
	"PAYMENTD_BILLING__RUN_INTERVAL=1s",
	"PAYMENTD_BILLING__AUTO_APPLY_BALANCE=true",
}

// RenewalOptions shape the renewal load.
type RenewalOptions struct {
	// Customers each hold one monthly order (default 6).
	Customers int
	// Step is how far the billing clock moves on every tick (default 9
	// days: an invoice is issued, falls due and goes overdue over a few
	// ticks).
	Step time.Duration
	// Every is the real time between ticks (default 3 s).
	Every time.Duration
	// Balance is the chance a renewal invoice is paid from the balance (an
	// admin credits it; the billing run applies it) instead of through the
	// gateway.
	Balance float64
	// Refunds is the chance that a settled renewal payment is refunded,
	// in full half the time.
	Refunds float64
}

// Renewals drives recurring orders through the cluster: monthly orders
// paid once (gateway or balance), then a billing clock moving forward on
// every node (AdvanceBillingClock), renewal invoices paid through the
// gateway or from the balance, refunds of renewal payments. The gateway's
// renewal payments go into the book like the others, so Settle waits for
// them and Check counts them; CheckRenewals checks invoices and periods.
type Renewals struct {
	w *Bundle
	o RenewalOptions

	mu sync.Mutex
	// target is how far every node's billing clock should be ahead.
	target time.Duration
	// offsets are what each node instance (by cluster node id, new at
	// every start) has been advanced by.
	offsets map[string]time.Duration
	// customers by id; handled invoices and refunded payments.
	customers map[string]customer
	handled   map[string]bool
	refunded  map[string]bool
	// Figures.
	advances, gatewayPaid, balancePaid, refunds int
}

// NewRenewals prepares the renewal load on w.
func (w *Bundle) NewRenewals(o RenewalOptions) *Renewals {
	if o.Customers <= 0 {
		o.Customers = 6
	}
	if o.Step <= 0 {
		o.Step = 9 * 24 * time.Hour
	}
	if o.Every <= 0 {
		o.Every = 3 * time.Second
	}
	return &Renewals{w: w, o: o, offsets: map[string]time.Duration{}, customers: map[string]customer{},
		handled: map[string]bool{}, refunded: map[string]bool{}}
}

// Run places the monthly orders, then ticks until ctx ends.
func (r *Renewals) Run(ctx context.Context) {
	w := r.w
	var product string
	err := w.retry(ctx, "renewal_setup", func(base string) error {
		orders := orderpbconnect.NewOrderServiceClient(w.http, base)
		res, err := orders.CreateProduct(ctx, asAdmin(w, &orderpb.CreateProductRequest{Name: "VPS monthly", Price: Price, Currency: "CNY", BillingCycle: "monthly"}))
		if err != nil {
			return err
		}
		product = res.Msg.GetProduct().GetId()
		return nil
	})
	if err != nil {
		w.unexpected(ctx, "renewal_setup", err)
		return
	}
	for i := range r.o.Customers {
		c, err := w.register(ctx, 5000+i)
		if err != nil {
			w.unexpected(ctx, "renewal register", err)
			return
		}
		r.mu.Lock()
		r.customers[c.id] = c
		r.mu.Unlock()
		w.orderAndPay(ctx, c, product, i%2 == 0, LoadOptions{})
	}
	for ctx.Err() == nil {
		r.Tick(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(r.o.Every):
		}
	}
}

// Tick moves the billing clock one step on every live node, then pays the
// open renewal invoices and refunds some renewal payments.
func (r *Renewals) Tick(ctx context.Context) {
	r.mu.Lock()
	r.target += r.o.Step
	r.mu.Unlock()
	for _, n := range r.w.C.Alive() {
		r.CatchUp(ctx, n)
	}
	r.payInvoices(ctx)
	r.refundSome(ctx)
}

// Bump moves the target one step and advances node alone, for the fault
// that kills the billing leader in the middle of the pass the advance
// runs; the others catch up on the next tick.
func (r *Renewals) Bump(ctx context.Context, n *Node) {
	r.mu.Lock()
	r.target += r.o.Step
	r.mu.Unlock()
	r.CatchUp(ctx, n)
}

// maxAdvance is the most one AdvanceBillingClock moves (the API takes at
// most a year).
const maxAdvance = 360 * 24 * time.Hour

// CatchUp advances n's billing clock to the target. A node that started
// again has its clock at the real time (offset 0): it is advanced the
// whole way, a year at most per call. Each advance runs a billing pass on
// n.
func (r *Renewals) CatchUp(ctx context.Context, n *Node) {
	for ctx.Err() == nil && r.advance(ctx, n) {
	}
}

// advance moves n's clock one call closer to the target; false when it is
// there, or the call failed.
func (r *Renewals) advance(ctx context.Context, n *Node) bool {
	id := n.ID()
	r.mu.Lock()
	by := min(r.target-r.offsets[id], maxAdvance)
	r.mu.Unlock()
	if by <= 0 || id == "" {
		return false
	}
	orders := orderpbconnect.NewOrderServiceClient(r.w.http, n.URL)
	_, err := orders.AdvanceBillingClock(ctx, asAdmin(r.w, &orderpb.AdvanceBillingClockRequest{Seconds: int64(by / time.Second)}))
	r.w.book.count("advance_billing_clock", err)
	if err != nil {
		// The offset moved or not: the call is not repeated on this
		// instance (it would move twice); a node that restarts starts
		// over from the real time, and an instance whose advance failed
		// lags until the next start. The leader's passes are what count.
		r.mu.Lock()
		r.offsets[id] = r.target
		r.mu.Unlock()
		return false
	}
	r.mu.Lock()
	r.offsets[id] += by
	r.advances++
	r.mu.Unlock()
	return true
}

// payInvoices pays every open renewal invoice not handled yet: from the
// balance (an admin credits the amount, the next billing pass applies it)
// or through the gateway (the customer creates the payment, the buyer
// pays, the fake notifies).
func (r *Renewals) payInvoices(ctx context.Context) {
	w := r.w
	rows, err := w.C.Pool.Query(ctx, `SELECT i.id::text, i.customer_id::text, i.amount::text FROM invoices i
		WHERE i.order_id IS NOT NULL AND i.status IN ('issued', 'overdue') ORDER BY i.created_at`)
	if err != nil {
		return
	}
	type open struct{ id, customer, amount string }
	var todo []open
	for rows.Next() {
		var o open
		if rows.Scan(&o.id, &o.customer, &o.amount) == nil {
			todo = append(todo, o)
		}
	}
	rows.Close()
	for _, inv := range todo {
		r.mu.Lock()
		c, ok := r.customers[inv.customer]
		done := r.handled[inv.id]
		r.mu.Unlock()
		if !ok || done || ctx.Err() != nil {
			continue
		}
		if rand.Float64() < r.o.Balance {
			err := w.retry(ctx, "renewal_top_up", func(base string) error {
				admins := identitypbconnect.NewCustomerAdminServiceClient(w.http, base)
				_, err := admins.AdjustBalance(ctx, asAdmin(w, &identitypb.AdjustBalanceRequest{
					CustomerId: c.id, Amount: inv.amount, Note: "soak top-up for renewal invoice " + inv.id,
				}))
				return err
			})
			if err != nil {
				w.unexpected(ctx, "renewal_top_up", err)
				continue
			}
			r.mu.Lock()
			r.handled[inv.id] = true
			r.balancePaid++
			r.mu.Unlock()
			continue
		}
		var paymentID string
		err := w.retry(ctx, "renewal_create_payment", func(base string) error {
			pays := paymentpbconnect.NewPaymentServiceClient(w.http, base)
			res, err := pays.CreatePayment(ctx, withHeader(&paymentpb.CreatePaymentRequest{
				InvoiceId: inv.id, GatewayInterfaceId: w.Gateway, ReturnUrl: "https://shop.example/done",
			}, "Authorization", "Bearer "+c.token))
			if err != nil {
				return err
			}
			paymentID = res.Msg.GetPayment().GetId()
			return nil
		})
		if err != nil {
			// The invoice moved on meanwhile (paid from the balance,
			// cancelled when the order ended): refused, and fine.
			if c := connect.CodeOf(err); c != connect.CodeInvalidArgument && c != connect.CodeFailedPrecondition {
				w.unexpected(ctx, "renewal_create_payment", err)
			}
			r.mu.Lock()
			r.handled[inv.id] = true
			r.mu.Unlock()
			continue
		}
		if err := w.Fake.Pay(paymentID); err != nil {
			w.book.unexpectedf("gateway pay renewal %s: %v", paymentID, err)
			continue
		}
		fo, _ := w.Fake.Order(paymentID)
		w.book.mu.Lock()
		w.book.paid[paymentID] = mustCents(fo.Money)
		w.book.mu.Unlock()
		r.mu.Lock()
		r.handled[inv.id] = true
		r.gatewayPaid++
		r.mu.Unlock()
	}
}

// refundSome refunds a settled renewal payment now and then (gateway or
// balance), in part or in full, as the admin.
func (r *Renewals) refundSome(ctx context.Context) {
	w := r.w
	rows, err := w.C.Pool.Query(ctx, `SELECT id::text FROM payments
		WHERE invoice_id IS NOT NULL AND status = 'success' ORDER BY created_at`)
	if err != nil {
		return
	}
	var ids []string
	for rows.Next() {
		var id string
		if rows.Scan(&id) == nil {
			ids = append(ids, id)
		}
	}
	rows.Close()
	for _, id := range ids {
		r.mu.Lock()
		done := r.refunded[id]
		r.refunded[id] = true
		r.mu.Unlock()
		if done || rand.Float64() >= r.o.Refunds || ctx.Err() != nil {
			continue
		}
		amount := "1.00"
		if rand.IntN(2) == 0 {
			amount = "" // all of it: the order ends
		}
		// Not retried on another node: a refund whose outcome is unknown
		// stays pending for an admin, it is never sent twice.
		base := w.node()
		if base == "" {
			return
		}
		pays := paymentpbconnect.NewPaymentServiceClient(w.http, base)
		_, err := pays.RefundPayment(ctx, asAdmin(w, &paymentpb.RefundPaymentRequest{PaymentId: id, Amount: amount}))
		w.book.count("renewal_refund", err)
		if err == nil {
			r.mu.Lock()
			r.refunds++
			r.mu.Unlock()
		}
	}
}

// String is the renewal load's figures.
func (r *Renewals) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprintf("renewals: %d recurring customers, billing clock %s ahead, %d advances, %d renewal invoices paid through the gateway, %d from the balance, %d renewal refunds",
		len(r.customers), r.target.Round(time.Hour), r.advances, r.gatewayPaid, r.balancePaid, r.refunds)
}
