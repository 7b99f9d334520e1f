package payment

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/text"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store"
)

// NewPayment is what CreatePayment is asked for.
type NewPayment struct {
	// OrderID and InvoiceID: at least one. Both: the invoice must belong
	// to the order.
	OrderID            *uuid.UUID
	InvoiceID          *uuid.UUID
	GatewayInterfaceID uuid.UUID
	ReturnURL          string
	// ClientIP is the payer's address, for gateways that want it.
	ClientIP string
}

// CallbackPath is where gateways send their notifications:
// [server].public_url + CallbackPath + gateway_interface_id.
const CallbackPath = "/callbacks/"

// CallbackURL is the notify URL of a gateway interface: publicURL
// ([server].public_url, a trailing slash or not) + CallbackPath + its id.
// Payments give it to the gateway, and the admin API shows it for the
// gateways whose dashboards need it entered by hand: one function, so the
// two never differ.
func CallbackURL(publicURL string, gatewayInterfaceID uuid.UUID) string {
	return strings.TrimRight(publicURL, "/") + CallbackPath + gatewayInterfaceID.String()
}

// CallbackURL is the notify URL this service gives the gateway for
// payments through the interface id.
func (s *Service) CallbackURL(gatewayInterfaceID uuid.UUID) string {
	return CallbackURL(s.publicURL, gatewayInterfaceID)
}

// recordTimeout bounds the transaction that records a payment the gateway
// has already created, which runs even when the caller has gone away.
const recordTimeout = 15 * time.Second

