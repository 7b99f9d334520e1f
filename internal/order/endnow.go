package order

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/text"
)

// EndCredit is what becomes of the unused share of the paid period when a
// service ends now (EndService's credit, [billing].end_now_credit).
type EndCredit string

// The credit modes: the share is kept, credited to the customer's balance,
// or refunded to the period's payment (admin only).
const (
	CreditNone    EndCredit = "none"
	CreditBalance EndCredit = "balance"
	CreditGateway EndCredit = "gateway"
)

// DefaultEndNowCredit is [billing].end_now_credit's default: a customer
// who ends a service now gets the unused share on their balance.
const DefaultEndNowCredit = CreditBalance

// ParseEndCredit reads a credit mode; anything else is InvalidArgument.
func ParseEndCredit(s string) (EndCredit, error) {
	switch c := EndCredit(s); c {
	case CreditNone, CreditBalance, CreditGateway:
		return c, nil
	}
	return "", apperr.New(apperr.InvalidArgument, "credit must be none, balance or gateway, got %q", text.Clip(s, 20))
}

// more reports whether c gives the customer more than d (none < balance <
// gateway).
func (c EndCredit) more(d EndCredit) bool {
	rank := map[EndCredit]int{CreditNone: 0, CreditBalance: 1, CreditGateway: 2}
	return rank[c] > rank[d]
}

// ShareRefund is part of the unused share to refund from one payment of
// the period it paid, back the payment's own way (EndService's gateway
// credit): the caller makes the refund, outside the ending's transaction,
// through internal/payment's refund path.
type ShareRefund struct {
	PaymentID uuid.UUID
	Amount    money.Amount
}

// Ended is what EndService did: the order, ended; the unused share of its
// paid periods at the moment it ended; what of it the customer gets
// (Credited: on the balance, or to refund through Refunds); the mode.
type Ended struct {
	Order    store.Order
	Credit   EndCredit
	Unused   money.Amount
	Credited money.Amount
	Refunds  []ShareRefund
}

// BalanceRefunder refunds part of a payment to the customer's balance
// inside the caller's transaction, through internal/payment's refund path
// (payment.Service.RefundToBalanceInTx): a succeeded refund row with
// destination balance, a refund ledger row, the payment's refunded amount
// grown, the order left to the caller. acct is the customer, locked in tx
// before the order; the answer is the refund and the customer afterwards.
type BalanceRefunder interface {
	RefundToBalanceInTx(ctx context.Context, tx pgx.Tx, acct store.BalanceAccount, who audit.Actor, requestedBy *uuid.UUID,
		paymentID uuid.UUID, amount money.Amount, reason, description string) (uuid.UUID, store.BalanceAccount, error)
}

// WithBalanceRefunder returns s recording EndService's balance credit
// through r.
func (s *Service) WithBalanceRefunder(r BalanceRefunder) *Service {
	s.balanceRefunder = r
	return s
}

// WithEndNowCredit returns s with [billing].end_now_credit: the most a
// customer who ends a service now may get (none or balance).
func (s *Service) WithEndNowCredit(c EndCredit) *Service {
	s.endNowCredit = c
	return s
}

// EndService ends a live recurring order's service now (the customer their
// own order, an admin any; docs/operations.md, "Ending a service"): the
// order is terminated (Transition: its periods end, its open renewal
// invoice is cancelled, service_terminated ends the instance at the
// provider), its paid end moves to now on the billing clock, and the
// unused share of its paid periods (UnusedShare) is kept (none), refunded
// from each period's payments to the customer's balance in the same
// transaction (balance: refund rows with destination balance, through
// BalanceRefunder, so the payments' refundable amount shrinks by the
// credit), or returned for the caller to refund to each period's payments
// their own way (gateway, admin only).
//
// A customer asking for gateway is PermissionDenied; asking for more than
// [billing].end_now_credit (balance when it says none) is
// FailedPrecondition. An order that is not active or suspended, or one
// that does not recur, is FailedPrecondition. Refused, nothing changes.
func (s *Service) EndService(ctx context.Context, id uuid.UUID, credit string) (Ended, error) {
	return s.endService(ctx, id, credit, false)
}

// QuoteEndService is EndService's quote (EndServiceRequest.dry_run): the
// same checks and refusals, the unused share and what credit would give
// (Credited, and for gateway the refunds it would make) if the service
// ended now, with nothing changed: no end, no credit, no refund, no audit
// row. Order is the order as it is.
func (s *Service) QuoteEndService(ctx context.Context, id uuid.UUID, credit string) (Ended, error) {
	return s.endService(ctx, id, credit, true)
}

