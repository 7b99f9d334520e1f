package app_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// currencyRows writes a trends answer's currencies one line per day, so a
// whole answer compares at once: "CNY 2026-03-01 created/succeeded/failed
// received refunded".
func currencyRows(t *testing.T, res *paymentpb.GetPaymentTrendsResponse) []string {
	t.Helper()
	var out []string
	for _, c := range res.GetCurrencies() {
		require.Len(t, c.GetDays(), len(res.GetDays()), "one entry per day")
		for i, d := range c.GetDays() {
			require.Equal(t, res.GetDays()[i], d.GetDay())
			out = append(out, fmt.Sprintf("%s %s %d/%d/%d %s %s", c.GetCurrency(), d.GetDay(),
				d.GetCreated(), d.GetSucceeded(), d.GetFailed(), d.GetReceived(), d.GetRefunded()))
		}
	}
	return out
}

// gatewayRows writes a trends answer's gateways: a line of totals (rate,
// median seconds) and a line per day.
func gatewayRows(t *testing.T, res *paymentpb.GetPaymentTrendsResponse) []string {
	t.Helper()
	rate := func(r *float64) string {
		if r == nil {
			return "-"
		}
		return fmt.Sprintf("%.4f", *r)
	}
	var out []string
	for _, g := range res.GetGateways() {
		out = append(out, fmt.Sprintf("%s %d/%d/%d rate %s median %s", g.GetName(),
			g.GetCreated(), g.GetSucceeded(), g.GetFailed(), rate(g.SuccessRate), rate(g.MedianSecondsToSuccess)))
		require.Len(t, g.GetDays(), len(res.GetDays()), "one entry per day")
		for _, d := range g.GetDays() {
			out = append(out, fmt.Sprintf("%s %s %d/%d/%d rate %s", g.GetName(), d.GetDay(),
				d.GetCreated(), d.GetSucceeded(), d.GetFailed(), rate(d.SuccessRate)))
		}
	}
	return out
}

