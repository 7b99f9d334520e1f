package adminui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	gatewaypb "github.com/rustbill/paymentd/gen/billing/gateway"
	"github.com/rustbill/paymentd/gen/billing/gateway/gatewaypbconnect"
	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// trendWorld writes payments on the 90 days before today (UTC, the
// browser's zone in the test): two gateway interfaces made through the
// API, CNY and USD, successes, failures, pending ones and refunds, with
// amounts that differ from day to day. Rows are written directly
// (testfixture): no API creates a payment in the past.
func trendWorld(t *testing.T, s *service) {
	t.Helper()
	ctx := context.Background()
	reg, err := identitypbconnect.NewIdentityServiceClient(http.DefaultClient, s.baseURL).Register(ctx, connect.NewRequest(&identitypb.RegisterRequest{
		Email: fmt.Sprintf("trends-%s@example.com", uuid.NewString()[:8]), Password: "customer-password", Name: "Trends Customer",
	}))
	require.NoError(t, err)
	customer := uuid.MustParse(reg.Msg.GetCustomer().GetId())
	gateways := gatewaypbconnect.NewGatewayAdminServiceClient(s.admin, s.baseURL)
	newInterface := func(plugin, name string, cfg map[string]any) uuid.UUID {
		c, err := structpb.NewStruct(cfg)
		require.NoError(t, err)
		gi, err := gateways.CreateGatewayInterface(ctx, connect.NewRequest(&gatewaypb.CreateGatewayInterfaceRequest{PluginName: plugin, DisplayName: name, Config: c}))
		require.NoError(t, err)
		return uuid.MustParse(gi.Msg.GetGatewayInterface().GetId())
	}
	alipay := newInterface("epay", "Alipay", map[string]any{"api_url": "https://pay.example.com/", "pid": "1001", "key": "trends-key"})
	bank := newInterface("bank_transfer", "Bank transfer",
		map[string]any{"bank_name": "E2E Bank", "account_name": "Rustbill Ltd", "account_number": "DE89 3704 0044 0532 0130 00", "currencies": []any{"CNY", "USD"}})

	pool := s.app.Pool()
	today := time.Now().UTC().Truncate(24 * time.Hour)
	for ago := 1; ago < 90; ago++ {
		day := today.AddDate(0, 0, -ago)
		n := 1 + (ago*7)%5 // 1 to 5 payments a day
		for i := range n {
			created := day.Add(time.Duration(8+i*3) * time.Hour)
			gw, currency := alipay, "CNY"
			if (ago+i)%3 == 0 {
				gw = bank
			}
			if (ago+i)%4 == 0 {
				currency = "USD"
			}
			status := "success"
			switch (ago*3 + i) % 7 {
			case 0:
				status = "failed"
			case 1:
				if ago < 3 {
					status = "pending"
				}
			}
			amount := fmt.Sprintf("%d.%02d", 20+(ago*13+i*29)%180, (ago*7+i)%100)
			settled := created.Add(time.Duration(30+(ago*17+i*11)%600) * time.Second)
			if gw == bank {
				settled = settled.Add(5 * time.Hour) // a transfer takes hours
			}
			id := testfixture.InsertPayment(t, pool, testfixture.Payment{
				Customer: customer, Gateway: gw, Amount: amount, Currency: currency, Status: status, CreatedAt: created, SettledAt: settled,
			})
			if status == "success" && (ago+i)%6 == 0 {
				testfixture.InsertRefund(t, pool, id, "10.00", settled.Add(26*time.Hour))
			}
		}
	}
}