// endService is EndService, or its quote when dry.
func (s *Service) endService(ctx context.Context, id uuid.UUID, credit string, dry bool) (Ended, error) {
	p, err := auth.Require(ctx)
	if err != nil {
		return Ended{}, err
	}
	mode, err := ParseEndCredit(credit)
	if err != nil {
		return Ended{}, err
	}
	if !p.IsAdmin() {
		if mode == CreditGateway {
			return Ended{}, apperr.New(apperr.PermissionDenied, "only an admin may refund the unused share to the payment; ask for balance or none")
		}
		if mode.more(s.endCredit()) {
			return Ended{}, apperr.New(apperr.FailedPrecondition, "this service credits %s when a service ends now ([billing].end_now_credit); ask for that or less", s.endCredit())
		}
	}
	if mode == CreditBalance && s.balanceRefunder == nil {
		return Ended{}, apperr.New(apperr.FailedPrecondition, "balance credits are not available here")
	}
	var out Ended
	err = store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		// The customer first, then the order: the lock order of every
		// balance change (the balance credit is refunds to the balance).
		acct, o, err := lockOwnedForBalance(ctx, tx, p, id)
		if err != nil {
			return err
		}
		if !BillingCycle(o.BillingCycle).Recurring() {
			return apperr.New(apperr.FailedPrecondition, "order %s is one_time: it has no paid period to end", id)
		}
		if !Status(o.Status).Live() {
			return apperr.New(apperr.FailedPrecondition, "order %s is %s: only an active or suspended service can end now", id, o.Status)
		}
		at, now := s.now(), s.billingNow()
		shares, err := unusedShares(ctx, tx, o, now)
		if err != nil {
			return err
		}
		out = Ended{Credit: mode, Unused: money.Zero(), Credited: money.Zero()}
		for _, sh := range shares {
			if out.Unused, err = out.Unused.Add(sh.share); err != nil {
				return err
			}
		}
		by := audit.Of(p)
		if dry {
			out.Order = o
			if mode == CreditNone {
				return nil
			}
			if out.Refunds, err = splitShares(ctx, tx, shares); err != nil {
				return err
			}
			if out.Credited, err = refundsTotal(out.Refunds); err != nil {
				return err
			}
			if mode == CreditBalance {
				out.Refunds = nil // credited in the ending's transaction, not refunded after
			}
			return nil
		}
		switch mode {
		case CreditBalance:
			if out.Credited, err = s.creditShares(ctx, tx, acct, p, shares,
				fmt.Sprintf("order %s ended now: unused share", o.ID),
				fmt.Sprintf("order %s ended now: unused share of its paid period", o.ID)); err != nil {
				return err
			}
		case CreditGateway:
			if out.Refunds, err = splitShares(ctx, tx, shares); err != nil {
				return err
			}
			if out.Credited, err = refundsTotal(out.Refunds); err != nil {
				return err
			}
		}
		moved, err := EndNowInTx(ctx, tx, o, EndNowMove{
			By: by, At: at, Now: now, Reason: EndReasonEndedNow,
			Credit: &EndCreditNote{Mode: string(mode), Unused: out.Unused, Credited: out.Credited, Currency: o.Currency},
		})
		out.Order = moved.Order
		return err
	})
	if err != nil {
		return Ended{}, err
	}
	if dry {
		return out, nil
	}
	s.log.InfoContext(ctx, "service ended now", "order_id", id, "credit", mode, "unused", out.Unused.String(),
		"credited", out.Credited.String(), "principal", p.String())
	return out, nil
}

// creditShares refunds shares (split over the payments that paid them,
// splitShares) to the balance of acct (the customer, locked) in tx, as p,
// through the balance refund path: each payment's refundable amount shrinks
// by its part, so the same money never goes back twice. reason is the
// refunds' reason; each ledger row says what, naming its payment. It
// answers what it credited.
func (s *Service) creditShares(ctx context.Context, tx pgx.Tx, acct store.BalanceAccount, p auth.Principal,
	shares []periodShare, reason, what string) (money.Amount, error) {
	refunds, err := splitShares(ctx, tx, shares)
	if err != nil {
		return money.Amount{}, err
	}
	var admin *uuid.UUID
	if p.IsAdmin() {
		admin = &p.ID
	}
	for _, r := range refunds {
		if _, acct, err = s.balanceRefunder.RefundToBalanceInTx(ctx, tx, acct, audit.Of(p), admin, r.PaymentID, r.Amount,
			reason, fmt.Sprintf("%s, refund of payment %s", what, r.PaymentID)); err != nil {
			return money.Amount{}, err
		}
	}
	return refundsTotal(refunds)
}

// refundsTotal is what refunds add up to.
func refundsTotal(refunds []ShareRefund) (money.Amount, error) {
	total := money.Zero()
	for _, r := range refunds {
		var err error
		if total, err = total.Add(r.Amount); err != nil {
			return money.Amount{}, err
		}
	}
	return total, nil
}

