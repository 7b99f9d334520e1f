package payment

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store"
)

// decide is settle's rule table; every outcome of a report on the locked
// rows, without a database.
func TestDecideAnswersEveryReportOnTheLockedRows(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC)
	gw, otherGW, orderID := uuid.New(), uuid.New(), uuid.New()
	amount := money.MustParse("12.30")
	payment := func(status Status, gatewayID string, captured bool) store.Payment {
		p := store.Payment{
			ID: uuid.New(), OrderID: &orderID, Method: methodGateway, GatewayInterfaceID: &gw,
			Amount: amount, Currency: "CNY", Status: string(status), GatewayPaymentID: gatewayID,
		}
		if captured {
			p.CapturedAmount = amount
		}
		return p
	}
	rows := func(p store.Payment, orderStatus string) store.SettlementRows {
		return store.SettlementRows{Payment: p, Order: &store.Order{ID: orderID, Status: orderStatus}}
	}
	success := report{Status: gatewaySuccess, GatewayPaymentID: "T1", GatewayTxID: "T1", Amount: &amount, RawAmount: "12.30"}
	other := money.MustParse("0.01")
	over, under, sameAmount := money.MustParse("12.31"), money.MustParse("12.29"), money.MustParse("12.3")
	taken := uuid.New()
	withTaken := func(r store.SettlementRows) store.SettlementRows { r.GatewayIDTakenBy = &taken; return r }
	// An invoice payment: of an invoice of the order in orderStatus, the
	// order named by the payment, or (byInvoice) only by the invoice.
	invoiceRows := func(orderStatus string, byInvoice bool) store.SettlementRows {
		r := rows(payment(StatusPending, "", false), orderStatus)
		r.Invoice = &store.Invoice{ID: uuid.New(), OrderID: &orderID, Status: "issued", Amount: amount, PaidAmount: money.Zero()}
		if byInvoice {
			r.InvoiceOrder, r.Order, r.Payment.OrderID = r.Order, nil, nil
		}
		return r
	}

	for _, c := range []struct {
		name  string
		rows  store.SettlementRows
		iface uuid.UUID
		rep   report
		want  verdict
		kind  string // the anomaly's, for reject and capture
	}{
		{"success pays a pending payment of a pending order", rows(payment(StatusPending, "", false), "pending"), gw, success, verdictPay, ""},
		{"another interface's payment is rejected", rows(payment(StatusPending, "", false), "pending"), otherGW, success, verdictReject, "interface_mismatch"},
		{"another amount is rejected", rows(payment(StatusPending, "", false), "pending"), gw, report{Status: gatewaySuccess, GatewayPaymentID: "T1", Amount: &other, RawAmount: "0.01"}, verdictReject, "amount_mismatch"},
		{"another currency is rejected", rows(payment(StatusPending, "", false), "pending"), gw, report{Status: gatewaySuccess, GatewayPaymentID: "T1", Currency: "USD"}, verdictReject, "currency_mismatch"},
		// An interface that takes both currencies: the report's currency is
		// held against the payment's, not against what the interface takes
		// (20.00 USD does not settle 20.00 CNY on Stripe).
		{"another currency the interface takes is rejected", rows(payment(StatusPending, "", false), "pending"), gw, report{Status: gatewaySuccess, GatewayPaymentID: "T1", Amount: &amount, RawAmount: "12.30", Currency: "USD", Takes: []string{"CNY", "USD"}}, verdictReject, "currency_mismatch"},
		{"the payment's currency from an interface taking several pays", rows(payment(StatusPending, "", false), "pending"), gw, report{Status: gatewaySuccess, GatewayPaymentID: "T1", Amount: &amount, RawAmount: "12.30", Currency: "cny", Takes: []string{"CNY", "USD"}}, verdictPay, ""},
		{"no currency from an interface that does not take the payment's is rejected", rows(payment(StatusPending, "", false), "pending"), gw, report{Status: gatewaySuccess, GatewayPaymentID: "T1", Amount: &amount, RawAmount: "12.30", Takes: []string{"USD"}}, verdictReject, "currency_mismatch"},
		{"an overpayment by one cent is rejected", rows(payment(StatusPending, "", false), "pending"), gw, report{Status: gatewaySuccess, GatewayPaymentID: "T1", Amount: &over, RawAmount: "12.31"}, verdictReject, "amount_mismatch"},
		{"an underpayment by one cent is rejected", rows(payment(StatusPending, "", false), "pending"), gw, report{Status: gatewaySuccess, GatewayPaymentID: "T1", Amount: &under, RawAmount: "12.29"}, verdictReject, "amount_mismatch"},
		{"the same amount written otherwise pays", rows(payment(StatusPending, "", false), "pending"), gw, report{Status: gatewaySuccess, GatewayPaymentID: "T1", Amount: &sameAmount, RawAmount: "12.3"}, verdictPay, ""},
		{"a gateway order another payment settled is rejected", withTaken(rows(payment(StatusPending, "", false), "pending")), gw, success, verdictReject, "order_number_mismatch"},
		{"failure fails a pending payment", rows(payment(StatusPending, "", false), "pending"), gw, report{Status: gatewayFailed}, verdictFail, ""},
		{"pending changes nothing", rows(payment(StatusPending, "", false), "pending"), gw, report{Status: gatewayPending}, verdictNothing, ""},
		{"success for a cancelled order is captured", rows(payment(StatusPending, "", false), "cancelled"), gw, success, verdictCapture, "paid_after_close"},
		{"a capture may not take another payment's gateway order", withTaken(rows(payment(StatusPending, "", false), "cancelled")), gw, success, verdictReject, "order_number_mismatch"},
		{"success pays an invoice of an active order", invoiceRows("active", false), gw, success, verdictPay, ""},
		{"success for an invoice of a refunded order is captured", invoiceRows("refunded", false), gw, success, verdictCapture, "paid_after_close"},
		{"success for an invoice of a terminated order is captured", invoiceRows("terminated", false), gw, success, verdictCapture, "paid_after_close"},
		{"success for an invoice of a completed order is captured", invoiceRows("completed", false), gw, success, verdictCapture, "paid_after_close"},
		{"success for an invoice of an ended order the payment does not name is captured", invoiceRows("refunded", true), gw, success, verdictCapture, "paid_after_close"},
		{"the same success again is a duplicate", rows(payment(StatusSuccess, "T1", false), "paid"), gw, success, verdictDuplicate, ""},
		{"a success with another gateway order is rejected", rows(payment(StatusSuccess, "T0", false), "paid"), gw, success, verdictReject, "order_number_mismatch"},
		{"a failure after success is rejected", rows(payment(StatusRefunded, "T1", false), "refunded"), gw, report{Status: gatewayFailed}, verdictReject, "failed_after_success"},
		{"a late success for a failed payment is captured", rows(payment(StatusFailed, "", false), "cancelled"), gw, success, verdictCapture, "late_success"},
		{"the capture reported again is a duplicate", rows(payment(StatusFailed, "T1", true), "cancelled"), gw, success, verdictDuplicate, ""},
		{"a second capture with another gateway order is rejected", rows(payment(StatusFailed, "T0", true), "cancelled"), gw, success, verdictReject, "order_number_mismatch"},
		{"a failure for a failed payment is a duplicate", rows(payment(StatusFailed, "", false), "cancelled"), gw, report{Status: gatewayFailed}, verdictDuplicate, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d, err := decide(c.rows, c.iface, c.rep, now)
			require.NoError(t, err)
			require.Equal(t, c.want, d.verdict)
			require.Equal(t, c.kind, d.kind)
			if c.want == verdictPay || c.want == verdictCapture {
				require.True(t, now.Equal(d.paidAt), "a report without a time is paid now")
			}
		})
	}

	t.Run("an unknown status is a bug", func(t *testing.T) {
		t.Parallel()
		_, err := decide(rows(payment("lost", "", false), "pending"), gw, success, now)
		require.True(t, apperr.Is(err, apperr.Internal), "%v", err)
	})
}

