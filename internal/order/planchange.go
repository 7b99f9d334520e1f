package order

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/event"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/text"
)

// Plan changes (docs/operations.md, "Plan changes"): ChangeOrderPlan moves
// a live recurring order to another product, now (prorated over the rest
// of the current period) or at the period end (the next renewal bills the
// new product). The record is a plan_changes row; at most one per order is
// pending.

// The plan change events (events.event_type).
const (
	EventPlanChanged      = event.TypePlanChanged
	EventPlanChangeLapsed = event.TypePlanChangeLapsed
)

// Audit actions and entity of plan changes.
const (
	ActionPlanChangeRequest = "plan_change.request"
	ActionPlanChangeApply   = "plan_change.apply"
	ActionPlanChangeCancel  = "plan_change.cancel"
	ActionPlanChangeLapse   = "plan_change.lapse"
	entityPlanChange        = "plan_change"
)

// DefaultPlanChangeDays is [billing].plan_change_days' default: an upgrade's
// proration invoice unpaid this many days after it is issued lapses.
const DefaultPlanChangeDays = 3

// DefaultDowngradeCredit is [billing].downgrade_credit's default: a
// downgrade now credits the unused difference to the balance.
const DefaultDowngradeCredit = CreditBalance

// failedByPlanChangeLapse is the failure reason of a lapsed proration
// invoice's pending payments, and how InvoiceTransition's cancel tells a
// lapse from an admin's cancel.
const failedByPlanChangeLapse = "plan change lapsed"

// WithPlanChanges returns s with [billing].plan_change_days and
// [billing].downgrade_credit (none or balance).
func (s *Service) WithPlanChanges(days int, credit EndCredit) *Service {
	s.planChangeDays, s.downgradeCredit = days, credit
	return s
}

func (s *Service) planDays() int {
	if s.planChangeDays <= 0 {
		return DefaultPlanChangeDays
	}
	return s.planChangeDays
}

func (s *Service) downgradeMode() EndCredit {
	if s.downgradeCredit == "" {
		return DefaultDowngradeCredit
	}
	return s.downgradeCredit
}

// PlanChanged is what ChangeOrderPlan and CancelPlanChange did: the order
// as it is now, the change, and its proration invoice (an upgrade now).
type PlanChanged struct {
	Order   store.Order
	Change  store.PlanChange
	Invoice *store.Invoice
}

// PlanChangedPayload is the JSON body of plan_changed (the order took the
// new product: the provider changes the plan) and plan_change_lapsed (its
// proration invoice went unpaid; nothing changed).
type PlanChangedPayload struct {
	OrderID     uuid.UUID    `json:"order_id"`
	ChangeID    uuid.UUID    `json:"change_id"`
	FromProduct *uuid.UUID   `json:"from_product_id"`
	ToProduct   uuid.UUID    `json:"to_product_id"`
	FromPrice   money.Amount `json:"from_price"`
	ToPrice     money.Amount `json:"to_price"`
	When        string       `json:"when"`
	Amount      money.Amount `json:"amount"`
	Credited    money.Amount `json:"credited"`
	Currency    string       `json:"currency"`
	InvoiceID   *uuid.UUID   `json:"invoice_id,omitempty"`
}

// planChangeState is the audit snapshot of a plan change.
type planChangeState struct {
	ID          uuid.UUID    `json:"id"`
	OrderID     uuid.UUID    `json:"order_id"`
	FromProduct *uuid.UUID   `json:"from_product_id,omitempty"`
	ToProduct   uuid.UUID    `json:"to_product_id"`
	FromPrice   money.Amount `json:"from_price"`
	ToPrice     money.Amount `json:"to_price"`
	FromCycle   string       `json:"from_cycle"`
	ToCycle     string       `json:"to_cycle"`
	When        string       `json:"when"`
	Status      string       `json:"status"`
	Amount      money.Amount `json:"amount"`
	Credited    money.Amount `json:"credited"`
	InvoiceID   *uuid.UUID   `json:"invoice_id,omitempty"`
	EffectiveAt *time.Time   `json:"effective_at,omitempty"`
}

func planChangeSnapshot(c store.PlanChange) planChangeState {
	return planChangeState{
		ID: c.ID, OrderID: c.OrderID, FromProduct: c.FromProduct, ToProduct: c.ToProduct,
		FromPrice: c.FromPrice, ToPrice: c.ToPrice, FromCycle: c.FromCycle, ToCycle: c.ToCycle,
		When: c.Timing, Status: c.Status, Amount: c.Amount, Credited: c.Credited,
		InvoiceID: c.InvoiceID, EffectiveAt: c.EffectiveAt,
	}
}

// ProrationAmount is what a change of price from old to new is worth over
// the rest of the calendar period [start, end) at now: (new − old) × the
// unused share, the share counted in whole seconds, the product rounded
// once, half-even, to the cent (UnusedShare of the difference). Positive
// is billed (an upgrade), negative is owed to the customer (a downgrade).
func ProrationAmount(old, new money.Amount, start, end, now time.Time) (money.Amount, error) {
	diff, err := new.Sub(old)
	if err != nil {
		return money.Amount{}, err
	}
	if diff.Sign() >= 0 {
		return UnusedShare(diff, start, end, now)
	}
	share, err := UnusedShare(diff.Neg(), start, end, now)
	if err != nil {
		return money.Amount{}, err
	}
	return share.Neg(), nil
}