// splitShares splits each period's unused share over the payments that
// paid it, oldest first, each at most what is neither refunded nor being
// refunded of it (a pending refund reserves its amount): the refunds that
// credit the share.
func splitShares(ctx context.Context, tx pgx.Tx, shares []periodShare) ([]ShareRefund, error) {
	var out []ShareRefund
	for _, sh := range shares {
		left := sh.share
		for _, pay := range sh.payments {
			if left.Sign() <= 0 {
				break
			}
			reserved, err := store.Q(tx).ReservedRefundAmount(ctx, pay.ID)
			if err != nil {
				return nil, err
			}
			room, err := pay.Amount.Sub(reserved)
			if err != nil {
				return nil, err
			}
			if room.Sign() <= 0 {
				continue
			}
			amt := left
			if amt.Cmp(room) > 0 {
				amt = room
			}
			out = append(out, ShareRefund{PaymentID: pay.ID, Amount: amt})
			if left, err = left.Sub(amt); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// endCredit is [billing].end_now_credit (its default when unset).
func (s *Service) endCredit() EndCredit {
	if s.endNowCredit == "" {
		return DefaultEndNowCredit
	}
	return s.endNowCredit
}

// EndCreditNote is what an ending now did with the unused share: the
// order's audit row (end_credit) and the service_terminated notice carry
// it.
type EndCreditNote struct {
	Mode     string       `json:"mode"`
	Unused   money.Amount `json:"unused"`
	Credited money.Amount `json:"credited"`
	Currency string       `json:"currency"`
}

// periodShare is the unused share of one paid period and the payments
// that paid it (successful ones, oldest first).
type periodShare struct {
	period   store.ServicePeriod
	share    money.Amount
	payments []store.Payment
}

// unusedShares is the unused share at now (billing clock) of every paid
// period of order o that has not ended: the current one's rest, a period
// paid ahead whole. A period's price is what was paid for it (the order's
// amount for the first, its invoice's for a renewal; a free period's is
// nothing), and its share never exceeds what of its payments is not
// refunded already.
func unusedShares(ctx context.Context, tx pgx.Tx, o store.Order, now time.Time) ([]periodShare, error) {
	ps, err := store.Q(tx).ListServicePeriods(ctx, o.ID)
	if err != nil {
		return nil, err
	}
	success := "success"
	var out []periodShare
	for _, p := range ps {
		if p.Status != store.PeriodPaid || !runs(p) {
			continue // unpaid, or closed by an end
		}
		price := money.Zero()
		f := store.PaymentFilter{OrderID: &o.ID, Status: &success}
		switch {
		case p.Seq == 1:
			price = o.TotalAmount
		case p.InvoiceID != nil:
			inv, err := store.Q(tx).GetInvoice(ctx, *p.InvoiceID)
			if err != nil {
				return nil, store.BugIfNotFound(err, "read the invoice of a paid period")
			}
			price = inv.Amount
			f.InvoiceID = p.InvoiceID
		default:
			continue // a free period: nothing was paid for it
		}
		// Plan changes applied now in the period moved its price for the
		// rest of it (the proration paid, or the downgrade credited).
		seq := p.Seq
		changes, err := store.Q(tx).AppliedPlanChangesInPeriod(ctx, store.AppliedPlanChangesInPeriodParams{OrderID: o.ID, PeriodSeq: &seq})
		if err != nil {
			return nil, err
		}
		if price, err = priceAfterPlanChanges(changes, price); err != nil {
			return nil, err
		}
		share, err := UnusedShare(price, p.StartsAt, p.EndsAt, now)
		if err != nil {
			return nil, err
		}
		pays, _, err := store.ListPayments(ctx, tx, f, 1000, 0)
		if err != nil {
			return nil, err
		}
		kept := pays[:0]
		for _, pay := range pays {
			if p.Seq == 1 && pay.InvoiceID != nil {
				continue // a renewal's payment, not the order's own
			}
			kept = append(kept, pay)
		}
		// An upgrade's proration paid for the rest of the period at the
		// new price: its payments hold the share beside the period's own.
		if kept, err = withProrationPayments(ctx, tx, o.ID, changes, kept); err != nil {
			return nil, err
		}
		paid := money.Zero()
		for _, pay := range kept {
			net, err := pay.Amount.Sub(pay.RefundedAmount)
			if err != nil {
				return nil, err
			}
			if paid, err = paid.Add(net); err != nil {
				return nil, err
			}
		}
		if share.Cmp(paid) > 0 {
			share = paid
		}
		if share.Sign() < 0 {
			share = money.Zero()
		}
		out = append(out, periodShare{period: p, share: share, payments: kept})
	}
	return out, nil
}

// withProrationPayments adds to pays the successful payments of order
// id's proration invoices of chs, the upgrades applied now in a period,
// after the period's own (a share is credited from the oldest first).
func withProrationPayments(ctx context.Context, tx pgx.Tx, id uuid.UUID, chs []store.PlanChange, pays []store.Payment) ([]store.Payment, error) {
	success := "success"
	for _, ch := range chs {
		if ch.InvoiceID == nil {
			continue // a downgrade, or the same price: nothing paid
		}
		more, _, err := store.ListPayments(ctx, tx, store.PaymentFilter{OrderID: &id, InvoiceID: ch.InvoiceID, Status: &success}, 1000, 0)
		if err != nil {
			return nil, err
		}
		pays = append(pays, more...)
	}
	return pays, nil
}
