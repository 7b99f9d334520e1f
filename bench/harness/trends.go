package harness

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5/pgxpool"

	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
)

// trendsDays are the ranges GetPaymentTrends is timed over (the console's
// widest and narrowest), and trendsCalls how many calls each (the median
// is reported).
var trendsDays = []int{90, 7}

const trendsCalls = 3

// TrendsTiming is GetPaymentTrends timed on the bench's database after the
// workloads: the dashboard's query as an admin runs it, over the wire
// (login once, then calls on the session), on every payment the run left.
type TrendsTiming struct {
	Days int `json:"days"`
	// Payments is how many rows the payments table held.
	Payments int64 `json:"payments"`
	// Created is how many payments the answer counted in the range (all
	// currencies): the call read the table, not an empty range.
	Created  uint64    `json:"created_in_range"`
	MedianMs float64   `json:"median_ms"`
	CallsMs  []float64 `json:"calls_ms"`
}

// TimeTrends logs in as the admin at baseURL and times GetPaymentTrends
// over the last days of each of trendsDays (UTC), trendsCalls calls each.
// db counts the payments the calls ran over.
func TimeTrends(ctx context.Context, db *pgxpool.Pool, baseURL, adminUser, adminPass string) ([]TrendsTiming, error) {
	jar, err := cookiejar.New(nil)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Jar: jar, Timeout: time.Minute}
	defer hc.CloseIdleConnections()
	if _, err := identitypbconnect.NewIdentityServiceClient(hc, baseURL).AdminLogin(ctx,
		connect.NewRequest(&identitypb.AdminLoginRequest{Username: adminUser, Password: adminPass})); err != nil {
		return nil, fmt.Errorf("trends: admin login: %w", err)
	}
	var payments int64
	if err := db.QueryRow(ctx, "SELECT count(*) FROM payments").Scan(&payments); err != nil {
		return nil, fmt.Errorf("trends: count payments: %w", err)
	}
	admin := paymentpbconnect.NewPaymentAdminServiceClient(hc, baseURL)
	today := time.Now().UTC()
	out := make([]TrendsTiming, 0, len(trendsDays))
	for _, days := range trendsDays {
		req := &paymentpb.GetPaymentTrendsRequest{
			From: today.AddDate(0, 0, 1-days).Format(time.DateOnly), To: today.Format(time.DateOnly), TimeZone: "UTC",
		}
		t := TrendsTiming{Days: days, Payments: payments}
		for range trendsCalls {
			start := time.Now()
			res, err := admin.GetPaymentTrends(ctx, connect.NewRequest(req))
			took := time.Since(start)
			if err != nil {
				return nil, fmt.Errorf("trends: GetPaymentTrends over %d days: %w", days, err)
			}
			if len(res.Msg.GetDays()) != days {
				return nil, fmt.Errorf("trends: GetPaymentTrends over %d days answered %d days", days, len(res.Msg.GetDays()))
			}
			t.CallsMs = append(t.CallsMs, ms(took))
			t.Created = 0
			for _, c := range res.Msg.GetCurrencies() {
				for _, d := range c.GetDays() {
					t.Created += d.GetCreated()
				}
			}
		}
		t.MedianMs = median(t.CallsMs)
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, errors.New("trends: no range to time")
	}
	return out, nil
}

// measureTrends times the trends on the running paymentd (after the last
// round's workloads, before the invariants) and reports them.
func (b *bench) measureTrends(ctx context.Context) error {
	ts, err := TimeTrends(ctx, b.pool, b.svcURL(), "admin", b.adminPass)
	if err != nil {
		return err
	}
	b.rep.Trends = ts
	b.logf("  %s", trendsText(ts))
	return nil
}

// trendsText is the report's line for the trends' timings.
func trendsText(ts []TrendsTiming) string {
	if len(ts) == 0 {
		return ""
	}
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = fmt.Sprintf("%d days %.1f ms (calls %s ms; %d payments in the range)", t.Days, t.MedianMs, joinNums(t.CallsMs, "%.1f"), t.Created)
	}
	return fmt.Sprintf("GetPaymentTrends as an admin over the wire, median of %d calls, on %d payments: %s.",
		len(ts[0].CallsMs), ts[0].Payments, strings.Join(parts, ", "))
}
