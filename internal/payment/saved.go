package payment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/event"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/text"
)

// Saved payment methods and charges without the customer (issue 39, 1;
// docs/plugins.md, "Saved payment methods"; docs/operations.md, "Card
// renewals").
//
// A gateway whose plugin saves methods (Gateway.SavesMethods) is asked to
// save the card of a recurring order's payment (create_payment's
// save_method, with the gateway's customer the service remembers); the
// paid notification names the method (parse_callback's saved_method) and
// the service keeps its references, brand, last four digits and expiry.
// ChargeDue, the billing run's dunning step, charges it for a renewal
// invoice on its due day and on each of [billing].card_retry_days after.

// savedMethodReport is parse_callback's saved_method.
type savedMethodReport struct {
	GatewayCustomerID string `json:"gateway_customer_id"`
	GatewayMethodID   string `json:"gateway_method_id"`
	Brand             string `json:"brand"`
	Last4             string `json:"last4"`
	ExpMonth          int32  `json:"exp_month"`
	ExpYear           int32  `json:"exp_year"`
}

type chargeSavedInput struct {
	PaymentID         string       `json:"payment_id"`
	InvoiceID         string       `json:"invoice_id"`
	OrderID           string       `json:"order_id"`
	Amount            money.Amount `json:"amount"`
	Currency          string       `json:"currency"`
	Subject           string       `json:"subject"`
	GatewayCustomerID string       `json:"gateway_customer_id"`
	GatewayMethodID   string       `json:"gateway_method_id"`
}

type chargeSavedOutput struct {
	// Status is success, failed (no money moved), pending or unknown (the
	// payment stays pending; a status query says what became of it).
	Status           string `json:"status"`
	Code             string `json:"code"`
	Message          string `json:"message"`
	GatewayPaymentID string `json:"gateway_payment_id"`
	GatewayTxID      string `json:"gateway_tx_id"`
	Amount           string `json:"amount"`
	Currency         string `json:"currency"`
}

type removeSavedInput struct {
	GatewayCustomerID string `json:"gateway_customer_id"`
	GatewayMethodID   string `json:"gateway_method_id"`
}

// Outcomes of a saved charge (saved_charge_attempts.outcome) and the
// notice kinds (renewal_reminder's kind) a failed one sends.
const (
	ChargeSucceeded      = "succeeded"
	ChargeDeclined       = "declined"
	ChargeAuthentication = "authentication_required"
	ChargeFailed         = "failed"

	ReminderCardDeclined = "card_declined"
	ReminderCardAuth     = "card_authentication_required"
	ReminderCardExpiring = "card_expiring"
)

// DefaultCardRetryDays is [billing].card_retry_days' default: the days
// after the due day a declined card is charged again.
var DefaultCardRetryDays = []int{2, 5, 9}

// saveMethodFields is what create_payment is told about saving: save_method
// for a recurring order through a gateway that saves methods, with the
// customer and the gateway's customer remembered for it ("" the first time).
func (s *Service) saveMethodFields(ctx context.Context, gw Gateway, tgt target, in *createPaymentInput) error {
	if !gw.SavesMethods || !tgt.recurring {
		return nil
	}
	in.SaveMethod = true
	in.CustomerID = tgt.customerID.String()
	known, err := store.Q(s.db).GetGatewayCustomer(ctx, store.GetGatewayCustomerParams{GatewayInterfaceID: gw.InterfaceID, CustomerID: tgt.customerID})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	in.GatewayCustomerID = known
	return nil
}

// rememberGatewayCustomer keeps the gateway customer create_payment made,
// in the transaction that records the payment.
func rememberGatewayCustomer(ctx context.Context, tx pgx.Tx, gw Gateway, customerID uuid.UUID, gatewayCustomerID string, at time.Time) error {
	if !gw.SavesMethods || gatewayCustomerID == "" {
		return nil
	}
	return store.Q(tx).RememberGatewayCustomer(ctx, store.RememberGatewayCustomerParams{
		GatewayInterfaceID: gw.InterfaceID, CustomerID: customerID, GatewayCustomerID: text.Clip(gatewayCustomerID, 255), CreatedAt: at,
	})
}