// CreatePayment creates a gateway payment for an order or an invoice and
// returns it with the gateway's payment URL, QR code or instructions
// (payments.payment_url, qr_code, instructions).
//
// The order or invoice must exist and belong to the caller (admins may pay
// for anyone; another customer's is treated as not existing) and be unpaid;
// the amount is the order's total or what is left of the invoice, in its
// currency. The gateway interface must exist, be enabled, have a loaded
// plugin and take that currency (Gateway.Currencies). All of that is
// InvalidArgument, and nothing is written or sent.
//
// While a payment for the same order, invoice and interface is pending, the
// call returns that payment (with its stored URL), before and instead of
// asking the gateway again.
//
// Order of work (docs/decisions.md, "payment creation"): the payment id is
// generated first, the plugin's create_payment is called with it (no
// transaction is open during the network call), and only then is the row
// inserted, with that id, in a short transaction that re-checks the order
// and invoice under their locks. A plugin failure is Internal and leaves no
// row. If the insert does not happen (a concurrent call won, the order was
// paid meanwhile, the database failed), the gateway order it created is
// left unpaid: its URL was never given to anyone, and a notification for it
// would name a payment that does not exist (NotFound) — nothing can be paid
// into it unseen. The insert runs on a context detached from the caller's
// cancellation, so a customer who closes the page after the gateway
// answered still finds the payment on the next call.
func (s *Service) CreatePayment(ctx context.Context, in NewPayment) (store.Payment, error) {
	p, err := auth.Require(ctx)
	if err != nil {
		return store.Payment{}, err
	}
	if in.OrderID == nil && in.InvoiceID == nil {
		return store.Payment{}, apperr.New(apperr.InvalidArgument, "order_id or invoice_id is required")
	}
	tgt, err := s.paymentTarget(ctx, s.db, p, in.OrderID, in.InvoiceID, false)
	if err != nil {
		return store.Payment{}, err
	}
	gw, err := s.gatewayForNewPayment(ctx, in.GatewayInterfaceID)
	if err != nil {
		return store.Payment{}, err
	}
	if !gw.Takes(tgt.currency) {
		// A gateway books the figure it is sent in its own currency: 100.00
		// USD through epay would be charged as 100.00 CNY.
		return store.Payment{}, apperr.New(apperr.InvalidArgument, "gateway interface %s (%s) does not take %s (it takes %s)",
			gw.InterfaceID, gw.DisplayName, tgt.currency, gw.takesText())
	}

	existing, err := store.Q(s.db).GetPendingGatewayPayment(ctx, store.GetPendingGatewayPaymentParams{
		OrderID: tgt.orderID, InvoiceID: tgt.invoiceID, GatewayInterfaceID: &gw.InterfaceID,
	})
	if err == nil {
		s.log.InfoContext(ctx, "pending payment returned again", "payment_id", existing.ID, "principal", p.String())
		return existing, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return store.Payment{}, err
	}

	id := uuid.New()
	var out createPaymentOutput
	cin := createPaymentInput{
		PaymentID: id.String(), OrderID: optionalID(tgt.orderID), InvoiceID: optionalID(tgt.invoiceID),
		Amount: tgt.amount, Currency: tgt.currency, Subject: tgt.subject, ReturnURL: in.ReturnURL,
		NotifyURL: s.CallbackURL(gw.InterfaceID), ClientIP: in.ClientIP,
	}
	if err := s.saveMethodFields(ctx, gw, tgt, &cin); err != nil {
		return store.Payment{}, err
	}
	if err := callPlugin(ctx, gw, "create_payment", cin, &out); err != nil {
		return store.Payment{}, err
	}
	if out.PaymentURL == "" && out.QRCode == "" && out.Instructions == "" {
		return store.Payment{}, apperr.New(apperr.Internal, "gateway plugin %s: create_payment answered neither payment_url, qr_code nor instructions", gw.PluginName)
	}

	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	var pay store.Payment
	err = store.WithTx(rctx, s.db, func(tx pgx.Tx) error {
		again, err := s.paymentTarget(rctx, tx, p, in.OrderID, in.InvoiceID, true)
		if err != nil {
			return err
		}
		if !again.amount.Equal(tgt.amount) {
			return apperr.New(apperr.InvalidArgument, "the amount due changed from %s to %s; try again", tgt.amount, again.amount)
		}
		now := s.now()
		pay, err = store.Q(tx).InsertGatewayPayment(rctx, store.InsertGatewayPaymentParams{
			ID:                 id,
			OrderID:            tgt.orderID,
			InvoiceID:          tgt.invoiceID,
			CustomerID:         tgt.customerID,
			GatewayInterfaceID: &gw.InterfaceID,
			Amount:             tgt.amount,
			Currency:           tgt.currency,
			PaymentUrl:         text.Clip(out.PaymentURL, 4096),
			QrCode:             text.Clip(out.QRCode, 16384),
			Instructions:       text.Clip(out.Instructions, 4096),
			ReturnUrl:          in.ReturnURL,
			NextReconcileAt:    now.Add(s.reconcileAfter),
			CreatedAt:          now,
		})
		if err != nil {
			return err
		}
		if err := rememberGatewayCustomer(rctx, tx, gw, tgt.customerID, out.GatewayCustomerID, now); err != nil {
			return err
		}
		return audit.Write(rctx, tx, audit.Of(p), now, audit.ActionPaymentCreate, entityPayment, pay.ID.String(), nil, order.PaymentSnapshot(pay))
	})
	if store.ConstraintOf(err) == "payments_one_pending_key" {
		// A concurrent call for the same order, invoice and interface won:
		// answer its payment. Ours stays an unused gateway order.
		s.log.InfoContext(ctx, "concurrent payment creation lost; returning the winner", "unused_gateway_order", id)
		winner, werr := store.Q(s.db).GetPendingGatewayPayment(rctx, store.GetPendingGatewayPaymentParams{
			OrderID: tgt.orderID, InvoiceID: tgt.invoiceID, GatewayInterfaceID: &gw.InterfaceID,
		})
		if errors.Is(werr, store.ErrNotFound) {
			return store.Payment{}, apperr.New(apperr.InvalidArgument, "a concurrent payment of this order was settled meanwhile; check the order")
		}
		return winner, werr
	}
	if err != nil {
		s.log.WarnContext(ctx, "payment not recorded; its gateway order stays unused", "unused_gateway_order", id, "err", err)
		return store.Payment{}, err
	}
	s.metrics.PaymentTransition(gw.PluginName, pay.Status, pay.Amount, pay.Currency)
	s.log.InfoContext(ctx, "payment created", "payment_id", pay.ID, "order_id", optionalID(pay.OrderID),
		"invoice_id", optionalID(pay.InvoiceID), "gateway_interface_id", gw.InterfaceID, "amount", pay.Amount.String(),
		"currency", pay.Currency, "principal", p.String())
	return pay, nil
}