// ChangeOrderPlan moves order id to product productID, when "now" or
// "period_end" (the customer their own order, an admin any;
// docs/operations.md, "Plan changes"):
//
//   - period_end: recorded pending; the billing run's next renewal invoice
//     bills the new product and price (and cycle), and the order takes the
//     product when that period starts (plan_changed).
//   - now, a dearer product: a proration invoice of ProrationAmount, two
//     lines (the unused old plan, negative; the new plan's remainder), due
//     in [billing].plan_change_days, paid from the balance at once when it
//     covers it; the change takes effect when it is paid, or lapses.
//   - now, a cheaper product: the change takes effect at once, and the
//     unused difference is refunded to the balance from the period's
//     payments ([billing].downgrade_credit balance), or kept (none).
//   - now, the same price: at once.
//
// Refused, nothing changes: when is neither (InvalidArgument); the product
// is missing (NotFound), disabled, one-time, in another currency, on
// another provider, the order's own (InvalidArgument), or of another cycle
// with when now (InvalidArgument: a change of cycle is period_end only);
// the order is not active, not recurring, does not renew (period_end), has
// a pending change, or its next period is billed already
// (FailedPrecondition).
func (s *Service) ChangeOrderPlan(ctx context.Context, id, productID uuid.UUID, when string) (PlanChanged, error) {
	return s.changeOrderPlan(ctx, id, productID, when, false)
}

// QuoteOrderPlan is ChangeOrderPlan's quote (ChangeOrderPlanRequest.dry_run):
// the same checks and refusals, and the change as it would be made at the
// billing clock's now, with nothing changed: no change recorded, no
// invoice, no credit, no audit row. The change has no id; its status is
// what it would take (applied for a downgrade now, else pending), its
// Amount the proration (billed when positive), its Credited what a
// downgrade would put on the balance (split over the period's payments as
// the credit is), its ToPrice what the next renewal bills. Order is the
// order as it is.
func (s *Service) QuoteOrderPlan(ctx context.Context, id, productID uuid.UUID, when string) (PlanChanged, error) {
	return s.changeOrderPlan(ctx, id, productID, when, true)
}

// changeOrderPlan is ChangeOrderPlan, or its quote when dry.
func (s *Service) changeOrderPlan(ctx context.Context, id, productID uuid.UUID, when string, dry bool) (PlanChanged, error) {
	p, err := auth.Require(ctx)
	if err != nil {
		return PlanChanged{}, err
	}
	if when != store.PlanChangeNow && when != store.PlanChangePeriodEnd {
		return PlanChanged{}, apperr.New(apperr.InvalidArgument, "when must be now or period_end, got %q", text.Clip(when, 20))
	}
	var out PlanChanged
	err = store.WithPipelinedTx(ctx, s.db, func(tx pgx.Tx) error {
		// The customer first, then the order: the lock order of every
		// balance change (the balance pays the proration, or takes the
		// downgrade's credit).
		acct, o, err := lockOwnedForBalance(ctx, tx, p, id)
		if err != nil {
			return err
		}
		prod, last, err := s.checkPlanChange(ctx, tx, o, productID, when)
		if err != nil {
			return err
		}
		at, now := s.now(), s.billingNow()
		by := audit.Of(p)
		in := store.InsertPlanChangeParams{
			OrderID: o.ID, FromProduct: o.ProductID, ToProduct: prod.ID,
			FromPrice: o.RenewalPrice.Amount, ToPrice: prod.Price, FromCycle: o.BillingCycle, ToCycle: prod.BillingCycle,
			ID: uuid.New(), Currency: o.Currency, Timing: when, Status: store.PlanChangePending,
			Amount: money.Zero(), Credited: money.Zero(), CreatedAt: at,
		}
		if when == store.PlanChangePeriodEnd {
			in.EffectiveAt = &last.EndsAt
			if dry {
				out = PlanChanged{Order: o, Change: quotedChange(in)}
				return nil
			}
			ch, err := s.insertPlanChange(ctx, tx, in, by, at)
			if err != nil {
				return err
			}
			out = PlanChanged{Order: o, Change: ch}
			return nil
		}
		amount, err := ProrationAmount(in.FromPrice, in.ToPrice, last.StartsAt, last.EndsAt, now)
		if err != nil {
			return err
		}
		seq := last.Seq
		in.Amount, in.PeriodSeq, in.PeriodStart, in.PeriodEnd = amount, &seq, &last.StartsAt, &last.EndsAt
		if amount.Sign() <= 0 {
			// A downgrade, or nothing left to bill: at once.
			if dry {
				q := quotedChange(in)
				q.Status, q.EffectiveAt = store.PlanChangeApplied, &now
				if amount.Sign() < 0 && s.downgradeMode() == CreditBalance && s.balanceRefunder != nil {
					if q.Credited, err = quoteDowngrade(ctx, tx, o, last, amount.Neg(), now); err != nil {
						return err
					}
				}
				out = PlanChanged{Order: o, Change: q}
				return nil
			}
			ch, err := s.insertPlanChange(ctx, tx, in, by, at)
			if err != nil {
				return err
			}
			credited := money.Zero()
			if amount.Sign() < 0 && s.downgradeMode() == CreditBalance && s.balanceRefunder != nil {
				if credited, err = s.creditDowngrade(ctx, tx, acct, o, last, amount.Neg(), p, now); err != nil {
					return err
				}
			}
			moved, ch, err := applyPlanChange(ctx, tx, o, ch, credited, by, at, now)
			if err != nil {
				return err
			}
			out = PlanChanged{Order: moved, Change: ch}
			return nil
		}
		// An upgrade: the proration invoice, due (and lapsing) in
		// plan_change_days on the billing clock.
		due := now.Add(time.Duration(s.planDays()) * 24 * time.Hour)
		in.LapseAt = &due
		if dry {
			out = PlanChanged{Order: o, Change: quotedChange(in)}
			return nil
		}
		inv, err := s.issueProration(ctx, tx, o, prod, last, in, now, at, due, by)
		if err != nil {
			return err
		}
		in.InvoiceID = &inv.ID
		// The change as it is asked for, pending: audited now, written
		// once its payment is known.
		ch := requestedChange(in)
		if err := audit.Write(ctx, tx, by, at, ActionPlanChangeRequest, entityPlanChange, ch.ID.String(), nil, planChangeSnapshot(ch)); err != nil {
			return err
		}
		// The balance pays it when it covers it; paid, the change is
		// written applied in InvoiceTransition (planChangeOnPaid), at the
		// billing clock's now (as the billing run's balance payments are),
		// from the order this transaction holds locked, and the payment
		// hands back what it wrote. Unpaid, it is written pending.
		moved, paid, err := payInvoiceFromBalance(ctx, tx, acct, inv, InvoiceMove{By: by, At: now, held: &heldPlanChange{change: in, order: o}})
		if err != nil {
			return err
		}
		if paid {
			if moved.PlanChange == nil || moved.Order == nil {
				return store.Bug(nil, "plan change %s: its proration invoice %s was paid but the change was not applied", ch.ID, inv.ID)
			}
			inv, ch, o = moved.Invoice, *moved.PlanChange, *moved.Order
		} else if ch, err = writePlanChange(ctx, tx, in); err != nil {
			return err
		}
		out = PlanChanged{Order: o, Change: ch, Invoice: &inv}
		return nil
	})
	if err != nil {
		return PlanChanged{}, err
	}
	if dry {
		return out, nil
	}
	s.log.InfoContext(ctx, "plan change", "order_id", id, "product_id", productID, "when", when,
		"status", out.Change.Status, "amount", out.Change.Amount.String(), "principal", p.String())
	return out, nil
}