// keepSavedMethod records the method a settled payment's notification
// names. A method the service cannot keep (a field out of bounds) is
// logged and left: the payment is settled all the same.
func (s *Service) keepSavedMethod(ctx context.Context, pay store.Payment, gw Gateway, m *savedMethodReport) {
	if m == nil || !gw.SavesMethods || Status(pay.Status) != StatusSuccess {
		return
	}
	if m.GatewayCustomerID == "" || m.GatewayMethodID == "" || len(m.Last4) != 4 || strings.Trim(m.Last4, "0123456789") != "" ||
		m.ExpMonth < 1 || m.ExpMonth > 12 || m.ExpYear < 2000 || m.ExpYear > 2200 {
		s.log.WarnContext(ctx, "gateway named a saved method the service cannot keep", "payment_id", pay.ID)
		return
	}
	saved, err := store.Q(s.db).SaveSavedPaymentMethod(ctx, store.SaveSavedPaymentMethodParams{
		ID: uuid.New(), CustomerID: pay.CustomerID, GatewayInterfaceID: gw.InterfaceID,
		GatewayCustomerID: text.Clip(m.GatewayCustomerID, 255), GatewayMethodID: text.Clip(m.GatewayMethodID, 255),
		Brand: text.Clip(m.Brand, 40), Last4: m.Last4, ExpMonth: m.ExpMonth, ExpYear: m.ExpYear, CreatedAt: s.now(),
	})
	if err != nil {
		s.log.ErrorContext(ctx, "saved method not recorded", "payment_id", pay.ID, "err", err)
		return
	}
	s.log.InfoContext(ctx, "payment method saved", "saved_method_id", saved.ID, "customer_id", pay.CustomerID, "brand", saved.Brand)
}

// SavedMethod is a saved payment method as the API shows it.
type SavedMethod = store.SavedPaymentMethod

// ListSavedMethods lists a customer's saved methods, newest first: the
// caller's own (customerID uuid.Nil: the caller), or any customer's for an
// admin.
func (s *Service) ListSavedMethods(ctx context.Context, customerID uuid.UUID) ([]SavedMethod, error) {
	p, err := auth.Require(ctx)
	if err != nil {
		return nil, err
	}
	if customerID == uuid.Nil {
		if p.Role != auth.RoleCustomer {
			return nil, apperr.New(apperr.InvalidArgument, "customer_id is required")
		}
		customerID = p.ID
	}
	if err := auth.CanAccessCustomer(p, customerID); err != nil {
		return nil, err
	}
	return store.Q(s.db).ListSavedPaymentMethods(ctx, customerID)
}

// RemoveSavedMethod removes one of the caller's saved methods (an admin:
// anyone's): the gateway detaches it first (remove_saved), so it can never
// be charged again, and then it is marked removed. Another customer's is
// NotFound; one removed already is NotFound too.
func (s *Service) RemoveSavedMethod(ctx context.Context, id uuid.UUID) (SavedMethod, error) {
	p, err := auth.Require(ctx)
	if err != nil {
		return SavedMethod{}, err
	}
	m, err := store.Q(s.db).GetSavedPaymentMethod(ctx, id)
	notFound := apperr.New(apperr.NotFound, "saved payment method %s not found", id)
	if err := auth.Owned(p, m.CustomerID, err, notFound, notFound); err != nil {
		return SavedMethod{}, err
	}
	if m.RemovedAt != nil {
		return SavedMethod{}, notFound
	}
	gw, err := s.gateway(ctx, m.GatewayInterfaceID)
	if err != nil {
		return SavedMethod{}, err
	}
	if !gw.SavesMethods {
		return SavedMethod{}, apperr.New(apperr.FailedPrecondition, "gateway plugin %s no longer removes saved methods", gw.PluginName)
	}
	var out struct {
		Removed bool `json:"removed"`
	}
	if err := callPlugin(ctx, gw, plugin.RemoveSaved, removeSavedInput{GatewayCustomerID: m.GatewayCustomerID, GatewayMethodID: m.GatewayMethodID}, &out); err != nil {
		return SavedMethod{}, err
	}
	if !out.Removed {
		return SavedMethod{}, apperr.New(apperr.Internal, "gateway plugin %s: remove_saved did not remove the method", gw.PluginName).Show()
	}
	var removed SavedMethod
	err = store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		now := s.now()
		r, err := store.Q(tx).MarkSavedPaymentMethodRemoved(ctx, store.MarkSavedPaymentMethodRemovedParams{ID: id, RemovedAt: &now})
		if err != nil {
			return store.NotFound(err, "saved payment method %s not found", id)
		}
		removed = r
		return audit.Write(ctx, tx, audit.Of(p), now, ActionSavedMethodRemove, entitySavedMethod, id.String(), nil, nil)
	})
	return removed, err
}

