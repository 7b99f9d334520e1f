package app_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"

	"buf.build/gen/go/bufbuild/protovalidate/protocolbuffers/go/buf/validate"
	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
)

// activeMonthlyOrder is an active monthly order of a product with nothing
// to provision, paid from alice's balance: its first period is paid, so an
// admin may extend it.
func (e *payBundle) activeMonthlyOrder(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	prod, err := e.orders.CreateProduct(ctx, with(&orderpb.CreateProductRequest{Name: "VPS monthly", Price: "10.00", Currency: "CNY", BillingCycle: "monthly"}, e.c.admin))
	require.NoError(t, err)
	placed, err := e.orders.CreateOrder(ctx, with(&orderpb.CreateOrderRequest{ProductId: prod.Msg.GetProduct().GetId()}, e.c.customer))
	require.NoError(t, err)
	id := placed.Msg.GetOrder().GetId()
	customers := identitypbconnect.NewCustomerAdminServiceClient(http.DefaultClient, e.r.baseURL)
	_, err = customers.AdjustBalance(ctx, with(&identitypb.AdjustBalanceRequest{CustomerId: e.c.customerID.String(), Amount: "10.00", Note: "top-up"}, e.c.admin))
	require.NoError(t, err)
	_, err = e.orders.PayWithBalance(ctx, with(&orderpb.PayWithBalanceRequest{OrderId: id}, e.c.customer))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		o, err := e.orders.GetOrder(ctx, with(&orderpb.GetOrderRequest{Id: id}, e.c.customer))
		return err == nil && o.Msg.GetOrder().GetStatus() == "active"
	}, 10*time.Second, 20*time.Millisecond, "order %s never became active", id)
	return id
}

// requireRefusedNaming asserts err is InvalidArgument worded as the request
// validator words a violation ("validation error: <field>: …") and carrying
// the buf.validate.Violations detail that names field.
func requireRefusedNaming(t *testing.T, err error, field string) {
	t.Helper()
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
	var ce *connect.Error
	require.True(t, errors.As(err, &ce))
	require.Contains(t, ce.Message(), "validation error: "+field+": ")
	var named bool
	for _, d := range ce.Details() {
		v, derr := d.Value()
		require.NoError(t, derr)
		if vs, ok := v.(*validate.Violations); ok {
			for _, el := range vs.GetViolations() {
				elems := el.GetField().GetElements()
				named = named || (len(elems) == 1 && elems[0].GetFieldName() == field)
			}
		}
	}
	require.True(t, named, "a buf.validate.Violations detail names %s: %v", field, ce.Details())
}

// The outside probe's reproduction (issue 35, finding 3): a time that is
// year 9999 as written but year 10000 in UTC ("9999-12-31T23:59:59-23:59")
// answered Internal from ExtendServicePeriod, CreateAdminApiKey and
// CreateInvoice, because the audit row's JSON cannot hold year 10000. Every
// such time is now InvalidArgument naming its field, and nothing changes:
// no audit row, no key, no invoice, the period's end as it was.
func TestATimePastYear9999IsInvalidArgumentNamingTheField(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	ctx := context.Background()
	ids := identitypbconnect.NewIdentityServiceClient(http.DefaultClient, e.r.baseURL)
	order := e.activeMonthlyOrder(t)
	state := func() string {
		var s string
		require.NoError(t, e.r.app.Pool().QueryRow(ctx, `SELECT concat_ws('|',
			(SELECT count(*) FROM audit_log), (SELECT count(*) FROM admin_api_keys), (SELECT count(*) FROM invoices),
			(SELECT string_agg(ends_at::text, ',' ORDER BY seq) FROM service_periods WHERE order_id = $1),
			(SELECT paid_until::text FROM orders WHERE id = $1))`, order).Scan(&s))
		return s
	}
	before := state()

	for _, at := range []string{
		"9999-12-31T23:59:59-23:59",      // the probe's: 10000-01-01T23:58:59Z
		"9999-12-31T23:59:59.999999999Z", // as far as RFC 3339 goes, past the margin
		"0000-01-01T00:00:00+23:59",      // year -1 in UTC
		"0001-01-01T00:00:00Z",           // before 1970
	} {
		_, err := e.orders.ExtendServicePeriod(ctx, with(&orderpb.ExtendServicePeriodRequest{OrderId: order, EndsAt: at, Reason: "probe"}, e.c.admin))
		requireRefusedNaming(t, err, "ends_at")
		_, err = ids.CreateAdminApiKey(ctx, with(&identitypb.CreateAdminApiKeyRequest{Name: "probe", Scope: "read", ExpiresAt: at}, e.c.admin))
		requireRefusedNaming(t, err, "expires_at")
		_, err = e.orders.CreateInvoice(ctx, with(&orderpb.CreateInvoiceRequest{
			Target: &orderpb.CreateInvoiceRequest_OrderId{OrderId: order}, Amount: "1.00", DueAt: at,
		}, e.c.admin))
		requireRefusedNaming(t, err, "due_at")
	}
	require.Equal(t, before, state(), "a refused time changes nothing")
}

