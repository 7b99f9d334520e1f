package clustertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/structpb"

	gatewaypb "github.com/rustbill/paymentd/gen/billing/gateway"
	"github.com/rustbill/paymentd/gen/billing/gateway/gatewaypbconnect"
	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	"github.com/rustbill/paymentd/gen/billing/order/orderpbconnect"
	"github.com/rustbill/paymentd/internal/fakes/epay"
)

// Price is what the load's product costs.
const Price = "12.30"

// Bundle is what the load needs on a cluster: an admin session, an enabled
// epay gateway interface talking to the fake gateway, a product.
type Bundle struct {
	C    *Cluster
	Fake *epay.Server
	// Gateway is the epay interface's id, Product the product's.
	Gateway, Product string
	// Admin is the admin session cookie ("name=value").
	Admin string

	http *http.Client
	logf func(string, ...any)
	book *book
	// buyer is the customer of CreatePayment (guarded by book.mu).
	buyer customer
	// via, when set, is where every call goes (a Balancer's URL) instead
	// of a random live node.
	via string
}

// Setup logs in as the bootstrap admin on a live node and creates the
// gateway interface and the product.
func Setup(ctx context.Context, c *Cluster, fake *epay.Server) (*Bundle, error) {
	w := &Bundle{
		C: c, Fake: fake, logf: c.opts.Logf, book: newBook(),
		http: &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}},
	}
	err := w.retry(ctx, "setup", func(base string) error {
		ids := identitypbconnect.NewIdentityServiceClient(w.http, base)
		res, err := ids.AdminLogin(ctx, connect.NewRequest(&identitypb.AdminLoginRequest{Username: "admin", Password: AdminPassword}))
		if err != nil {
			return err
		}
		w.Admin = strings.SplitN(res.Header().Get("Set-Cookie"), ";", 2)[0]
		if w.Admin == "" {
			return errors.New("clustertest: admin login set no cookie")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	cfg, err := structpb.NewStruct(map[string]any{"api_url": fake.URL() + "/", "pid": epay.DefaultPID, "key": epay.DefaultKey})
	if err != nil {
		return nil, err
	}
	err = w.retry(ctx, "setup", func(base string) error {
		gw := gatewaypbconnect.NewGatewayAdminServiceClient(w.http, base)
		res, err := gw.CreateGatewayInterface(ctx, asAdmin(w, &gatewaypb.CreateGatewayInterfaceRequest{
			PluginName: "epay", DisplayName: "Alipay (fake)", Config: cfg,
		}))
		if err != nil {
			return err
		}
		w.Gateway = res.Msg.GetGatewayInterface().GetId()
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = w.retry(ctx, "setup", func(base string) error {
		gw := gatewaypbconnect.NewGatewayAdminServiceClient(w.http, base)
		_, err := gw.EnableGatewayInterface(ctx, asAdmin(w, &gatewaypb.EnableGatewayInterfaceRequest{Id: w.Gateway}))
		return err
	})
	if err != nil {
		return nil, err
	}
	err = w.retry(ctx, "setup", func(base string) error {
		orders := orderpbconnect.NewOrderServiceClient(w.http, base)
		res, err := orders.CreateProduct(ctx, asAdmin(w, &orderpb.CreateProductRequest{Name: "VPS 1个月", Price: Price, Currency: "CNY"}))
		if err != nil {
			return err
		}
		w.Product = res.Msg.GetProduct().GetId()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// Close drops the harness's idle connections.
func (w *Bundle) Close() { w.http.CloseIdleConnections() }

// asAdmin is a request carrying the admin session.
func asAdmin[T any](w *Bundle, msg *T) *connect.Request[T] { return withHeader(msg, "Cookie", w.Admin) }

// withHeader is a request with one header set.
func withHeader[T any](msg *T, key, value string) *connect.Request[T] {
	r := connect.NewRequest(msg)
	if value != "" {
		r.Header().Set(key, value)
	}
	return r
}

// transient reports whether a call may succeed on another node or later:
// the node is down (transport error: connect reports a reset connection as
// Canceled or Unavailable), the database is (Unavailable, Internal,
// Aborted), the call ran out of time, or the node asked to be asked again
// later (ResourceExhausted with Retry-After: the password gate's bound on
// argon2 hashes at once, which registrations meet on a busy machine).
// retry stops on its own context.
func transient(err error) bool {
	if err == nil {
		return false
	}
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable, connect.CodeInternal, connect.CodeAborted, connect.CodeDeadlineExceeded,
		connect.CodeUnknown, connect.CodeCanceled, connect.CodeResourceExhausted:
		return true
	}
	return false
}

// Through sends the load's calls to the balancer from now on, as clients
// of an operator's deployment reach it, instead of to random live nodes.
func (w *Bundle) Through(b *Balancer) { w.via = b.URL() }

// node picks a live node at random ("" when none is alive), or is the
// balancer (Through).
func (w *Bundle) node() string {
	if w.via != "" {
		return w.via
	}
	alive := w.C.Alive()
	if len(alive) == 0 {
		return ""
	}
	return alive[rand.IntN(len(alive))].URL
}

// retry calls fn on random live nodes until it succeeds, fails for a reason
// that is not transient, or ctx ends; every attempt's outcome is counted
// under op.
func (w *Bundle) retry(ctx context.Context, op string, fn func(base string) error) error {
	var err error
	for attempt := 0; ; attempt++ {
		base := w.node()
		if base == "" {
			err = errors.New("clustertest: no live node")
		} else {
			err = fn(base)
			w.book.count(op, err)
		}
		if base != "" && !transient(err) {
			return err
		}
		wait := time.Duration(min(attempt+1, 10)) * 50 * time.Millisecond
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(wait):
		}
	}
}

// notifyParams are the signed parameters of the fake gateway's notification
// for a paid order, exactly as it sends them.
func (w *Bundle) notifyParams(paymentID string) (url.Values, bool) {
	o, ok := w.Fake.Order(paymentID)
	if !ok || !o.Paid {
		return nil, false
	}
	p := url.Values{}
	p.Set("pid", o.PID)
	p.Set("trade_no", o.TradeNo)
	p.Set("out_trade_no", o.OutTradeNo)
	p.Set("type", o.Type)
	p.Set("name", o.Name)
	p.Set("money", o.Money)
	p.Set("trade_status", "TRADE_SUCCESS")
	if o.Param != "" {
		p.Set("param", o.Param)
	}
	if o.APITradeNo != "" {
		p.Set("api_trade_no", o.APITradeNo)
	}
	p.Set("sign", epay.Sign(p, epay.DefaultKey))
	p.Set("sign_type", "MD5")
	return p, true
}

// Resign signs params again with the merchant key (a gateway, or someone
// holding its key, vouching for whatever the params now say).
func Resign(p url.Values) url.Values {
	q := url.Values{}
	for k, v := range p {
		if k != "sign" && k != "sign_type" {
			q[k] = append([]string(nil), v...)
		}
	}
	q.Set("sign", epay.Sign(q, epay.DefaultKey))
	q.Set("sign_type", "MD5")
	return q
}

// Figures summarise a run for people.
func (w *Bundle) Figures() string { return w.book.String() }

func formatCents(c int64) string {
	sign := ""
	if c < 0 {
		sign, c = "-", -c
	}
	return fmt.Sprintf("%s%d.%02d", sign, c/100, c%100)
}