// SetAutoCharge sets whether the renewals of an order charge the saved
// method (the order's customer or an admin). A change writes an audit row
// (ActionAutoChargeSet: who, the order, before and after) in its
// transaction; setting the value the order has writes none.
func (s *Service) SetAutoCharge(ctx context.Context, orderID uuid.UUID, on bool) error {
	p, err := s.callersOrder(ctx, orderID)
	if err != nil {
		return err
	}
	return store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		// The order's lock puts two changes of it one after the other, so
		// that each row's before is the value its change replaced.
		if _, err := store.Q(tx).GetOrderForUpdate(ctx, orderID); err != nil {
			return store.NotFound(err, "order %s not found", orderID)
		}
		before, err := autoCharge(ctx, tx, orderID)
		if err != nil {
			return err
		}
		now := s.now()
		if err := store.Q(tx).SetOrderAutoCharge(ctx, store.SetOrderAutoChargeParams{OrderID: orderID, AutoCharge: on, UpdatedAt: now}); err != nil {
			return err
		}
		if before == on {
			return nil
		}
		return audit.Write(ctx, tx, audit.Of(p), now, ActionAutoChargeSet, entityOrder, orderID.String(),
			autoChargeState{AutoCharge: before}, autoChargeState{AutoCharge: on})
	})
}

// OrderAutoCharge is AutoCharge for a caller: the order's customer or an
// admin (another customer's order, or none, is NotFound).
func (s *Service) OrderAutoCharge(ctx context.Context, orderID uuid.UUID) (bool, error) {
	if _, err := s.callersOrder(ctx, orderID); err != nil {
		return false, err
	}
	return s.AutoCharge(ctx, orderID)
}

// callersOrder checks that order orderID is the caller's (an admin: any
// order's) and returns the caller: another customer's order, or none, is
// NotFound.
func (s *Service) callersOrder(ctx context.Context, orderID uuid.UUID) (auth.Principal, error) {
	p, err := auth.Require(ctx)
	if err != nil {
		return auth.Principal{}, err
	}
	o, err := store.Q(s.db).GetOrder(ctx, orderID)
	notFound := apperr.New(apperr.NotFound, "order %s not found", orderID)
	return p, auth.Owned(p, o.CustomerID, err, notFound, notFound)
}

// AutoCharge reports whether the renewals of an order charge the saved
// method (true unless its customer turned it off).
func (s *Service) AutoCharge(ctx context.Context, orderID uuid.UUID) (bool, error) {
	return autoCharge(ctx, s.db, orderID)
}

// autoCharge is AutoCharge read through db.
func autoCharge(ctx context.Context, db store.DB, orderID uuid.UUID) (bool, error) {
	on, err := store.Q(db).GetOrderAutoCharge(ctx, orderID)
	if errors.Is(err, store.ErrNotFound) {
		return true, nil
	}
	return on, err
}

// attemptDue reports whether attempt n (0: the due day, k: the k-th of
// retryDays) of an invoice due at dueAt may run at now.
func attemptDue(n int, retryDays []int, dueAt, now time.Time) bool {
	if n == 0 {
		return !now.Before(dueAt)
	}
	if n > len(retryDays) {
		return false
	}
	return !now.Before(dueAt.Add(time.Duration(retryDays[n-1]) * 24 * time.Hour))
}