// CurrencyDue is the currency a payment of the order and/or invoice would
// be in, after the checks CreatePayment makes of them: the caller's own
// (another customer's does not exist), still to be paid. ListPaymentMethods
// offers the interfaces that take it.
func (s *Service) CurrencyDue(ctx context.Context, orderID, invoiceID *uuid.UUID) (string, error) {
	p, err := auth.Require(ctx)
	if err != nil {
		return "", err
	}
	if orderID == nil && invoiceID == nil {
		return "", apperr.New(apperr.InvalidArgument, "order_id or invoice_id is required")
	}
	tgt, err := s.paymentTarget(ctx, s.db, p, orderID, invoiceID, false)
	if err != nil {
		return "", err
	}
	return tgt.currency, nil
}

// gatewayForNewPayment looks up the interface a new payment goes through:
// it must exist, be enabled and have a loaded plugin that an admin has not
// disabled (else InvalidArgument).
func (s *Service) gatewayForNewPayment(ctx context.Context, id uuid.UUID) (Gateway, error) {
	if s.gateways == nil {
		return Gateway{}, apperr.New(apperr.Unavailable, "payment gateways are not available")
	}
	gw, err := s.gateways.Get(ctx, id)
	if apperr.Is(err, apperr.NotFound) {
		return Gateway{}, apperr.New(apperr.InvalidArgument, "gateway interface %s does not exist", id)
	}
	if err != nil {
		return Gateway{}, err
	}
	switch {
	case !gw.Enabled:
		return Gateway{}, apperr.New(apperr.InvalidArgument, "gateway interface %s is disabled", id)
	case gw.PluginDisabled:
		return Gateway{}, apperr.New(apperr.InvalidArgument, "gateway interface %s is disabled: its plugin %q is disabled", id, gw.PluginName)
	case gw.Plugin == nil:
		return Gateway{}, apperr.New(apperr.InvalidArgument, "gateway interface %s has no loaded plugin", id)
	}
	if gw.InterfaceID == uuid.Nil {
		gw.InterfaceID = id
	}
	return gw, nil
}

// target is what a new payment pays: whose, which order and invoice, how
// much, in what currency.
type target struct {
	customerID uuid.UUID
	orderID    *uuid.UUID
	invoiceID  *uuid.UUID
	amount     money.Amount
	currency   string
	subject    string
	// recurring: the order renews (a recurring product's), so a gateway
	// that saves methods is asked to save the card.
	recurring bool
}

