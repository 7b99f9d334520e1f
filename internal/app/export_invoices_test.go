package app_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	orderpb "github.com/rustbill/paymentd/gen/billing/order"
)

// The invoices export: one row per invoice, or with lines=1 one row per
// line with the invoice's columns repeated, each line's amounts as the API
// gives them; for admins only.
func TestTheInvoicesExportCanListTheirLines(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	ctx := context.Background()
	due := time.Now().Add(48 * time.Hour).UTC().Format(time.RFC3339)
	created, err := e.orders.CreateInvoice(ctx, with(&orderpb.CreateInvoiceRequest{
		Target: &orderpb.CreateInvoiceRequest_CustomerId{CustomerId: e.c.customerID.String()},
		Amount: "30.00", Description: "Support hours, March", DueAt: due,
	}, e.c.admin))
	require.NoError(t, err)
	manual := created.Msg.GetInvoice()
	// An invoice of two lines, one a credit, as a plan change will write.
	var upgrade string
	require.NoError(t, e.r.app.Pool().QueryRow(ctx, `WITH i AS (INSERT INTO invoices (customer_id, number, status, amount, currency, description, issued_at, due_at)
		VALUES ($1, 'INV-TEST-2', 'issued', 7.50, 'CNY', 'upgrade', now(), now() + interval '1 day') RETURNING id),
		l AS (INSERT INTO invoice_lines (invoice_id, position, description, period_start, period_end, quantity, unit_amount, amount)
			SELECT id, 1, 'VPS 4 GB, rest of the period', '2026-12-10T00:00:00Z'::timestamptz, '2027-01-01T00:00:00Z'::timestamptz, 1, 17.50, 17.50 FROM i
			UNION ALL SELECT id, 2, 'VPS 2 GB, unused', NULL, NULL, 2, -5.00, -10.00 FROM i)
		SELECT id::text FROM i`, e.c.customerID).Scan(&upgrade))

	w := &exportBundle{e: e}
	readKey := newAdminKey(t, e.r.baseURL, e.c.admin, "read").cred
	today := time.Now().UTC()
	params := url.Values{"from": {today.AddDate(0, 0, -1).Format(time.DateOnly)}, "to": {today.Format(time.DateOnly)}, "tz": {"UTC"}}

	status, _, body := w.get(t, "/export/invoices.csv", params, readKey)
	require.Equal(t, http.StatusOK, status, body)
	header, rows := records(t, body)
	require.Equal(t, []string{"id", "number", "created_at", "updated_at", "issued_at", "due_at", "paid_at", "status",
		"amount", "paid_amount", "currency", "customer_id", "order_id", "description"}, header)
	require.Len(t, rows, 2, body)
	require.Equal(t, []string{manual.GetId(), manual.GetNumber(), "30.00", "Support hours, March"},
		[]string{rows[0]["id"], rows[0]["number"], rows[0]["amount"], rows[0]["description"]})
	require.Equal(t, []string{upgrade, "7.50"}, []string{rows[1]["id"], rows[1]["amount"]})

	params.Set("lines", "1")
	status, _, body = w.get(t, "/export/invoices.csv", params, readKey)
	require.Equal(t, http.StatusOK, status, body)
	header, rows = records(t, body)
	require.Equal(t, []string{"line", "line_description", "line_period_start", "line_period_end", "line_quantity",
		"line_unit_amount", "line_amount"}, header[14:])
	require.Len(t, rows, 3, "one row per line: %s", body)
	line := func(r map[string]string) []string {
		return []string{r["id"], r["amount"], r["line"], r["line_description"], r["line_period_start"], r["line_period_end"],
			r["line_quantity"], r["line_unit_amount"], r["line_amount"]}
	}
	require.Equal(t, []string{manual.GetId(), "30.00", "1", "Support hours, March", "", "", "1", "30.00", "30.00"}, line(rows[0]))
	require.Equal(t, []string{upgrade, "7.50", "1", "VPS 4 GB, rest of the period", "2026-12-10T00:00:00Z", "2027-01-01T00:00:00Z", "1", "17.50", "17.50"}, line(rows[1]))
	require.Equal(t, []string{upgrade, "7.50", "2", "VPS 2 GB, unused", "", "", "2", "-5.00", "-10.00"}, line(rows[2]))

	status, _, _ = w.get(t, "/export/invoices.csv", params, e.c.customer)
	require.Equal(t, http.StatusForbidden, status, "a customer may not export")
	params.Set("status", "unknown")
	status, _, body = w.get(t, "/export/invoices.csv", params, readKey)
	require.Equal(t, http.StatusBadRequest, status, body)
}