// ChargeDueRound is what one dunning pass did.
type ChargeDueRound struct {
	Charged, Declined, Pending, Errors int
}

// ChargeDue is the billing run's dunning step (the billing leader runs it
// after the balance has paid what it covers): every renewal invoice still
// owed whose next attempt day has come — its due day, then each of
// retryDays after it — is charged to the customer's newest saved method,
// unless the order's auto_charge is off. Each attempt is claimed in the
// database (saved_charge_attempts' key) with its pending payment before
// the gateway is called, and that payment's id is the charge's
// Idempotency-Key: a second leader finds the attempt taken, and a leader
// killed mid-charge leaves a pending payment the reconciler settles from
// the gateway's answer — never a second charge.
func (s *Service) ChargeDue(ctx context.Context, retryDays []int, node string) (ChargeDueRound, error) {
	var round ChargeDueRound
	// The billing clock, not billingNow: that is zero unless the test
	// clock is on, and nothing would ever be due.
	now := s.billingTime()
	due, err := store.Q(s.db).ListInvoicesToCharge(ctx, store.ListInvoicesToChargeParams{Now: &now, LiveStatuses: order.LiveStatuses(), MaxRows: 500})
	if err != nil {
		return round, err
	}
	for _, d := range due {
		if d.DueAt == nil || !attemptDue(int(d.Attempts), retryDays, *d.DueAt, now) {
			continue
		}
		outcome, err := s.chargeInvoice(ctx, d, int(d.Attempts), node)
		switch {
		case err != nil:
			round.Errors++
			s.log.ErrorContext(ctx, "saved-method charge failed; tried again on the next pass", "invoice_id", d.InvoiceID, "err", err)
		case outcome == ChargeSucceeded:
			round.Charged++
		case outcome == "":
			round.Pending++
		default:
			round.Declined++
		}
	}
	if err := s.noticeExpiringCards(ctx, now); err != nil {
		return round, err
	}
	return round, nil
}

