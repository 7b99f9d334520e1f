package renewal_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/balance"
	"github.com/rustbill/paymentd/internal/fakes/epay"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/plugintest"
	"github.com/rustbill/paymentd/internal/rpc"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testfixture"
	"github.com/rustbill/paymentd/internal/testkit"
)

// payWorld is what the model's payments need: the fake epay gateway (its
// notifications never sent by itself: the model delivers each one when it
// chooses, late, twice, or at once from two callers), the payment and
// order services on the model's clock, and an admin.
type payWorld struct {
	fake   *epay.Server
	gw     payment.Gateway
	pays   *payment.Service
	orders *order.Service
	admin  context.Context
	// card is the saved cards' Stripe.
	card *cardGateway
	// clock is the running sequence's clock.
	clock atomic.Pointer[testkit.Clock]
}

func (w *payWorld) Get(_ context.Context, id uuid.UUID) (payment.Gateway, error) {
	if w.card != nil && id == w.card.gw.InterfaceID {
		return w.card.gw, nil
	}
	if id != w.gw.InterfaceID {
		return payment.Gateway{}, errors.New("no such gateway interface")
	}
	return w.gw, nil
}

func (w *payWorld) now() time.Time { return w.clock.Load().Now() }

func newPayWorld(t *testing.T, b *bundle) *payWorld {
	t.Helper()
	ctx := context.Background()
	w := &payWorld{fake: epay.New(epay.Options{NotifyScale: 0.0001, Logger: slog.New(slog.DiscardHandler)})}
	w.clock.Store(b.clock)
	require.NoError(t, w.fake.Start())
	t.Cleanup(w.fake.Close)
	w.fake.DropNotify(true) // the model delivers every notification itself
	var adminID uuid.UUID
	gwID := testfixture.GatewayInterface(t, b.pool, "epay")
	cfg, err := json.Marshal(map[string]any{"api_url": w.fake.URL() + "/", "pid": epay.DefaultPID, "key": epay.DefaultKey})
	require.NoError(t, err)
	w.gw = payment.Gateway{
		InterfaceID: gwID, PluginName: "epay", DisplayName: "epay", Enabled: true, ConfigJSON: string(cfg),
		Plugin: plugintest.Load(t, "gateway/epay.lua", plugin.Options{}), Currencies: []string{"CNY"},
	}
	w.card = newCardGateway(t, b)
	log := slog.New(slog.DiscardHandler)
	w.pays = payment.NewService(b.pool, log, payment.WithGateways(w), payment.WithPublicURL("http://127.0.0.1:9"), payment.WithClock(w.now))
	w.orders = order.NewService(b.pool, []string{"CNY"}, nil, w.now, log).WithBalanceRefunder(w.pays)
	require.NoError(t, b.pool.QueryRow(ctx, `INSERT INTO admin_users (username, password_hash) VALUES ($1, 'x') RETURNING id`,
		"model-admin-"+uuid.NewString()[:8]).Scan(&adminID))
	w.admin = auth.WithPrincipal(ctx, auth.Principal{Role: auth.RoleAdmin, ID: adminID, Kind: auth.KindSession})
	return w
}

func asCustomer(id uuid.UUID) context.Context {
	return auth.WithPrincipal(context.Background(), auth.Principal{Role: auth.RoleCustomer, ID: id, Kind: auth.KindJWT})
}

// codeOf is the code a client would get for err over the wire.
func codeOf(err error) connect.Code {
	if err == nil {
		return 0
	}
	return connect.CodeOf(rpc.Error(context.Background(), slog.New(slog.DiscardHandler), err))
}

// noInternal fails the property when a call answered Internal: nothing a
// customer, an admin or a gateway does may.
func noInternal(rt *rapid.T, what string, err error) {
	if codeOf(err) == connect.CodeInternal {
		rt.Fatalf("%s answered Internal: %v", what, err)
	}
}

// gatewayPayment is one epay payment the model made.
type gatewayPayment struct {
	id uuid.UUID
	// taken: the gateway took the money (the buyer paid); delivered: its
	// notification reached the service at least once since.
	taken, delivered bool
}

// notifyPayload is the gateway's signed notification of a paid payment.
func (w *payWorld) notifyPayload(rt *rapid.T, id uuid.UUID) string {
	o, ok := w.fake.Order(id.String())
	if !ok {
		rt.Fatalf("payment %s unknown to the gateway", id)
	}
	v := url.Values{}
	v.Set("pid", epay.DefaultPID)
	v.Set("trade_no", o.TradeNo)
	v.Set("out_trade_no", id.String())
	v.Set("type", "alipay")
	v.Set("name", o.Name)
	v.Set("money", o.Money)
	v.Set("trade_status", "TRADE_SUCCESS")
	v.Set("sign", epay.Sign(v, epay.DefaultKey))
	v.Set("sign_type", "MD5")
	return v.Encode()
}

// take has the buyer pay at the gateway (once).
func (w *payWorld) take(rt *rapid.T, p *gatewayPayment) {
	if p.taken {
		return
	}
	if err := w.fake.Pay(p.id.String()); err != nil && !errors.Is(err, epay.ErrAlreadyPaid) {
		rt.Fatalf("gateway pay %s: %v", p.id, err)
	}
	p.taken = true
}

