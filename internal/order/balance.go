package order

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/balance"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store"
)

// BalancePayment is the outcome of PayWithBalance.
type BalancePayment struct {
	// Order is the order after the payment (provisioning).
	Order store.Order
	// Payment is the balance payment; nil for an order of amount 0.00, which
	// is paid without a payment record (payments.amount must be > 0).
	Payment *store.Payment
	// Ledger is the balance transaction; nil when Payment is nil.
	Ledger *store.BalanceTransaction
	// Balance is the customer's balance afterwards.
	Balance money.Amount
}

// PayWithBalance pays a pending order from its customer's prepaid balance.
// The customer pays their own orders, an admin anyone's.
//
// Everything happens in one transaction, with the customer row and then the
// order row locked (in one round trip; the whole payment takes three):
//
//  1. the order must be pending and in the balance's currency;
//  2. the balance goes down by the order's total, never below
//     −credit_limit ("insufficient balance" otherwise, and nothing changes);
//  3. a ledger row (type payment, negative amount, balance before and
//     after), a successful payment record (method balance), and the order
//     moves pending → provisioning with paid_at;
//  4. the order's pending gateway payments fail (the order is paid);
//  5. an order_paid event is queued, and audit_log rows record the balance
//     change, the payment and the order.
//
// Concurrent calls for one customer are serialised on the customer row, so
// they are decided one after the other on the current balance and can
// never overspend; concurrent calls for one order see it pending only once.
//
// An order of amount 0.00 has no payment record (payments.amount > 0): it
// moves to provisioning with the balance untouched, and order_paid carries
// payment_id null and amount "0.00".
func (s *Service) PayWithBalance(ctx context.Context, orderID uuid.UUID) (BalancePayment, error) {
	p, err := auth.Require(ctx)
	if err != nil {
		return BalancePayment{}, err
	}
	var out BalancePayment
	var voided []store.Payment
	// A pipelined transaction (docs/performance.md, "PayWithBalance no
	// dearer than a callback"): BEGIN goes with the locks, the payment and
	// the ledger row with the order's move, and the audit rows and the
	// event with COMMIT — three round trips, the decision still made in Go
	// on the locked rows between the first and the second.
	err = store.WithPipelinedTx(ctx, s.db, func(tx pgx.Tx) error {
		// The customer, found through the order (an order's customer never
		// changes), then the order: the lock order every balance change of
		// the customer uses.
		acct, o, err := lockOwnedForBalance(ctx, tx, p, orderID)
		if err != nil {
			return err
		}
		if err := payable(o); err != nil {
			return err
		}
		if o.Currency != acct.Currency {
			return apperr.New(apperr.InvalidArgument, "order %s is in %s but the balance is in %s", orderID, o.Currency, acct.Currency)
		}

		now := s.now()
		out.Balance = acct.Balance
		var paymentID *uuid.UUID
		var pay *store.Later[store.Payment]
		var posting *balance.Posting
		if !o.TotalAmount.IsZero() {
			id := uuid.New()
			paymentID = &id
			// The credit limit is checked here, before anything is sent:
			// a refusal writes nothing.
			pay = store.InsertBalancePaymentLater(ctx, tx, store.NewBalancePayment{
				ID: id, OrderID: o.ID, CustomerID: o.CustomerID, Amount: o.TotalAmount, Currency: o.Currency, PaidAt: now,
			})
			if posting, err = balance.PostLocked(ctx, tx, acct, balance.Entry{
				CustomerID: o.CustomerID, Kind: balance.Payment, Amount: o.TotalAmount.Neg(), Currency: o.Currency,
				PaymentID: paymentID, Description: "order " + o.ID.String(), By: audit.Of(p), At: now,
			}); err != nil {
				return err // insufficient balance: the queued payment goes with the transaction
			}
		}

		// The payment and the ledger row go with the order's move.
		moved, err := Transition(ctx, tx, o, Move{
			To: StatusProvisioning, By: audit.Of(p), At: now, FailReason: failedByBalancePay,
			Paid: &OrderPaidPayload{OrderID: o.ID, PaymentID: paymentID, Amount: o.TotalAmount, Currency: o.Currency, Method: MethodBalance},
		})
		if err != nil {
			return err
		}
		if posting != nil {
			payment, err := pay.Get(ctx)
			if err != nil {
				return err
			}
			posted, err := posting.Done(ctx)
			if err != nil {
				return err
			}
			if err := audit.Write(ctx, tx, audit.Of(p), now, audit.ActionPaymentCreate, entityPayment, payment.ID.String(), nil, PaymentSnapshot(payment)); err != nil {
				return err
			}
			out.Payment, out.Ledger, out.Balance = &payment, &posted.Ledger, posted.Account.Balance
		}
		voided = moved.FailedPayments
		out.Order = moved.Order
		return nil
	})
	if err != nil {
		return BalancePayment{}, err
	}
	attrs := []any{"order_id", orderID, "amount", out.Order.TotalAmount.String(), "currency", out.Order.Currency,
		"balance_after", out.Balance.String(), "voided_payments", len(voided), "principal", p.String()}
	if out.Payment != nil {
		attrs = append(attrs, "payment_id", out.Payment.ID)
	}
	s.log.InfoContext(ctx, "order paid with balance", attrs...)
	return out, nil
}