// The trends over the wire, for a world of known payments over three days,
// two currencies and two gateway interfaces, read in UTC and in
// Asia/Shanghai (UTC+8): a payment made at 20:00 UTC is the next day in
// Shanghai, one created at 23:59:59 there and paid two seconds later is
// created and paid on one UTC day but two Shanghai days, and one made on
// 28 February in UTC is on 1 March in Shanghai. In New York, the day
// summer time starts lasts 23 hours.
func TestGetPaymentTrendsCutsDaysInTheAdminsTimeZone(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	ctx := context.Background()
	pool := e.r.app.Pool()
	admin := paymentpbconnect.NewPaymentAdminServiceClient(http.DefaultClient, e.r.baseURL)
	trends := func(req *paymentpb.GetPaymentTrendsRequest, cr credential) (*paymentpb.GetPaymentTrendsResponse, error) {
		res, err := admin.GetPaymentTrends(ctx, with(req, cr))
		if err != nil {
			return nil, err
		}
		return res.Msg, nil
	}

	alipay := uuid.MustParse(e.epayGW) // display name "Alipay"
	other := testfixture.GatewayInterface(t, pool, "epay")
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return v
	}
	pay := func(gw uuid.UUID, amount, currency, status, created, settled string) uuid.UUID {
		p := testfixture.Payment{Customer: e.c.customerID, Gateway: gw, Amount: amount, Currency: currency, Status: status, CreatedAt: at(created)}
		if settled != "" {
			p.SettledAt = at(settled)
		}
		return testfixture.InsertPayment(t, pool, p)
	}
	a := pay(alipay, "10.00", "CNY", "success", "2026-03-01T10:00:00Z", "2026-03-01T10:00:30Z") // 30 s
	pay(alipay, "20.00", "CNY", "success", "2026-03-01T20:00:00Z", "2026-03-01T20:01:30Z")      // 90 s; 2 March in Shanghai
	pay(alipay, "5.50", "CNY", "failed", "2026-03-02T12:00:00Z", "2026-03-03T12:00:00Z")        // fails the next day
	pay(other, "7.25", "USD", "success", "2026-03-02T15:59:59Z", "2026-03-02T16:00:01Z")        // 2 s, across midnight in Shanghai
	pay(other, "3.00", "USD", "pending", "2026-03-03T01:00:00Z", "")                            //
	pay(alipay, "1.00", "CNY", "success", "2026-02-28T23:00:00Z", "2026-02-28T23:00:10Z")       // 10 s; 1 March in Shanghai
	testfixture.InsertRefund(t, pool, a, "4.00", at("2026-03-02T17:00:00Z"))                    // 3 March 01:00 in Shanghai

	utc, err := trends(&paymentpb.GetPaymentTrendsRequest{From: "2026-03-01", To: "2026-03-03"}, e.c.admin)
	require.NoError(t, err)
	require.Equal(t, "UTC", utc.GetTimeZone(), "no zone: UTC")
	require.Equal(t, []string{"2026-03-01", "2026-03-02", "2026-03-03"}, utc.GetDays())
	require.Equal(t, []string{
		"CNY 2026-03-01 2/2/0 30.00 0.00",
		"CNY 2026-03-02 1/0/0 0.00 4.00",
		"CNY 2026-03-03 0/0/1 0.00 0.00",
		"USD 2026-03-01 0/0/0 0.00 0.00",
		"USD 2026-03-02 1/1/0 7.25 0.00",
		"USD 2026-03-03 1/0/0 0.00 0.00",
	}, currencyRows(t, utc))
	require.Equal(t, []string{
		"Alipay 3/2/1 rate 0.6667 median 60.0000",
		"Alipay 2026-03-01 2/2/0 rate 1.0000",
		"Alipay 2026-03-02 1/0/1 rate 0.0000",
		"Alipay 2026-03-03 0/0/0 rate -",
		"epay 2/1/0 rate 1.0000 median 2.0000",
		"epay 2026-03-01 0/0/0 rate -",
		"epay 2026-03-02 1/1/0 rate 1.0000",
		"epay 2026-03-03 1/0/0 rate -",
	}, gatewayRows(t, utc))
	require.Equal(t, other.String(), utc.GetGateways()[1].GetGatewayInterfaceId())

	shanghai, err := trends(&paymentpb.GetPaymentTrendsRequest{From: "2026-03-01", To: "2026-03-03", TimeZone: "Asia/Shanghai"}, e.c.admin)
	require.NoError(t, err)
	require.Equal(t, "Asia/Shanghai", shanghai.GetTimeZone())
	require.Equal(t, []string{
		"CNY 2026-03-01 2/2/0 11.00 0.00",
		"CNY 2026-03-02 2/1/0 20.00 0.00",
		"CNY 2026-03-03 0/0/1 0.00 4.00",
		"USD 2026-03-01 0/0/0 0.00 0.00",
		"USD 2026-03-02 1/0/0 0.00 0.00",
		"USD 2026-03-03 1/1/0 7.25 0.00",
	}, currencyRows(t, shanghai))
	require.Equal(t, []string{
		"Alipay 4/3/1 rate 0.7500 median 30.0000",
		"Alipay 2026-03-01 2/2/0 rate 1.0000",
		"Alipay 2026-03-02 2/1/1 rate 0.5000",
		"Alipay 2026-03-03 0/0/0 rate -",
		"epay 2/1/0 rate 1.0000 median 2.0000",
		"epay 2026-03-01 0/0/0 rate -",
		"epay 2026-03-02 1/1/0 rate 1.0000",
		"epay 2026-03-03 1/0/0 rate -",
	}, gatewayRows(t, shanghai))

	// A zone with summer time: in New York 8 March 2026 lasts 23 hours
	// (02:00 EST is 03:00 EDT), from 05:00 UTC to 04:00 UTC the next day.
	pay(alipay, "2.00", "USD", "pending", "2026-03-08T04:59:59Z", "") // 7 March, 23:59:59 EST
	pay(alipay, "2.00", "USD", "pending", "2026-03-08T05:00:00Z", "") // 8 March, 00:00 EST
	pay(alipay, "2.00", "USD", "pending", "2026-03-09T03:59:59Z", "") // 8 March, 23:59:59 EDT
	pay(alipay, "2.00", "USD", "pending", "2026-03-09T04:00:00Z", "") // 9 March, 00:00 EDT
	newYork, err := trends(&paymentpb.GetPaymentTrendsRequest{From: "2026-03-07", To: "2026-03-09", TimeZone: "America/New_York"}, e.c.admin)
	require.NoError(t, err)
	require.Equal(t, []string{
		"USD 2026-03-07 1/0/0 0.00 0.00",
		"USD 2026-03-08 2/0/0 0.00 0.00",
		"USD 2026-03-09 1/0/0 0.00 0.00",
	}, currencyRows(t, newYork))
	utcDST, err := trends(&paymentpb.GetPaymentTrendsRequest{From: "2026-03-07", To: "2026-03-09"}, e.c.admin)
	require.NoError(t, err)
	require.Equal(t, []string{
		"USD 2026-03-07 0/0/0 0.00 0.00",
		"USD 2026-03-08 2/0/0 0.00 0.00",
		"USD 2026-03-09 2/0/0 0.00 0.00",
	}, currencyRows(t, utcDST))

	// A day without anything, and a range before everything: the days, and
	// no series.
	empty, err := trends(&paymentpb.GetPaymentTrendsRequest{From: "2026-01-01", To: "2026-01-01", TimeZone: "Asia/Shanghai"}, e.c.admin)
	require.NoError(t, err)
	require.Equal(t, []string{"2026-01-01"}, empty.GetDays())
	require.Empty(t, empty.GetCurrencies())
	require.Empty(t, empty.GetGateways())

	// The defaults: the 30 days up to today in the zone; a year (and a day)
	// is allowed.
	before := time.Now().UTC().Format("2006-01-02")
	def, err := trends(&paymentpb.GetPaymentTrendsRequest{}, e.c.admin)
	require.NoError(t, err)
	after := time.Now().UTC().Format("2006-01-02")
	require.Len(t, def.GetDays(), 30)
	require.Contains(t, []string{before, after}, def.GetTo())
	require.Equal(t, def.GetTo(), def.GetDays()[29])
	year, err := trends(&paymentpb.GetPaymentTrendsRequest{From: "2024-03-01", To: "2025-03-01"}, e.c.admin)
	require.NoError(t, err)
	require.Len(t, year.GetDays(), 366)

	// Bad input and bad callers.
	for _, tc := range []struct {
		req  *paymentpb.GetPaymentTrendsRequest
		want string
	}{
		{&paymentpb.GetPaymentTrendsRequest{TimeZone: "Mars/Olympus_Mons"}, "not an IANA time zone"},
		{&paymentpb.GetPaymentTrendsRequest{TimeZone: "Local"}, "not an IANA time zone"},
		{&paymentpb.GetPaymentTrendsRequest{TimeZone: "+08:00"}, "not an IANA time zone"},
		{&paymentpb.GetPaymentTrendsRequest{From: "2026-03-04", To: "2026-03-01"}, "is after to"},
		{&paymentpb.GetPaymentTrendsRequest{From: "2025-01-01", To: "2026-03-01"}, "at most 366"},
		{&paymentpb.GetPaymentTrendsRequest{From: "2026-02-30", To: "2026-03-01"}, "from: \"2026-02-30\" is not a date"},
		{&paymentpb.GetPaymentTrendsRequest{To: "03/01/2026"}, "to: \"03/01/2026\" is not a date"},
	} {
		_, err := trends(tc.req, e.c.admin)
		require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v: %v", tc.req, err)
		require.ErrorContains(t, err, tc.want)
	}
	_, err = trends(&paymentpb.GetPaymentTrendsRequest{}, e.c.customer)
	require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err))
	_, err = trends(&paymentpb.GetPaymentTrendsRequest{}, e.c.key)
	require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err))
	_, err = trends(&paymentpb.GetPaymentTrendsRequest{}, nobody)
	require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err))
}

// The instance that leads the event worker folds the trends' changes into
// their rollup (payment.TrendFolder, every 2 s), so what every GetPaymentTrends
// adds up beside the rollup stays a few seconds' worth of writes.
func TestTheLeadingInstanceFoldsTheTrendsChanges(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	ctx := context.Background()
	pool := e.r.app.Pool()
	testfixture.InsertPayment(t, pool, testfixture.Payment{Customer: e.c.customerID, Gateway: uuid.MustParse(e.epayGW), Status: "success"})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var waiting int
		require.NoError(c, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM payment_trend_currency_changes)
			+ (SELECT count(*) FROM payment_trend_gateway_changes) + (SELECT count(*) FROM payment_trend_seconds_changes)`).Scan(&waiting))
		assert.Zero(c, waiting, "changes waiting")
	}, 15*time.Second, 50*time.Millisecond, "the changes are folded")
	var created, succeeded int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT sum(created), sum(succeeded) FROM payment_trend_currency_quarters`).Scan(&created, &succeeded))
	require.Equal(t, [2]int64{1, 1}, [2]int64{created, succeeded}, "into the rollup")
}