// recurringWorld writes recurring services with their first periods
// (directly: no API starts a service in the past): a monthly one of 40
// days, a monthly one started 10 days ago, and an annual one that started
// 60 days ago and ended 5 days ago.
func recurringWorld(t *testing.T, s *service) {
	t.Helper()
	pool := s.app.Pool()
	customer := testfixture.Customer(t, pool)
	now := time.Now().UTC()
	for _, o := range []struct {
		cycle, price, status string
		started, ended       time.Duration
	}{
		{"monthly", "10.00", "active", 40 * 24 * time.Hour, 0},
		{"monthly", "15.00", "active", 10 * 24 * time.Hour, 0},
		{"annual", "120.00", "completed", 60 * 24 * time.Hour, 5 * 24 * time.Hour},
	} {
		start := now.Add(-o.started)
		var id uuid.UUID
		require.NoError(t, pool.QueryRow(context.Background(), `INSERT INTO orders (customer_id, total_amount, currency, status, billing_cycle, renewal_price, paid_at)
			VALUES ($1, $2, 'CNY', $3, $4, $2, $5) RETURNING id`, customer, o.price, o.status, o.cycle, start).Scan(&id))
		outcome, closed := (*string)(nil), start
		if o.ended > 0 {
			ended := "ended"
			outcome, closed = &ended, now.Add(-o.ended)
		}
		_, err := pool.Exec(context.Background(), `INSERT INTO service_periods (order_id, seq, starts_at, ends_at, anchor_at, anchor_months, status, paid_at, outcome, created_at, updated_at)
			VALUES ($1, 1, $2, $3, $2, 1, 'paid', $2, $4, $2, $5)`, id, start, start.AddDate(0, 2, 0), outcome, closed)
		require.NoError(t, err)
	}
}

// TestDashboardTrendsEndToEnd drives the dashboard's trends in Chromium
// against the world above: for 7, 30 and 90 days, every point of every
// chart (the values given to uPlot) and every cell of the tables under
// them equal GetPaymentTrends' answer for the same days, the tables are
// there for screen readers without opening anything (a toggle shows them),
// and the legend shows a day's figures under the pointer. With
// PAYMENTD_E2E_DOCS_SCREENSHOT=1 it writes docs/screenshots/dashboard.png.
func TestDashboardTrendsEndToEnd(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("browser test: not in -short mode")
	}
	s := startService(t, "/admin")
	trendWorld(t, s)
	fx := fixture{Mode: "trends", BaseURL: s.baseURL, AdminPath: "/admin", Username: "admin", Password: adminPassword, Trends: map[string]json.RawMessage{}}
	admin := paymentpbconnect.NewPaymentAdminServiceClient(s.admin, s.baseURL)
	today := time.Now().UTC()
	for _, days := range []int{7, 30, 90} {
		res, err := admin.GetPaymentTrends(context.Background(), connect.NewRequest(&paymentpb.GetPaymentTrendsRequest{
			From: today.AddDate(0, 0, 1-days).Format("2006-01-02"), To: today.Format("2006-01-02"), TimeZone: "UTC",
		}))
		require.NoError(t, err)
		require.Len(t, res.Msg.GetDays(), days)
		require.Len(t, res.Msg.GetCurrencies(), 2, "CNY and USD in every range")
		require.Len(t, res.Msg.GetGateways(), 2)
		b, err := protojson.Marshal(res.Msg)
		require.NoError(t, err)
		fx.Trends[strconv.Itoa(days)] = b
	}
	recurringWorld(t, s)
	rr, err := admin.GetRecurringRevenue(context.Background(), connect.NewRequest(&paymentpb.GetRecurringRevenueRequest{
		From: today.AddDate(0, 0, -29).Format("2006-01-02"), To: today.Format("2006-01-02"), TimeZone: "UTC",
	}))
	require.NoError(t, err)
	require.Len(t, rr.Msg.GetCurrencies(), 1)
	require.Equal(t, "25.00", rr.Msg.GetCurrencies()[0].GetEnd().GetAmount(), "10.00 + 15.00 monthly; the annual one ended")
	fx.Recurring, err = protojson.Marshal(rr.Msg)
	require.NoError(t, err)
	runBrowser(t, fx)
}