// deliver sends the gateway's notification of a taken payment from n
// callers at once, as the gateway's retry and a duplicate would.
func (w *payWorld) deliver(rt *rapid.T, p *gatewayPayment, n int) {
	payload := w.notifyPayload(rt, p.id)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = w.pays.HandleCallback(context.Background(), payment.Callback{GatewayInterfaceID: w.gw.InterfaceID, Method: http.MethodGet, Payload: payload})
		})
	}
	wg.Wait()
	for _, err := range errs {
		noInternal(rt, "the callback of payment "+p.id.String(), err)
	}
	p.delivered = true
}

// checkTakenMoneyRecorded: every payment whose money the gateway took and
// whose notification arrived is recorded: settled (success, refunded), or
// failed with the whole amount captured, to be returned.
func checkTakenMoneyRecorded(rt *rapid.T, b *bundle, ps []*gatewayPayment) {
	for _, p := range ps {
		if !p.taken || !p.delivered {
			continue
		}
		got, err := store.Q(b.pool).GetPayment(context.Background(), p.id)
		if err != nil {
			rt.Fatalf("payment %s: %v", p.id, err)
		}
		switch {
		case got.Status == "success" || got.Status == "refunded":
		case got.Status == "failed" && got.CapturedAmount.Cmp(got.Amount) == 0:
		default:
			rt.Fatalf("money taken and never recorded: payment %s is %s with %s captured of %s (invoice %v, order %v)",
				p.id, got.Status, got.CapturedAmount, got.Amount, got.InvoiceID, got.OrderID)
		}
	}
}

// paidOrder is a recurring order of customer whose first period was paid
// for price: from the balance (topped up first) or through the gateway
// (the notification delivered at once); then provisioned and active.
func (b *bundle) paidOrder(rt *rapid.T, w *payWorld, customer uuid.UUID, cycle, price string, gateway bool) (uuid.UUID, *gatewayPayment) {
	ctx := context.Background()
	var id uuid.UUID
	if err := b.pool.QueryRow(ctx, `INSERT INTO orders (customer_id, total_amount, currency, status, billing_cycle, renewal_price, description)
		VALUES ($1, $2, 'CNY', 'pending', $3, $2, 'VPS') RETURNING id`, customer, money.MustParse(price), cycle).Scan(&id); err != nil {
		rt.Fatalf("order: %v", err)
	}
	var gp *gatewayPayment
	if gateway {
		p, err := w.pays.CreatePayment(asCustomer(customer), payment.NewPayment{OrderID: &id, GatewayInterfaceID: w.gw.InterfaceID, ReturnURL: "https://shop.example/done"})
		if err != nil {
			rt.Fatalf("first payment: %v", err)
		}
		gp = &gatewayPayment{id: p.ID}
		w.take(rt, gp)
		w.deliver(rt, gp, 1)
	} else {
		if err := store.WithTx(ctx, b.pool, func(tx pgx.Tx) error {
			return postTopUp(ctx, tx, customer, price, w.now())
		}); err != nil {
			rt.Fatalf("top-up: %v", err)
		}
		if _, err := w.orders.PayWithBalance(asCustomer(customer), id); err != nil {
			rt.Fatalf("pay with balance: %v", err)
		}
	}
	for _, to := range []order.Status{order.StatusProvisioning, order.StatusActive} {
		if err := store.WithTx(ctx, b.pool, func(tx pgx.Tx) error {
			o, err := store.Q(tx).GetOrderForUpdate(ctx, id)
			if err != nil || order.Status(o.Status) == to {
				return err
			}
			_, err = order.Transition(ctx, tx, o, order.Move{To: to, By: audit.System("test"), At: store.Timestamp(w.now()), Location: b.loc})
			return err
		}); err != nil {
			rt.Fatalf("provision: %v", err)
		}
	}
	return id, gp
}

// postTopUp credits customer's balance by amount, as an admin's manual
// adjustment does.
func postTopUp(ctx context.Context, tx pgx.Tx, customer uuid.UUID, amount string, at time.Time) error {
	_, err := balance.Post(ctx, tx, balance.Entry{CustomerID: customer, Kind: balance.ManualAdjust, Amount: money.MustParse(amount),
		Description: "top-up", By: audit.System("test"), At: store.Timestamp(at)})
	return err
}

// propertyTB hands the property's failures to rapid (so that a failing
// sequence is shrunk) while helpers that want a testing.TB get one.
type propertyTB struct {
	testing.TB
	rt *rapid.T
}

func (p propertyTB) Helper()                           {}
func (p propertyTB) Errorf(format string, args ...any) { p.rt.Errorf(format, args...) }
func (p propertyTB) Error(args ...any)                 { p.rt.Error(args...) }
func (p propertyTB) Fatalf(format string, args ...any) { p.rt.Fatalf(format, args...) }
func (p propertyTB) Fatal(args ...any)                 { p.rt.Fatal(args...) }
func (p propertyTB) FailNow()                          { p.rt.FailNow() }
func (p propertyTB) Fail()                             { p.rt.Fail() }
func (p propertyTB) Failed() bool                      { return p.rt.Failed() }
func (p propertyTB) Logf(format string, args ...any)   { p.rt.Logf(format, args...) }
func (p propertyTB) Log(args ...any)                   { p.rt.Log(args...) }