// paymentTarget checks that the caller may pay the order and/or invoice
// now, and what. With lock, the order and then the invoice are locked
// (customer → order → invoice → payment), for the transaction that inserts
// the payment.
//
// An invoice decides what is paid: issued or overdue, with something left
// to pay; its order (named or not) must not have ended (cancelled,
// refunded, terminated, completed) but need not be pending, since an invoice may bill extras of an active order.
// An order paid without an invoice must be pending and cost more than 0.00.
// A payment of an order's invoice carries the order's id, so the order's
// cancellation fails it and its settlement can pay the order.
func (s *Service) paymentTarget(ctx context.Context, db store.DB, p auth.Principal, orderID, invoiceID *uuid.UUID, lock bool) (target, error) {
	var t target
	var ord *store.Order
	if orderID != nil {
		o, err := getOrder(ctx, db, *orderID, lock)
		// Another customer's order is, to this caller, no order at all.
		hidden := apperr.New(apperr.InvalidArgument, "order %s does not exist", *orderID)
		if err := auth.Owned(p, o.CustomerID, err, hidden, hidden); err != nil {
			return t, err
		}
		ord = &o
	}
	if invoiceID == nil {
		o := *ord
		switch {
		case order.Status(o.Status) == order.StatusCancelled:
			return t, apperr.New(apperr.InvalidArgument, "order %s is cancelled", o.ID)
		case order.Status(o.Status) != order.StatusPending || o.PaidAt != nil:
			return t, apperr.New(apperr.InvalidArgument, "order %s is already paid", o.ID)
		case o.TotalAmount.Sign() <= 0:
			return t, apperr.New(apperr.InvalidArgument, "order %s costs nothing; there is nothing to pay through a gateway", o.ID)
		}
		subject := strings.TrimSpace(o.Description)
		if subject == "" {
			subject = "Order " + o.ID.String()
		}
		return target{customerID: o.CustomerID, orderID: &o.ID, amount: o.TotalAmount, currency: o.Currency, subject: text.Clip(subject, 120),
			recurring: recurringOrder(o)}, nil
	}

	if ord == nil && lock {
		// Lock the invoice's order first, as every writer does.
		inv, err := store.Q(db).GetInvoice(ctx, *invoiceID)
		if err == nil && inv.OrderID != nil && auth.CanAccessCustomer(p, inv.CustomerID) == nil {
			if _, err := getOrder(ctx, db, *inv.OrderID, true); err != nil {
				return t, err
			}
		}
	}
	inv, err := getInvoice(ctx, db, *invoiceID, lock)
	hidden := apperr.New(apperr.InvalidArgument, "invoice %s does not exist", *invoiceID)
	if err := auth.Owned(p, inv.CustomerID, err, hidden, hidden); err != nil {
		return t, err
	}
	if ord != nil && (inv.OrderID == nil || *inv.OrderID != ord.ID) {
		return t, apperr.New(apperr.InvalidArgument, "invoice %s does not belong to order %s", inv.ID, ord.ID)
	}
	left, err := inv.Amount.Sub(inv.PaidAmount)
	if err != nil {
		return t, err
	}
	payable := order.CanTransitionInvoice(order.InvoiceStatus(inv.Status), order.InvoicePaid)
	switch {
	case order.InvoiceStatus(inv.Status) == order.InvoiceCancelled:
		return t, apperr.New(apperr.InvalidArgument, "invoice %s is cancelled", inv.ID)
	case order.InvoiceStatus(inv.Status) == order.InvoicePaid || (payable && left.Sign() <= 0):
		return t, apperr.New(apperr.InvalidArgument, "invoice %s is already paid", inv.ID)
	case !payable:
		return t, apperr.New(apperr.InvalidArgument, "invoice %s is %s and cannot be paid yet", inv.ID, inv.Status)
	}
	if ord == nil && inv.OrderID != nil {
		o, err := store.Q(db).GetOrder(ctx, *inv.OrderID)
		if err != nil {
			return t, store.BugIfNotFound(err, "read invoice's order")
		}
		ord = &o
	}
	if ord != nil && order.Status(ord.Status).IsFinal() {
		// An order that ended (terminated, completed, cancelled, refunded)
		// takes no more money: the settlement would capture it
		// (notPayable).
		return t, apperr.New(apperr.InvalidArgument, "order %s of invoice %s is %s", ord.ID, inv.ID, ord.Status)
	}
	subject := "Invoice " + inv.ID.String()
	if inv.Number != nil && *inv.Number != "" {
		subject = "Invoice " + *inv.Number
	}
	t = target{customerID: inv.CustomerID, invoiceID: &inv.ID, amount: left, currency: inv.Currency, subject: subject}
	if ord != nil {
		t.orderID = &ord.ID
		t.recurring = recurringOrder(*ord)
	}
	return t, nil
}

// recurringOrder reports whether o renews: a recurring product's order.
func recurringOrder(o store.Order) bool {
	return o.BillingCycle != "" && o.BillingCycle != "one_time" && o.Renews
}

func getOrder(ctx context.Context, db store.DB, id uuid.UUID, lock bool) (store.Order, error) {
	if lock {
		return store.Q(db).GetOrderForUpdate(ctx, id)
	}
	return store.Q(db).GetOrder(ctx, id)
}

func getInvoice(ctx context.Context, db store.DB, id uuid.UUID, lock bool) (store.Invoice, error) {
	if lock {
		return store.Q(db).GetInvoiceForUpdate(ctx, id)
	}
	return store.Q(db).GetInvoice(ctx, id)
}

// optionalID is an optional id as the plugin and the log take it: "" when
// absent.
func optionalID(id *uuid.UUID) string {
	if id == nil {
		return ""
	}
	return id.String()
}