// payable refuses an order that is not pending, naming why.
func payable(o store.Order) error {
	st := Status(o.Status)
	switch {
	case st == StatusPending && CanTransition(st, StatusProvisioning):
		return nil
	case st == StatusCancelled:
		return apperr.New(apperr.InvalidArgument, "order %s is cancelled", o.ID)
	case o.PaidAt != nil || st == StatusPaid || st == StatusProvisioning || st == StatusActive:
		return apperr.New(apperr.InvalidArgument, "order %s is already paid", o.ID)
	default:
		return apperr.New(apperr.InvalidArgument, "order %s is %s; only a pending order can be paid", o.ID, o.Status)
	}
}

// failedByInvoiceBalancePay is the failure reason of an invoice's pending
// gateway payments when its balance payment completes it.
const failedByInvoiceBalancePay = "invoice paid from the balance"

// PayInvoiceFromBalance pays inv in full from its customer's balance when
// the balance covers it — down to −credit_limit: balance.Covers, the rule
// PayWithBalance follows through balance.Post — and reports whether it
// did; a balance that does not cover it is left alone (false, nil). The
// same rows as PayWithBalance: a ledger row through balance.Post, a
// successful balance payment of the invoice, the invoice paid through
// InvoiceTransition (which renews a renewal invoice's service) and their
// audit rows.
//
// The caller holds, in tx, the customer's lock (acct, as
// store.LockBalanceAccount read it), then the invoice's order's, then the
// invoice's (inv, issued or overdue).
func PayInvoiceFromBalance(ctx context.Context, tx pgx.Tx, acct store.BalanceAccount, inv store.Invoice, by audit.Actor, at time.Time) (bool, error) {
	_, paid, err := payInvoiceFromBalance(ctx, tx, acct, inv, InvoiceMove{By: by, At: at})
	return paid, err
}

// payInvoiceFromBalance is PayInvoiceFromBalance with the invoice move
// given (its By, At and what the caller holds), answering what the move
// did.
func payInvoiceFromBalance(ctx context.Context, tx pgx.Tx, acct store.BalanceAccount, inv store.Invoice, m InvoiceMove) (InvoiceMoved, bool, error) {
	by, at := m.By, m.At
	due, err := inv.Amount.Sub(inv.PaidAmount)
	if err != nil || due.Sign() <= 0 || acct.Currency != inv.Currency || acct.DisabledAt != nil {
		return InvoiceMoved{}, false, err
	}
	// The credit-limit rule: balance.Covers is its one Go home. The billing
	// run's scan that found this invoice (ListUnpaidPeriodsCoveredByBalance
	// in sql/queries/service_periods.sql) states it set-wise in SQL;
	// credit_test.go holds the two, and the schema's CHECK, to the same
	// boundaries.
	if !balance.Covers(acct, due) {
		return InvoiceMoved{}, false, nil
	}
	// The payment carries the invoice's order, as a gateway payment of the
	// invoice does (payment.CreatePayment): a refund of it then treats the
	// order alike (a full refund refunds the order; RefundOrder finds it).
	np := store.NewBalancePayment{InvoiceID: &inv.ID, CustomerID: inv.CustomerID, Amount: due, Currency: inv.Currency, PaidAt: at}
	if inv.OrderID != nil {
		np.OrderID = *inv.OrderID
	}
	pay, err := store.InsertBalancePayment(ctx, tx, np)
	if err != nil {
		return InvoiceMoved{}, false, err
	}
	// The customer is locked as acct (the caller's lock), so the ledger
	// row is written from it, not after locking the customer again; the
	// write itself refuses a balance that is no longer acct's.
	posting, err := balance.PostLocked(ctx, tx, acct, balance.Entry{
		CustomerID: inv.CustomerID, Kind: balance.Payment, Amount: due.Neg(), Currency: inv.Currency,
		PaymentID: &pay.ID, Description: "invoice " + inv.ID.String(), By: by, At: at,
	})
	if err != nil {
		return InvoiceMoved{}, false, err
	}
	if _, err := posting.Done(ctx); err != nil {
		return InvoiceMoved{}, false, err
	}
	if err := audit.Write(ctx, tx, by, at, audit.ActionPaymentCreate, entityPayment, pay.ID.String(), nil, PaymentSnapshot(pay)); err != nil {
		return InvoiceMoved{}, false, err
	}
	m.Pay, m.FailReason = due, failedByInvoiceBalancePay
	moved, err := InvoiceTransition(ctx, tx, inv, m)
	if err != nil {
		return InvoiceMoved{}, false, err
	}
	return moved, true, nil
}

// lockOwnedForBalance locks the customer of order id, then the order (the
// lock order of every balance change, store.LockForBalancePayment), for
// p: the order's customer or an admin. Another customer's order, or none,
// is NotFound.
func lockOwnedForBalance(ctx context.Context, tx pgx.Tx, p auth.Principal, id uuid.UUID) (store.BalanceAccount, store.Order, error) {
	acct, o, err := store.LockForBalancePayment(ctx, tx, id)
	hidden := apperr.New(apperr.NotFound, "order %s not found", id)
	if err := auth.Owned(p, o.CustomerID, err, hidden, hidden); err != nil {
		return store.BalanceAccount{}, store.Order{}, err
	}
	return acct, o, nil
}
