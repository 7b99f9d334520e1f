package clustertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	"github.com/rustbill/paymentd/gen/billing/order/orderpbconnect"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/fakes/epay"
	"github.com/rustbill/paymentd/internal/money"
)

// LoadOptions shape the load.
type LoadOptions struct {
	// Workers run at once, each a customer ordering again and again.
	Workers int
	// Duplicates is the chance that a paid payment's notification is sent
	// once more, to a random node, besides the gateway's own.
	Duplicates float64
	// Hostile is the chance of a hostile callback after a payment (a
	// changed amount re-signed, a forged signature, another payment's id,
	// another interface) — each must be refused.
	Hostile float64
	// Refunds is the chance of a partial refund (1.00) of a settled payment.
	Refunds float64
	// Balance is the chance an order is paid from the balance (credited by
	// an admin first) instead of through the gateway.
	Balance float64
	// Pause between a worker's orders.
	Pause time.Duration
}

// Run drives the load until ctx ends and returns when every worker has
// stopped.
func (w *Bundle) Run(ctx context.Context, o LoadOptions) {
	if o.Workers <= 0 {
		o.Workers = 4
	}
	var wg sync.WaitGroup
	for i := range o.Workers {
		wg.Go(func() { w.worker(ctx, i, o) })
	}
	wg.Wait()
}

type customer struct {
	token string
	id    string
}

func (w *Bundle) register(ctx context.Context, i int) (customer, error) {
	email := fmt.Sprintf("load-%d-%s@example.com", i, uuid.NewString()[:8])
	var c customer
	err := w.retry(ctx, "register", func(base string) error {
		ids := identitypbconnect.NewIdentityServiceClient(w.http, base)
		res, err := ids.Register(ctx, connect.NewRequest(&identitypb.RegisterRequest{Email: email, Password: "load test password", Name: email}))
		if connect.CodeOf(err) == connect.CodeAlreadyExists {
			res2, err2 := ids.Login(ctx, connect.NewRequest(&identitypb.LoginRequest{Email: email, Password: "load test password"}))
			if err2 != nil {
				return err2
			}
			c = customer{token: res2.Msg.GetAccessToken(), id: res2.Msg.GetCustomer().GetId()}
			return nil
		}
		if err != nil {
			return err
		}
		c = customer{token: res.Msg.GetAccessToken(), id: res.Msg.GetCustomer().GetId()}
		return nil
	})
	return c, err
}

func (w *Bundle) worker(ctx context.Context, i int, o LoadOptions) {
	c, err := w.register(ctx, i)
	if err != nil {
		if ctx.Err() == nil {
			w.book.unexpectedf("register: %v", err)
		}
		return
	}
	for ctx.Err() == nil {
		w.once(ctx, c, o)
		if o.Pause > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(o.Pause):
			}
		}
	}
}

// once places one order and pays it.
func (w *Bundle) once(ctx context.Context, c customer, o LoadOptions) {
	w.orderAndPay(ctx, c, w.Product, rand.Float64() < o.Balance, o)
}

// orderAndPay orders product as c and pays it from the balance or through
// the gateway.
func (w *Bundle) orderAndPay(ctx context.Context, c customer, product string, fromBalance bool, o LoadOptions) {
	bearer := "Bearer " + c.token
	var orderID string
	err := w.retry(ctx, "create_order", func(base string) error {
		orders := orderpbconnect.NewOrderServiceClient(w.http, base)
		res, err := orders.CreateOrder(ctx, withHeader(&orderpb.CreateOrderRequest{ProductId: product}, "Authorization", bearer))
		if err != nil {
			return err
		}
		orderID = res.Msg.GetOrder().GetId()
		return nil
	})
	if err != nil {
		w.unexpected(ctx, "create_order", err)
		return
	}

	if fromBalance {
		w.payFromBalance(ctx, c, orderID)
		return
	}

	var paymentID string
	err = w.retry(ctx, "create_payment", func(base string) error {
		pays := paymentpbconnect.NewPaymentServiceClient(w.http, base)
		res, err := pays.CreatePayment(ctx, withHeader(&paymentpb.CreatePaymentRequest{
			OrderId: orderID, GatewayInterfaceId: w.Gateway, ReturnUrl: "https://shop.example/done",
		}, "Authorization", bearer))
		if err != nil {
			return err
		}
		paymentID = res.Msg.GetPayment().GetId()
		return nil
	})
	if err != nil {
		w.unexpected(ctx, "create_payment", err)
		return
	}

	// The buyer pays: the fake gateway takes the money and notifies the
	// node that created the payment (and retries while it is down).
	fo, ok := w.Fake.Order(paymentID)
	if !ok {
		w.book.unexpectedf("payment %s is unknown to the gateway", paymentID)
		return
	}
	if err := w.Fake.Pay(paymentID); err != nil {
		if !errors.Is(err, epay.ErrClosed) {
			w.book.unexpectedf("gateway pay %s: %v", paymentID, err)
		}
		return
	}
	cents := mustCents(fo.Money)
	w.book.mu.Lock()
	w.book.paid[paymentID] = cents
	w.book.orders[paymentID] = orderID
	w.book.mu.Unlock()

	if rand.Float64() < o.Duplicates {
		w.sendCallback(ctx, "callback_duplicate", w.Gateway, paymentID, nil)
	}
	if rand.Float64() < o.Hostile {
		w.hostile(ctx, paymentID)
	}
	if rand.Float64() < o.Refunds {
		w.refund(ctx, paymentID)
	}
}