// checkPlanChange checks a change of order o (locked) to product productID
// and returns the product and the order's current period.
func (s *Service) checkPlanChange(ctx context.Context, tx pgx.Tx, o store.Order, productID uuid.UUID, when string) (store.Product, store.ServicePeriod, error) {
	var none store.Product
	if !BillingCycle(o.BillingCycle).Recurring() || !o.RenewalPrice.Valid {
		return none, store.ServicePeriod{}, apperr.New(apperr.FailedPrecondition, "order %s is one_time: it has no plan to change", o.ID)
	}
	if Status(o.Status) != StatusActive {
		return none, store.ServicePeriod{}, apperr.New(apperr.FailedPrecondition, "order %s is %s: only an active service changes plan", o.ID, o.Status)
	}
	if when == store.PlanChangePeriodEnd && !o.Renews {
		return none, store.ServicePeriod{}, apperr.New(apperr.FailedPrecondition, "order %s does not renew: there is no next period to bill the new plan; turn renewal on first", o.ID)
	}
	prod, err := store.Q(tx).GetProduct(ctx, productID)
	if err != nil {
		return none, store.ServicePeriod{}, store.NotFound(err, "product %s not found", productID)
	}
	switch {
	case o.ProductID != nil && *o.ProductID == prod.ID:
		return none, store.ServicePeriod{}, apperr.New(apperr.InvalidArgument, "order %s is on product %s already", o.ID, prod.ID)
	case !prod.Enabled:
		return none, store.ServicePeriod{}, apperr.New(apperr.InvalidArgument, "product %s is disabled", prod.ID)
	case !BillingCycle(prod.BillingCycle).Recurring():
		return none, store.ServicePeriod{}, apperr.New(apperr.InvalidArgument, "product %s is one_time: an order changes to a product that renews", prod.ID)
	case prod.Currency != o.Currency:
		return none, store.ServicePeriod{}, apperr.New(apperr.InvalidArgument, "product %s renews in %s, order %s in %s: the new product must renew in the same currency", prod.ID, prod.Currency, o.ID, o.Currency)
	case prod.BillingCycle != o.BillingCycle && when == store.PlanChangeNow:
		return none, store.ServicePeriod{}, apperr.New(apperr.InvalidArgument, "product %s renews %s, order %s %s: a change of cycle takes effect at the period end only (when = period_end)", prod.ID, prod.BillingCycle, o.ID, o.BillingCycle)
	}
	if o.ProductID != nil {
		old, err := store.Q(tx).GetProduct(ctx, *o.ProductID)
		if err != nil {
			return none, store.ServicePeriod{}, store.BugIfNotFound(err, "read the order's product")
		}
		if !samePlugin(old.ProviderPlugin, prod.ProviderPlugin) {
			return none, store.ServicePeriod{}, apperr.New(apperr.InvalidArgument, "product %s is provided by another provider than order %s's: a plan change stays with the provider", prod.ID, o.ID)
		}
	}
	if _, err := store.Q(tx).PendingPlanChange(ctx, o.ID); err == nil {
		return none, store.ServicePeriod{}, apperr.New(apperr.FailedPrecondition, "order %s has a pending plan change: cancel it first (CancelPlanChange)", o.ID)
	} else if !errors.Is(err, store.ErrNotFound) {
		return none, store.ServicePeriod{}, err
	}
	last, err := LastServedPeriod(ctx, tx, o.ID)
	if err != nil {
		return none, store.ServicePeriod{}, store.BugIfNotFound(err, "read the order's current period") // active: it has one
	}
	now := s.billingNow()
	if last.Status != store.PeriodPaid || last.Followed || last.Outcome != nil || last.StartsAt.After(now) || !last.EndsAt.After(now) {
		return none, store.ServicePeriod{}, apperr.New(apperr.FailedPrecondition,
			"order %s's next period is billed already (its renewal invoice is issued): change the plan once that period has started", o.ID)
	}
	return prod, last, nil
}