// noticeExpiringCards tells a customer, once per saved method, that its
// card expires before the next renewal of an order it pays, from a month
// before that renewal (renewal_reminder of kind card_expiring).
func (s *Service) noticeExpiringCards(ctx context.Context, now time.Time) error {
	rows, err := store.Q(s.db).ListSavedMethodsExpiringBeforeRenewal(ctx, store.ListSavedMethodsExpiringBeforeRenewalParams{
		LiveStatuses: order.LiveStatuses(), Now: now,
	})
	if err != nil {
		return err
	}
	for _, r := range rows {
		err := store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
			at := s.now()
			n, err := store.Q(tx).MarkSavedMethodExpiryNoticed(ctx, store.MarkSavedMethodExpiryNoticedParams{At: &at, ID: r.SavedMethodID})
			if err != nil || n == 0 {
				return err // noticed already (another order of the customer)
			}
			var due time.Time
			if r.PaidUntil != nil {
				due = *r.PaidUntil
			}
			body, err := json.Marshal(order.RenewalReminderPayload{OrderID: r.OrderID, Kind: ReminderCardExpiring, DueAt: due})
			if err != nil {
				return err
			}
			return store.AppendEvent(ctx, tx, event.TypeRenewalReminder, r.OrderID, body)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// billingPrincipal is who the billing run checks a target as: any
// customer's invoice is its to charge.
var billingPrincipal = auth.Principal{Role: auth.RoleAdmin, CredentialID: "billing run"}

// errNoCharge: the attempt was not made (taken by another leader, no
// usable method, the invoice paid meanwhile); nothing to count.
var errNoCharge = errors.New("no charge")

// chargeInvoice makes attempt n of invoice d: it returns the outcome
// ("" while unknown).
func (s *Service) chargeInvoice(ctx context.Context, d store.InvoiceToCharge, n int, node string) (string, error) {
	methods, err := store.Q(s.db).ListSavedPaymentMethods(ctx, d.CustomerID)
	if err != nil {
		return "", err
	}
	inv, err := store.Q(s.db).GetInvoice(ctx, d.InvoiceID)
	if err != nil {
		return "", err
	}
	var gw Gateway
	var method *store.SavedPaymentMethod
	for i := range methods {
		g, err := s.gateways.Get(ctx, methods[i].GatewayInterfaceID)
		if err != nil || g.Plugin == nil || !g.SavesMethods || !g.Enabled || g.PluginDisabled || !g.Takes(inv.Currency) {
			continue
		}
		if g.InterfaceID == uuid.Nil {
			g.InterfaceID = methods[i].GatewayInterfaceID
		}
		gw, method = g, &methods[i]
		break
	}
	if method == nil {
		return ChargeFailed, nil
	}
	who := audit.System(node)
	id := uuid.New()
	var tgt target
	err = store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		t, err := s.paymentTarget(ctx, tx, billingPrincipal, d.OrderID, &d.InvoiceID, true)
		if err != nil {
			return errors.Join(errNoCharge, err)
		}
		tgt = t
		now := s.now()
		if err := store.Q(tx).InsertSavedChargeAttempt(ctx, store.InsertSavedChargeAttemptParams{
			InvoiceID: d.InvoiceID, Attempt: int32(n), PaymentID: id, SavedMethodID: method.ID, CreatedAt: now,
		}); err != nil {
			if store.ConstraintOf(err) == "saved_charge_attempts_pkey" {
				return errNoCharge
			}
			return err
		}
		pay, err := store.Q(tx).InsertGatewayPayment(ctx, store.InsertGatewayPaymentParams{
			ID: id, OrderID: tgt.orderID, InvoiceID: tgt.invoiceID, CustomerID: tgt.customerID, GatewayInterfaceID: &gw.InterfaceID,
			Amount: tgt.amount, Currency: tgt.currency, Instructions: fmt.Sprintf("charged to the saved %s card ending %s", method.Brand, method.Last4),
			NextReconcileAt: now.Add(s.reconcileAfter), CreatedAt: now,
		})
		if err != nil {
			if store.ConstraintOf(err) == "payments_one_pending_key" {
				// The customer is paying it by hand through the same
				// interface right now.
				return errNoCharge
			}
			return err
		}
		return audit.Write(ctx, tx, who, now, audit.ActionPaymentCreate, entityPayment, pay.ID.String(), nil, order.PaymentSnapshot(pay))
	})
	if errors.Is(err, errNoCharge) {
		s.log.InfoContext(ctx, "saved-method charge not made", "invoice_id", d.InvoiceID, "attempt", n, "why", err)
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var out chargeSavedOutput
	callErr := callPlugin(ctx, gw, plugin.ChargeSaved, chargeSavedInput{
		PaymentID: id.String(), InvoiceID: d.InvoiceID.String(), OrderID: optionalID(tgt.orderID), Amount: tgt.amount,
		Currency: tgt.currency, Subject: tgt.subject, GatewayCustomerID: method.GatewayCustomerID, GatewayMethodID: method.GatewayMethodID,
	}, &out)
	if callErr != nil {
		// The charge may have reached the gateway: the payment stays
		// pending and the reconciler asks (query_payment).
		return "", callErr
	}
	return s.applyCharge(ctx, gw, id, inv, n, out, who)
}

// applyCharge settles a charge's answer as a callback's would be settled.
func (s *Service) applyCharge(ctx context.Context, gw Gateway, id uuid.UUID, inv store.Invoice, n int, out chargeSavedOutput, who audit.Actor) (string, error) {
	outcome := ""
	rep := report{
		Status: out.Status, GatewayPaymentID: out.GatewayPaymentID, GatewayTxID: out.GatewayTxID,
		RawAmount: out.Amount, Currency: out.Currency, Takes: takes(gw), Gateway: gw.PluginName,
	}
	switch out.Status {
	case gatewaySuccess:
		outcome = ChargeSucceeded
	case gatewayFailed:
		outcome = ChargeDeclined
		if out.Code == ChargeAuthentication {
			outcome = ChargeAuthentication
		}
		rep.Reason = text.Clip("the saved card was declined: "+out.Code, 200)
	default:
		// pending, unknown: the reconciler settles it from the gateway.
		return "", nil
	}
	if out.Amount != "" {
		a, err := money.Parse(out.Amount)
		if err != nil {
			return "", apperr.New(apperr.InvalidArgument, "the gateway reports an unreadable amount %q", text.Clip(out.Amount, 40))
		}
		rep.Amount = &a
	}
	if _, err := s.settle(ctx, fromCharge, who, id, gw.InterfaceID, rep); err != nil {
		return "", err
	}
	return outcome, s.answerAttempt(ctx, id, inv, n, outcome, out.Code, out.Message)
}

// answerAttempt records the outcome of attempt n of invoice inv (payment
// id) and, for a decline, queues the customer's notice, once: an attempt
// answered already is left as it is.
func (s *Service) answerAttempt(ctx context.Context, id uuid.UUID, inv store.Invoice, n int, outcome, code, message string) error {
	now := s.now()
	return store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		answered, err := store.Q(tx).AnswerSavedChargeAttempt(ctx, store.AnswerSavedChargeAttemptParams{
			PaymentID: id, Outcome: outcome, Code: text.Clip(code, 100), Message: text.Clip(message, 500), AnsweredAt: &now,
		})
		if err != nil || answered == 0 || outcome == ChargeSucceeded {
			return err
		}
		kind := ReminderCardDeclined
		if outcome == ChargeAuthentication {
			kind = ReminderCardAuth
		}
		return queueCardNotice(ctx, tx, inv, kind, n)
	})
}