// sendCallback sends the gateway's notification for paymentID (changed by
// mutate, when given) to a random node through HandleCallback, retrying
// transient failures, and returns the final answer.
func (w *Bundle) sendCallback(ctx context.Context, op, gateway, paymentID string, mutate func(url.Values) url.Values) error {
	p, ok := w.notifyParams(paymentID)
	if !ok {
		return nil
	}
	if mutate != nil {
		p = mutate(p)
	}
	return w.retry(ctx, op, func(base string) error {
		pays := paymentpbconnect.NewPaymentServiceClient(w.http, base)
		_, err := pays.HandleCallback(ctx, connect.NewRequest(&paymentpb.PaymentCallbackRequest{
			GatewayInterfaceId: gateway, Payload: p.Encode(),
		}))
		return err
	})
}

// hostile sends one hostile callback about paymentID; it must be refused
// (InvalidArgument or NotFound) and change nothing.
func (w *Bundle) hostile(ctx context.Context, paymentID string) {
	var other string
	w.book.mu.Lock()
	for id := range w.book.paid {
		if id != paymentID {
			other = id
			break
		}
	}
	w.book.mu.Unlock()
	kinds := []struct {
		name    string
		gateway string
		mutate  func(url.Values) url.Values
	}{
		{"amount_changed", w.Gateway, func(p url.Values) url.Values {
			m := money.MustParse(p.Get("money"))
			more, _ := m.Add(money.MustParse("0.01"))
			p.Set("money", more.String())
			return Resign(p)
		}},
		{"bad_signature", w.Gateway, func(p url.Values) url.Values {
			p.Set("sign", "0123456789abcdef0123456789abcdef")
			return p
		}},
		{"unsigned_amount_change", w.Gateway, func(p url.Values) url.Values {
			p.Set("money", "0.01")
			return p
		}},
		{"other_interface", uuid.NewString(), nil},
	}
	if other != "" {
		kinds = append(kinds, struct {
			name    string
			gateway string
			mutate  func(url.Values) url.Values
		}{"signature_of_another_payment", w.Gateway, func(p url.Values) url.Values {
			// The signed notification of one payment, pointed at another.
			p.Set("out_trade_no", other)
			return p
		}})
	}
	k := kinds[rand.IntN(len(kinds))]
	err := w.sendCallback(ctx, "hostile_"+k.name, k.gateway, paymentID, k.mutate)
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument, connect.CodeNotFound:
	default:
		if ctx.Err() == nil {
			w.book.mu.Lock()
			w.book.hostileAccepted = append(w.book.hostileAccepted, fmt.Sprintf("%s for %s: %v", k.name, paymentID, err))
			w.book.mu.Unlock()
		}
	}
}

// refund waits for paymentID to be settled and refunds 1.00 of it as the
// admin.
func (w *Bundle) refund(ctx context.Context, paymentID string) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var status string
		err := w.retry(ctx, "get_payment", func(base string) error {
			pays := paymentpbconnect.NewPaymentServiceClient(w.http, base)
			res, err := pays.GetPayment(ctx, asAdmin(w, &paymentpb.GetPaymentRequest{Id: paymentID}))
			if err != nil {
				return err
			}
			status = res.Msg.GetPayment().GetStatus()
			return nil
		})
		if err != nil || status == "success" {
			break
		}
		if time.Now().After(deadline) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	// Not retried blindly on another node: a refund whose outcome is
	// unknown stays pending for an admin, it is never sent twice.
	base := w.node()
	if base == "" {
		return
	}
	pays := paymentpbconnect.NewPaymentServiceClient(w.http, base)
	_, err := pays.RefundPayment(ctx, asAdmin(w, &paymentpb.RefundPaymentRequest{PaymentId: paymentID, Amount: "1.00"}))
	w.book.count("refund", err)
}