func samePlugin(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// insertPlanChange writes the change and its audit row; a second pending
// change of the order (a concurrent request) is FailedPrecondition.
func (s *Service) insertPlanChange(ctx context.Context, tx pgx.Tx, in store.InsertPlanChangeParams, by audit.Actor, at time.Time) (store.PlanChange, error) {
	ch, err := writePlanChange(ctx, tx, in)
	if err != nil {
		return store.PlanChange{}, err
	}
	return ch, audit.Write(ctx, tx, by, at, ActionPlanChangeRequest, entityPlanChange, ch.ID.String(), nil, planChangeSnapshot(ch))
}

// writePlanChange writes plan change in; a second pending change of its
// order is refused.
func writePlanChange(ctx context.Context, tx pgx.Tx, in store.InsertPlanChangeParams) (store.PlanChange, error) {
	ch, err := store.Q(tx).InsertPlanChange(ctx, in)
	if errors.Is(err, store.ErrConflict) {
		return store.PlanChange{}, apperr.New(apperr.FailedPrecondition, "order %s has a pending plan change: cancel it first (CancelPlanChange)", in.OrderID)
	}
	return ch, err
}

// issueProration issues an upgrade's proration invoice: in.Amount, due at
// due, with two lines that sum to it: the unused old plan (negative, its
// share of the period rounded half-even) and the new plan's remainder (the
// amount less that line, so the amount itself is rounded once).
func (s *Service) issueProration(ctx context.Context, tx pgx.Tx, o store.Order, prod store.Product, last store.ServicePeriod,
	in store.InsertPlanChangeParams, now, at, due time.Time, by audit.Actor) (store.Invoice, error) {
	oldShare, err := UnusedShare(in.FromPrice, last.StartsAt, last.EndsAt, now)
	if err != nil {
		return store.Invoice{}, err
	}
	newLine, err := in.Amount.Add(oldShare)
	if err != nil {
		return store.Invoice{}, err
	}
	loc := s.loc
	if loc == nil {
		loc = time.UTC
	}
	from, to := now.In(loc).Format(time.DateOnly), last.EndsAt.In(loc).Format(time.DateOnly)
	desc := fmt.Sprintf("Plan change of order %s to %s, %s to %s", o.ID, prod.Name, from, to)
	number, err := TakeInvoiceNumber(ctx, tx, at, s.loc)
	if err != nil {
		return store.Invoice{}, err
	}
	start := now
	inv, err := store.InsertInvoice(ctx, tx, store.NewInvoice{
		ID: uuid.New(), CustomerID: o.CustomerID, OrderID: &o.ID, Number: number,
		Status: string(InvoiceIssued), Amount: in.Amount, Currency: o.Currency,
		Description: desc, IssuedAt: &at, DueAt: &due, CreatedAt: at,
		Lines: []store.NewInvoiceLine{
			{Description: fmt.Sprintf("Unused time on %s, %s to %s", planName(o), from, to), PeriodStart: &start, PeriodEnd: &last.EndsAt, Quantity: 1, UnitAmount: oldShare.Neg()},
			{Description: fmt.Sprintf("Remaining time on %s, %s to %s", prod.Name, from, to), PeriodStart: &start, PeriodEnd: &last.EndsAt, Quantity: 1, UnitAmount: newLine},
		},
	})
	if err != nil {
		return store.Invoice{}, err
	}
	return inv, audit.Write(ctx, tx, by, at, ActionInvoiceCreate, entityInvoice, inv.ID.String(), nil, InvoiceSnapshot(inv))
}

// planName names the order's plan: its description, or its id.
func planName(o store.Order) string {
	if o.Description != "" {
		return o.Description
	}
	return "order " + o.ID.String()
}

// quotedChange is the change in would make, unwritten (a quote).
func quotedChange(in store.InsertPlanChangeParams) store.PlanChange {
	return store.PlanChange{
		OrderID: in.OrderID, FromProduct: in.FromProduct, ToProduct: in.ToProduct,
		FromPrice: in.FromPrice, ToPrice: in.ToPrice, FromCycle: in.FromCycle, ToCycle: in.ToCycle,
		Currency: in.Currency, Timing: in.Timing, Status: in.Status,
		PeriodSeq: in.PeriodSeq, PeriodStart: in.PeriodStart, PeriodEnd: in.PeriodEnd,
		Amount: in.Amount, Credited: in.Credited, LapseAt: in.LapseAt, EffectiveAt: in.EffectiveAt,
		CreatedAt: in.CreatedAt, UpdatedAt: in.CreatedAt,
	}
}

// requestedChange is change in as it is asked for, before it is written:
// its quote, with the id and the invoice it will be written with.
func requestedChange(in store.InsertPlanChangeParams) store.PlanChange {
	ch := quotedChange(in)
	ch.ID, ch.InvoiceID = in.ID, in.InvoiceID
	return ch
}

// quoteDowngrade is what creditDowngrade would credit, refunding nothing:
// credit split over the current period's payments as the credit is.
func quoteDowngrade(ctx context.Context, tx pgx.Tx, o store.Order, last store.ServicePeriod, credit money.Amount, now time.Time) (money.Amount, error) {
	shares, err := currentShare(ctx, tx, o, last, credit, now)
	if err != nil {
		return money.Amount{}, err
	}
	refunds, err := splitShares(ctx, tx, shares)
	if err != nil {
		return money.Amount{}, err
	}
	return refundsTotal(refunds)
}

// currentShare is the current period last's share of order o's unused
// shares (unusedShares), its amount set to credit: what a downgrade's
// credit refunds from.
func currentShare(ctx context.Context, tx pgx.Tx, o store.Order, last store.ServicePeriod, credit money.Amount, now time.Time) ([]periodShare, error) {
	shares, err := unusedShares(ctx, tx, o, now)
	if err != nil {
		return nil, err
	}
	var cur []periodShare
	for _, sh := range shares {
		if sh.period.Seq == last.Seq {
			sh.share = credit
			cur = append(cur, sh)
		}
	}
	return cur, nil
}

// creditDowngrade refunds credit, a downgrade's unused difference, to the
// customer's balance from the payments of the current period last (at
// most what of them is not refunded: splitShares), through the balance
// refund path EndService uses: the payments' refundable amount shrinks by
// it, so the same money can never go back twice. It answers what it
// credited.
func (s *Service) creditDowngrade(ctx context.Context, tx pgx.Tx, acct store.BalanceAccount, o store.Order, last store.ServicePeriod,
	credit money.Amount, p auth.Principal, now time.Time) (money.Amount, error) {
	cur, err := currentShare(ctx, tx, o, last, credit, now)
	if err != nil {
		return money.Amount{}, err
	}
	return s.creditShares(ctx, tx, acct, p, cur,
		fmt.Sprintf("order %s downgraded: unused difference", o.ID),
		fmt.Sprintf("order %s downgraded: unused difference of its period", o.ID))
}

// applyPlanChange gives order o (locked) change ch's product, renewal price
// and cycle, marks ch applied at billingAt (credited: what of a downgrade
// went to the balance), and queues plan_changed (the provider changes the
// plan), with the audit rows of the change and the order.
func applyPlanChange(ctx context.Context, tx pgx.Tx, o store.Order, ch store.PlanChange, credited money.Amount,
	by audit.Actor, at, billingAt time.Time) (store.Order, store.PlanChange, error) {
	return movePlan(ctx, tx, o, ch, by, at, func() (store.PlanChange, error) {
		after, err := store.Q(tx).SetPlanChangeStatus(ctx, store.SetPlanChangeStatusParams{
			ID: ch.ID, Status: store.PlanChangeApplied, Credited: credited, EffectiveAt: &billingAt, UpdatedAt: at,
		})
		if err != nil {
			return store.PlanChange{}, store.BugIfNotFound(err, "apply the plan change")
		}
		return after, nil
	})
}

// applyUnwrittenPlanChange is applyPlanChange of change in, asked for but
// not written yet (heldPlanChange): it is written applied, effective at
// billingAt, crediting nothing.
func applyUnwrittenPlanChange(ctx context.Context, tx pgx.Tx, o store.Order, in store.InsertPlanChangeParams,
	by audit.Actor, at, billingAt time.Time) (store.Order, store.PlanChange, error) {
	return movePlan(ctx, tx, o, requestedChange(in), by, at, func() (store.PlanChange, error) {
		in.Status, in.EffectiveAt, in.Credited = store.PlanChangeApplied, &billingAt, money.Zero()
		return writePlanChange(ctx, tx, in)
	})
}

// movePlan moves order o to the plan of change ch (pending), which apply
// then records applied, and audits and queues both.
func movePlan(ctx context.Context, tx pgx.Tx, o store.Order, ch store.PlanChange, by audit.Actor, at time.Time,
	apply func() (store.PlanChange, error)) (store.Order, store.PlanChange, error) {
	moved, err := store.Q(tx).SetOrderPlan(ctx, store.SetOrderPlanParams{
		ID: o.ID, ProductID: &ch.ToProduct, RenewalPrice: money.NullAmount{Amount: ch.ToPrice, Valid: true},
		BillingCycle: ch.ToCycle, UpdatedAt: at,
	})
	if err != nil {
		return store.Order{}, store.PlanChange{}, store.BugIfNotFound(err, "set the order's plan")
	}
	after, err := apply()
	if err != nil {
		return store.Order{}, store.PlanChange{}, err
	}
	if err := audit.Write(ctx, tx, by, at, ActionPlanChangeApply, entityPlanChange, ch.ID.String(), planChangeSnapshot(ch), planChangeSnapshot(after)); err != nil {
		return store.Order{}, store.PlanChange{}, err
	}
	note := orderSnapshot(moved)
	note.Note = fmt.Sprintf("plan change %s: product %s", ch.ID, ch.ToProduct)
	if err := audit.Write(ctx, tx, by, at, ActionOrderBillingChange, entityOrder, o.ID.String(), orderSnapshot(o), note); err != nil {
		return store.Order{}, store.PlanChange{}, err
	}
	if err := appendPlanEvent(ctx, tx, EventPlanChanged, after); err != nil {
		return store.Order{}, store.PlanChange{}, err
	}
	return moved, after, nil
}

func appendPlanEvent(ctx context.Context, tx pgx.Tx, typ string, ch store.PlanChange) error {
	body, err := json.Marshal(PlanChangedPayload{
		OrderID: ch.OrderID, ChangeID: ch.ID, FromProduct: ch.FromProduct, ToProduct: ch.ToProduct,
		FromPrice: ch.FromPrice, ToPrice: ch.ToPrice, When: ch.Timing, Amount: ch.Amount, Credited: ch.Credited,
		Currency: ch.Currency, InvoiceID: ch.InvoiceID,
	})
	if err != nil {
		return err
	}
	return store.AppendEvent(ctx, tx, typ, ch.OrderID, body)
}

// planChangeOnPaid is what paying an invoice in full does when it is an
// upgrade's proration invoice (InvoiceTransition, in the payer's
// transaction, which holds the order's lock, then the invoice's): the
// change is applied at the time of payment on the billing clock. It
// answers the order and the change as they moved, nil when the invoice
// applies none.
func planChangeOnPaid(ctx context.Context, tx pgx.Tx, inv store.Invoice, m InvoiceMove) (*store.Order, *store.PlanChange, error) {
	if inv.OrderID == nil {
		return nil, nil, nil
	}
	billingAt := m.At
	if !m.BillingAt.IsZero() {
		billingAt = m.BillingAt
	}
	var moved store.Order
	var applied store.PlanChange
	var err error
	if h := m.heldFor(inv); h != nil {
		moved, applied, err = applyUnwrittenPlanChange(ctx, tx, h.order, h.change, m.By, m.At, billingAt)
	} else {
		var ch store.PlanChange
		ch, err = store.Q(tx).PlanChangeByInvoiceForUpdate(ctx, &inv.ID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil, nil // not a proration invoice, or one already done with
		}
		if err != nil {
			return nil, nil, err
		}
		if ch.Timing != store.PlanChangeNow {
			return nil, nil, nil // a renewal invoice of the new plan: the change waits for its period
		}
		o, err := store.Q(tx).GetOrderForUpdate(ctx, ch.OrderID)
		if err != nil {
			return nil, nil, store.BugIfNotFound(err, "lock the order of a plan change")
		}
		moved, applied, err = applyPlanChange(ctx, tx, o, ch, money.Zero(), m.By, m.At, billingAt)
	}
	if err != nil {
		return nil, nil, err
	}
	return &moved, &applied, nil
}

// planChangeOnCancel is what cancelling invoice inv does to the pending
// change it bills: the change lapses (the billing run's lapse:
// plan_change_lapsed is queued) or is cancelled (an admin cancelled the
// invoice). The caller holds the order's lock, then the invoice's.
func planChangeOnCancel(ctx context.Context, tx pgx.Tx, inv store.Invoice, m InvoiceMove) error {
	ch, err := store.Q(tx).PlanChangeByInvoiceForUpdate(ctx, &inv.ID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	status, action := store.PlanChangeCancelled, ActionPlanChangeCancel
	if m.FailReason == failedByPlanChangeLapse {
		status, action = store.PlanChangeLapsed, ActionPlanChangeLapse
	}
	after, err := store.Q(tx).SetPlanChangeStatus(ctx, store.SetPlanChangeStatusParams{
		ID: ch.ID, Status: status, Credited: ch.Credited, UpdatedAt: m.At,
	})
	if err != nil {
		return store.BugIfNotFound(err, "end the plan change")
	}
	if err := audit.Write(ctx, tx, m.By, m.At, action, entityPlanChange, ch.ID.String(), planChangeSnapshot(ch), planChangeSnapshot(after)); err != nil {
		return err
	}
	if status != store.PlanChangeLapsed {
		return nil
	}
	return appendPlanEvent(ctx, tx, EventPlanChangeLapsed, after)
}

// CancelPlanChange withdraws order id's pending plan change (the customer
// their own order, an admin any) until it takes effect: its unpaid
// proration invoice is cancelled with it. A change whose next period is
// billed already (period_end, its renewal invoice issued), or whose
// proration is partly paid, is FailedPrecondition; no pending change is
// NotFound.
func (s *Service) CancelPlanChange(ctx context.Context, id uuid.UUID) (PlanChanged, error) {
	p, err := auth.Require(ctx)
	if err != nil {
		return PlanChanged{}, err
	}
	var out PlanChanged
	err = store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		o, err := store.Q(tx).GetOrderForUpdate(ctx, id)
		hidden := apperr.New(apperr.NotFound, "order %s not found", id)
		if err := auth.Owned(p, o.CustomerID, err, hidden, hidden); err != nil {
			return err
		}
		ch, err := store.Q(tx).PendingPlanChange(ctx, id)
		if err != nil {
			return store.NotFound(err, "order %s has no pending plan change", id)
		}
		if ch, err = store.Q(tx).GetPlanChangeForUpdate(ctx, ch.ID); err != nil {
			return err
		}
		if ch.Status != store.PlanChangePending {
			return apperr.New(apperr.FailedPrecondition, "plan change %s is %s", ch.ID, ch.Status)
		}
		at, by := s.now(), audit.Of(p)
		switch {
		case ch.Timing == store.PlanChangePeriodEnd && ch.PeriodSeq != nil:
			return apperr.New(apperr.FailedPrecondition,
				"plan change %s is billed already: the renewal invoice of the next period bills the new plan", ch.ID)
		case ch.InvoiceID != nil:
			inv, err := store.Q(tx).GetInvoiceForUpdate(ctx, *ch.InvoiceID)
			if err != nil {
				return store.BugIfNotFound(err, "lock the proration invoice")
			}
			if !inv.PaidAmount.IsZero() {
				return apperr.New(apperr.FailedPrecondition, "the proration invoice %s is partly paid (%s): an admin settles it", inv.ID, inv.PaidAmount)
			}
			// The invoice's cancel cancels the change (planChangeOnCancel).
			if _, err := InvoiceTransition(ctx, tx, inv, InvoiceMove{To: InvoiceCancelled, By: by, At: at, FailReason: failedByInvoiceCancel}); err != nil {
				return err
			}
			ch, err = store.Q(tx).GetPlanChangeForUpdate(ctx, ch.ID)
			if err != nil {
				return err
			}
		default:
			after, err := store.Q(tx).SetPlanChangeStatus(ctx, store.SetPlanChangeStatusParams{
				ID: ch.ID, Status: store.PlanChangeCancelled, Credited: ch.Credited, UpdatedAt: at,
			})
			if err != nil {
				return store.BugIfNotFound(err, "cancel the plan change")
			}
			if err := audit.Write(ctx, tx, by, at, ActionPlanChangeCancel, entityPlanChange, ch.ID.String(), planChangeSnapshot(ch), planChangeSnapshot(after)); err != nil {
				return err
			}
			ch = after
		}
		out = PlanChanged{Order: o, Change: ch}
		return nil
	})
	if err != nil {
		return PlanChanged{}, err
	}
	s.log.InfoContext(ctx, "plan change cancelled", "order_id", id, "change_id", out.Change.ID, "principal", p.String())
	return out, nil
}