// An end, an expiry or a due time more than ten years ahead is an admin's
// slip (a year typed 2125 for 2025), never meant: refused naming the field.
// Nine years ahead is taken.
func TestAnEndOrExpiryMoreThanTenYearsAheadIsRefused(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	ctx := context.Background()
	ids := identitypbconnect.NewIdentityServiceClient(http.DefaultClient, e.r.baseURL)
	order := e.activeMonthlyOrder(t)

	far := time.Now().UTC().AddDate(10, 0, 1).Format(time.RFC3339)
	_, err := e.orders.ExtendServicePeriod(ctx, with(&orderpb.ExtendServicePeriodRequest{OrderId: order, EndsAt: far, Reason: "typo"}, e.c.admin))
	requireRefusedNaming(t, err, "ends_at")
	_, err = ids.CreateAdminApiKey(ctx, with(&identitypb.CreateAdminApiKeyRequest{Name: "typo", Scope: "read", ExpiresAt: far}, e.c.admin))
	requireRefusedNaming(t, err, "expires_at")
	_, err = e.orders.CreateInvoice(ctx, with(&orderpb.CreateInvoiceRequest{
		Target: &orderpb.CreateInvoiceRequest_OrderId{OrderId: order}, Amount: "1.00", DueAt: far,
	}, e.c.admin))
	requireRefusedNaming(t, err, "due_at")

	near := time.Now().UTC().AddDate(9, 0, 0).Format(time.RFC3339)
	res, err := e.orders.ExtendServicePeriod(ctx, with(&orderpb.ExtendServicePeriodRequest{OrderId: order, EndsAt: near, Reason: "goodwill"}, e.c.admin))
	require.NoError(t, err)
	require.Equal(t, near, res.Msg.GetPeriod().GetEndsAt())
	key, err := ids.CreateAdminApiKey(ctx, with(&identitypb.CreateAdminApiKeyRequest{Name: "long-lived", Scope: "read", ExpiresAt: near}, e.c.admin))
	require.NoError(t, err)
	require.Equal(t, near, key.Msg.GetApiKey().GetExpiresAt())
	_, err = e.orders.CreateInvoice(ctx, with(&orderpb.CreateInvoiceRequest{
		Target: &orderpb.CreateInvoiceRequest_OrderId{OrderId: order}, Amount: "1.00", DueAt: near,
	}, e.c.admin))
	require.NoError(t, err)
}

// The filters take the same range: a payment-stats start, a trends day and
// an export's from or to outside 1970 … 9998 is refused naming the field
// (exports answer 400 with the message), where before a year-0 export was
// run against PostgreSQL as if meant.
func TestTimeFiltersOutsideTheRangeAreRefused(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	ctx := context.Background()
	admin := paymentpbconnect.NewPaymentAdminServiceClient(http.DefaultClient, e.r.baseURL)

	_, err := admin.GetPaymentStats(ctx, with(&paymentpb.GetPaymentStatsRequest{Since: "9999-12-31T23:59:59-23:59"}, e.c.admin))
	requireRefusedNaming(t, err, "since")
	for _, tc := range []struct{ from, to, zone, field string }{
		{"0000-01-01", "1970-01-02", "UTC", "from"},
		{"1969-12-31", "1970-01-02", "Pacific/Kiritimati", "from"},
		{"9998-12-31", "9999-01-01", "Pacific/Pago_Pago", "to"},
	} {
		_, err := admin.GetPaymentTrends(ctx, with(&paymentpb.GetPaymentTrendsRequest{From: tc.from, To: tc.to, TimeZone: tc.zone}, e.c.admin))
		requireRefusedNaming(t, err, tc.field)
	}
	_, err = admin.GetPaymentTrends(ctx, with(&paymentpb.GetPaymentTrendsRequest{From: "1970-01-01", To: "1970-01-02", TimeZone: "Pacific/Kiritimati"}, e.c.admin))
	require.NoError(t, err, "the first day of the range is taken in any zone")

	w := &exportBundle{e: e}
	for _, tc := range []struct{ from, to, tz, want string }{
		{"0001-01-01", "2030-01-01", "UTC", "from: 0001-01-01"},
		{"2020-01-01T00:00:00Z", "9999-12-31T23:59:59-23:59", "UTC", "to: 9999-12-31T23:59:59-23:59"},
		{"0000-01-01T00:00:00+23:59", "2030-01-01", "Asia/Shanghai", "from: 0000-01-01T00:00:00+23:59"},
		{"2020-01-01", "9999-12-31", "UTC", "to: 9999-12-31"},
	} {
		status, _, body := w.get(t, "/export/payments.csv", url.Values{"from": {tc.from}, "to": {tc.to}, "tz": {tc.tz}}, e.c.admin)
		require.Equal(t, http.StatusBadRequest, status, "%v: %s", tc, body)
		require.Contains(t, body, tc.want)
		require.Contains(t, body, "1970-01-01")
	}
}