// payFromBalance credits the customer's balance with the order's amount
// (admin) and pays the order from it (customer).
func (w *Bundle) payFromBalance(ctx context.Context, c customer, orderID string) {
	err := w.retry(ctx, "adjust_balance", func(base string) error {
		admins := identitypbconnect.NewCustomerAdminServiceClient(w.http, base)
		_, err := admins.AdjustBalance(ctx, asAdmin(w, &identitypb.AdjustBalanceRequest{
			CustomerId: c.id, Amount: Price, Note: "load test top-up for order " + orderID,
		}))
		return err
	})
	if err != nil {
		w.unexpected(ctx, "adjust_balance", err)
		return
	}
	err = w.retry(ctx, "pay_with_balance", func(base string) error {
		orders := orderpbconnect.NewOrderServiceClient(w.http, base)
		_, err := orders.PayWithBalance(ctx, withHeader(&orderpb.PayWithBalanceRequest{OrderId: orderID}, "Authorization", "Bearer "+c.token))
		return err
	})
	switch {
	case err == nil:
		w.book.mu.Lock()
		w.book.balance[orderID] = mustCents(Price)
		w.book.mu.Unlock()
	case connect.CodeOf(err) == connect.CodeInvalidArgument:
		// A retry after a lost answer: the first attempt paid the order
		// (order not pending any more). Settle finds out from the database.
		w.book.mu.Lock()
		w.book.balance[orderID] = -1
		w.book.mu.Unlock()
	default:
		w.unexpected(ctx, "pay_with_balance", err)
	}
}

func (w *Bundle) unexpected(ctx context.Context, op string, err error) {
	if ctx.Err() != nil {
		return // the run ended mid-call
	}
	w.book.unexpectedf("%s: %v", op, err)
}

func mustCents(s string) int64 {
	a, err := money.Parse(s)
	if err != nil {
		panic(err)
	}
	return a.Cents()
}

// PaidPayments registers a customer, creates n orders with an epay payment
// each and has the fake gateway take the money for every one. Whether the
// gateway's notifications arrive is the caller's business (Fake.DropNotify);
// Settle and Check expect every one of them settled in the end.
func (w *Bundle) PaidPayments(ctx context.Context, n int) ([]string, error) {
	c, err := w.register(ctx, 1000+rand.IntN(1000))
	if err != nil {
		return nil, err
	}
	var ids []string
	for range n {
		w.book.mu.Lock()
		before := len(w.book.unexpected)
		w.book.mu.Unlock()
		w.once(ctx, c, LoadOptions{})
		w.book.mu.Lock()
		if len(w.book.unexpected) > before {
			err := errors.New(w.book.unexpected[len(w.book.unexpected)-1])
			w.book.mu.Unlock()
			return nil, err
		}
		w.book.mu.Unlock()
	}
	w.book.mu.Lock()
	for id := range w.book.paid {
		ids = append(ids, id)
	}
	w.book.mu.Unlock()
	return ids, nil
}

// Notify sends the gateway's notification for paymentID to node once
// through HandleCallback: no retry, the answer as it came.
func (w *Bundle) Notify(ctx context.Context, node *Node, paymentID string) error {
	p, ok := w.notifyParams(paymentID)
	if !ok {
		return fmt.Errorf("clustertest: payment %s is not paid at the gateway", paymentID)
	}
	pays := paymentpbconnect.NewPaymentServiceClient(w.http, node.URL)
	_, err := pays.HandleCallback(ctx, connect.NewRequest(&paymentpb.PaymentCallbackRequest{
		GatewayInterfaceId: w.Gateway, Payload: p.Encode(),
	}))
	return err
}

// CreatePayment orders the product as the world's buyer and creates an epay
// payment for it on node, once, returning the answer as it came.
func (w *Bundle) CreatePayment(ctx context.Context, node *Node) (string, error) {
	w.book.mu.Lock()
	c := w.buyer
	w.book.mu.Unlock()
	if c.token == "" {
		var err error
		if c, err = w.register(ctx, rand.IntN(1000)); err != nil {
			return "", err
		}
		w.book.mu.Lock()
		w.buyer = c
		w.book.mu.Unlock()
	}
	orders := orderpbconnect.NewOrderServiceClient(w.http, node.URL)
	o, err := orders.CreateOrder(ctx, withHeader(&orderpb.CreateOrderRequest{ProductId: w.Product}, "Authorization", "Bearer "+c.token))
	if err != nil {
		return "", err
	}
	pays := paymentpbconnect.NewPaymentServiceClient(w.http, node.URL)
	res, err := pays.CreatePayment(ctx, withHeader(&paymentpb.CreatePaymentRequest{
		OrderId: o.Msg.GetOrder().GetId(), GatewayInterfaceId: w.Gateway, ReturnUrl: "https://shop.example/done",
	}, "Authorization", "Bearer "+c.token))
	if err != nil {
		return "", err
	}
	return res.Msg.GetPayment().GetId(), nil
}