// A report about a settled payment is its repeat when it names the same
// gateway order, and the same transaction when both sides know one: a
// report without a transaction id is the repeat, one naming another
// transaction of the same order is not (the mutation run's sixth part:
// with the report's empty test negated, sameGatewayIDs took the first for
// a mismatch and the second for the repeat).
func TestARepeatNamesTheSameTransactionWhenBothKnowOne(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	gw, orderID := uuid.New(), uuid.New()
	amount := money.MustParse("12.30")
	for _, c := range []struct {
		name         string
		paidTx, repX string
		want         verdict
	}{
		{"the same order and transaction", "X1", "X1", verdictDuplicate},
		{"the same order, no transaction reported", "X1", "", verdictDuplicate},
		{"the same order, no transaction recorded", "", "X2", verdictDuplicate},
		{"the same order, another transaction", "X1", "X2", verdictReject},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, st := range []Status{StatusSuccess, StatusFailed} {
				p := store.Payment{
					ID: uuid.New(), OrderID: &orderID, Method: methodGateway, GatewayInterfaceID: &gw,
					Amount: amount, Currency: "CNY", Status: string(st), GatewayPaymentID: "T1", GatewayTxID: c.paidTx,
				}
				if st == StatusFailed {
					p.CapturedAmount = amount // a late success captured
				}
				rows := store.SettlementRows{Payment: p, Order: &store.Order{ID: orderID, Status: "paid"}}
				rep := report{Status: gatewaySuccess, GatewayPaymentID: "T1", GatewayTxID: c.repX, Amount: &amount, RawAmount: "12.30"}
				d, err := decide(rows, gw, rep, now)
				require.NoError(t, err)
				require.Equal(t, c.want, d.verdict, "a %s payment", st)
				if c.want == verdictReject {
					require.Equal(t, "order_number_mismatch", d.kind)
				}
			}
		})
	}
}