// answerLostCharge gives a saved-method charge whose answer was lost (its
// leader killed mid-charge, the call cut off) the outcome a status query
// settled its payment with, so that the attempt no longer reads unknown
// and a decline is noticed to the customer. A payment that is no such
// charge, or whose attempt was answered, is left alone; so, without a
// read, is every payment of a gateway that does not save methods (the
// status queries of the other gateways' invoice payments).
func (s *Service) answerLostCharge(ctx context.Context, gw Gateway, pay store.Payment) error {
	if !gw.SavesMethods {
		return nil
	}
	outcome := ""
	switch Status(pay.Status) {
	case StatusSuccess:
		outcome = ChargeSucceeded
	case StatusFailed:
		outcome = ChargeDeclined
	default:
		return nil
	}
	if pay.InvoiceID == nil {
		return nil
	}
	attempts, err := store.Q(s.db).ListSavedChargeAttempts(ctx, *pay.InvoiceID)
	if err != nil {
		return err
	}
	for _, a := range attempts {
		if a.PaymentID != pay.ID || a.Outcome != "" {
			continue
		}
		inv, err := store.Q(s.db).GetInvoice(ctx, *pay.InvoiceID)
		if err != nil {
			return err
		}
		return s.answerAttempt(ctx, pay.ID, inv, int(a.Attempt), outcome, "", "the charge's answer was lost; a status query found the payment "+pay.Status)
	}
	return nil
}

// queueCardNotice queues the notice of a declined or unauthenticated
// charge: a renewal_reminder of kind, whose text links to paying the
// invoice by hand (CreatePayment with its invoice_id).
func queueCardNotice(ctx context.Context, tx pgx.Tx, inv store.Invoice, kind string, attempt int) error {
	return order.AppendInvoiceReminder(ctx, tx, inv, 0, kind, attempt)
}

// ChargeAttempts lists an invoice's saved-method charges, first first (the
// renewal overview shows them).
func (s *Service) ChargeAttempts(ctx context.Context, invoiceID uuid.UUID) ([]store.SavedChargeAttempt, error) {
	if _, err := auth.RequireAdmin(ctx); err != nil {
		return nil, err
	}
	return store.Q(s.db).ListSavedChargeAttempts(ctx, invoiceID)
}