// PendingPlanChanges returns the pending changes of orders, by order id
// (the orders' pending_plan_change).
func (s *Service) PendingPlanChanges(ctx context.Context, orders ...store.Order) (map[uuid.UUID]store.PlanChange, error) {
	ids := make([]uuid.UUID, len(orders))
	for i, o := range orders {
		ids[i] = o.ID
	}
	rows, err := store.Q(s.db).PendingPlanChanges(ctx, ids)
	if err != nil {
		return nil, err
	}
	return store.ByKey(rows, func(r store.PlanChange) uuid.UUID { return r.OrderID }), nil
}

// PendingPlanChange is order id's pending plan change (nil: none), read
// once by a caller that holds the order's lock and hands it to the steps
// below: an order has at most one.
func PendingPlanChange(ctx context.Context, tx pgx.Tx, id uuid.UUID) (*store.PlanChange, error) {
	ch, err := store.Q(tx).PendingPlanChange(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &ch, nil
}

// NextPeriodPlan is what the billing run's renewal of an order bills for
// its next period, given its pending change (PendingPlanChange): a
// period-end change (its price and cycle replace the order's), else
// nothing (ok false).
func NextPeriodPlan(pending *store.PlanChange) (store.PlanChange, bool) {
	if pending == nil || pending.Timing != store.PlanChangePeriodEnd {
		return store.PlanChange{}, false
	}
	return *pending, true
}

// PlanChangeBilled records that the billing run issued next, the period
// that bills period-end change ch (inv: its invoice, nil for a free
// period): the change takes effect when next starts (ApplyDuePlanChange).
func PlanChangeBilled(ctx context.Context, tx pgx.Tx, ch store.PlanChange, next store.NewServicePeriod, at time.Time) error {
	seq := next.Seq
	_, err := store.Q(tx).SetPlanChangeRenewal(ctx, store.SetPlanChangeRenewalParams{
		ID: ch.ID, InvoiceID: next.InvoiceID, PeriodSeq: &seq, PeriodStart: &next.StartsAt, PeriodEnd: &next.EndsAt, UpdatedAt: at,
	})
	return store.BugIfNotFound(err, "record the plan change's renewal")
}

// ApplyDuePlanChange applies order o's (locked) pending period-end change
// once the period it bills has started on the billing clock (now): the
// order takes the new product, and plan_changed asks the provider to
// change the plan. An order whose service has ended has its change
// cancelled instead. It reports whether it applied one.
func ApplyDuePlanChange(ctx context.Context, tx pgx.Tx, o store.Order, by audit.Actor, at, now time.Time) (bool, error) {
	pending, err := PendingPlanChange(ctx, tx, o.ID)
	if err != nil {
		return false, err
	}
	applied, _, err := ApplyDuePendingPlanChange(ctx, tx, o, pending, by, at, now)
	return applied, err
}

// ApplyDuePendingPlanChange is ApplyDuePlanChange given the order's
// pending change (PendingPlanChange; nil: none). It also reports whether
// the change is still pending afterwards.
func ApplyDuePendingPlanChange(ctx context.Context, tx pgx.Tx, o store.Order, pending *store.PlanChange, by audit.Actor, at, now time.Time) (applied, stillPending bool, err error) {
	if pending == nil {
		return false, false, nil
	}
	ch := *pending
	if ch.Timing != store.PlanChangePeriodEnd || ch.PeriodSeq == nil || ch.EffectiveAt == nil || ch.EffectiveAt.After(now) {
		return false, true, nil
	}
	if !Status(o.Status).Live() {
		after, err := store.Q(tx).SetPlanChangeStatus(ctx, store.SetPlanChangeStatusParams{
			ID: ch.ID, Status: store.PlanChangeCancelled, Credited: ch.Credited, UpdatedAt: at,
		})
		if err != nil {
			return false, false, err
		}
		return false, false, audit.Write(ctx, tx, by, at, ActionPlanChangeCancel, entityPlanChange, ch.ID.String(), planChangeSnapshot(ch), planChangeSnapshot(after))
	}
	_, _, err = applyPlanChange(ctx, tx, o, ch, money.Zero(), by, at, *ch.EffectiveAt)
	return err == nil, false, err
}

// LapsePlanChange lapses order o's (locked) pending upgrade whose
// proration invoice is unpaid at its lapse time (billing clock now): the
// invoice is cancelled (its pending payments failed), the change lapses
// and plan_change_lapsed tells the customer. A partly paid invoice is
// left for an admin (false). It reports whether it lapsed one.
func LapsePlanChange(ctx context.Context, tx pgx.Tx, o store.Order, by audit.Actor, at, now time.Time) (bool, error) {
	pending, err := PendingPlanChange(ctx, tx, o.ID)
	if err != nil {
		return false, err
	}
	return lapsePlanChange(ctx, tx, pending, by, at, now, false)
}

// LapseUpgradeBeforeRenewal lapses order o's (locked) pending upgrade
// whose proration invoice is still unpaid when the billing run issues the
// next period (before its lapse time): that period's invoice bills the
// old plan, so an upgrade paid after it would serve the new plan through
// a period billed at the old price. Its proration covers the current
// period only. A partly paid invoice is left for an admin (false). It
// reports whether it lapsed one. pending is the order's pending change
// (PendingPlanChange; nil: none).
func LapseUpgradeBeforeRenewal(ctx context.Context, tx pgx.Tx, pending *store.PlanChange, by audit.Actor, at, now time.Time) (bool, error) {
	return lapsePlanChange(ctx, tx, pending, by, at, now, true)
}

func lapsePlanChange(ctx context.Context, tx pgx.Tx, pending *store.PlanChange, by audit.Actor, at, now time.Time, renewing bool) (bool, error) {
	if pending == nil {
		return false, nil
	}
	ch := *pending
	if ch.Timing != store.PlanChangeNow || ch.InvoiceID == nil || ch.LapseAt == nil || (!renewing && ch.LapseAt.After(now)) {
		return false, nil
	}
	inv, err := store.Q(tx).GetInvoiceForUpdate(ctx, *ch.InvoiceID)
	if err != nil {
		return false, store.BugIfNotFound(err, "lock the proration invoice")
	}
	if !inv.PaidAmount.IsZero() || !CanTransitionInvoice(InvoiceStatus(inv.Status), InvoiceCancelled) {
		return false, nil
	}
	_, err = InvoiceTransition(ctx, tx, inv, InvoiceMove{To: InvoiceCancelled, By: by, At: at, BillingAt: now, FailReason: failedByPlanChangeLapse})
	return err == nil, err
}

// priceAfterPlanChanges is price, what was paid for a period, moved by
// chs, the plan changes applied now in that period (each by its
// new price less its old): the price of the rest of the period, whose
// unused share an ending now credits. A downgrade lowers it (its
// difference was credited already), an upgrade raises it (its proration
// was paid). Never below zero.
func priceAfterPlanChanges(chs []store.PlanChange, price money.Amount) (money.Amount, error) {
	for _, ch := range chs {
		d, err := ch.ToPrice.Sub(ch.FromPrice)
		if err != nil {
			return money.Amount{}, err
		}
		if price, err = price.Add(d); err != nil {
			return money.Amount{}, err
		}
	}
	if price.Sign() < 0 {
		return money.Zero(), nil
	}
	return price, nil
}
