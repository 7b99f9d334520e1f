package order

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/paging"
	"github.com/rustbill/paymentd/internal/store"
)

// orderItem is the frozen copy of the product in orders.item.
type orderItem struct {
	ProductID      uuid.UUID       `json:"product_id"`
	Name           string          `json:"name"`
	Description    string          `json:"description"`
	Price          money.Amount    `json:"price"`
	Currency       string          `json:"currency"`
	ProviderPlugin *string         `json:"provider_plugin"`
	ProviderConfig json.RawMessage `json:"provider_config"`
}

// CreateOrder orders one product for the calling customer: a pending order
// of the product's price, in the product's currency.
func (s *Service) CreateOrder(ctx context.Context, productID uuid.UUID) (store.Order, error) {
	p, err := auth.Require(ctx)
	if err != nil {
		return store.Order{}, err
	}
	if p.Role != auth.RoleCustomer {
		return store.Order{}, apperr.New(apperr.PermissionDenied, "orders are placed by customers")
	}
	prod, err := store.Q(s.db).GetProduct(ctx, productID)
	if err != nil {
		return store.Order{}, store.NotFound(err, "product %s not found", productID)
	}
	if !prod.Enabled {
		return store.Order{}, apperr.New(apperr.InvalidArgument, "product %s is not available", productID)
	}
	if err := s.checkCurrency(prod.Currency); err != nil {
		return store.Order{}, err
	}
	acct, err := store.GetBalanceAccount(ctx, s.db, p.ID)
	if errors.Is(err, store.ErrNotFound) {
		return store.Order{}, apperr.New(apperr.PermissionDenied, "customer account not found")
	}
	if err != nil {
		return store.Order{}, err
	}
	if acct.DisabledAt != nil {
		return store.Order{}, apperr.New(apperr.PermissionDenied, "customer account is disabled")
	}
	orderID := uuid.New()
	config, err := s.frozenProviderConfig(prod, orderID)
	if err != nil {
		return store.Order{}, err
	}
	billing := billingOf(prod)
	item, err := json.Marshal(orderItem{
		ProductID: prod.ID, Name: prod.Name, Description: prod.Description, Price: prod.Price,
		Currency: prod.Currency, ProviderPlugin: prod.ProviderPlugin, ProviderConfig: config,
	})
	if err != nil {
		return store.Order{}, err
	}
	var out store.Order
	err = store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		now := s.now()
		o, err := store.InsertOrder(ctx, tx, store.NewOrder{
			ID: &orderID, CustomerID: p.ID, ProductID: &prod.ID, TotalAmount: prod.Price, Currency: prod.Currency,
			Description: prod.Name, Item: item, CreatedAt: now,
			BillingCycle: billing.BillingCycle, RenewalPrice: billing.RenewalPrice,
		})
		if err != nil {
			return err
		}
		out = o
		return audit.Write(ctx, tx, audit.Of(p), now, ActionOrderCreate, entityOrder, o.ID.String(), nil, orderSnapshot(o))
	})
	if err != nil {
		return store.Order{}, err
	}
	s.log.InfoContext(ctx, "order created", "order_id", out.ID, "product_id", prod.ID,
		"amount", out.TotalAmount.String(), "currency", out.Currency, "principal", p.String())
	return out, nil
}

// GetOrder returns one order: admins any, customers their own (another
// customer's order is NotFound, as a missing one).
func (s *Service) GetOrder(ctx context.Context, id uuid.UUID) (store.Order, error) {
	p, err := auth.Require(ctx)
	if err != nil {
		return store.Order{}, err
	}
	o, err := store.Q(s.db).GetOrder(ctx, id)
	hidden := apperr.New(apperr.NotFound, "order %s not found", id)
	if err := auth.Owned(p, o.CustomerID, err, hidden, hidden); err != nil {
		return store.Order{}, err
	}
	return o, nil
}

// ListOrders returns a page of orders, newest first. Customers see only
// their own.
func (s *Service) ListOrders(ctx context.Context, f store.OrderFilter, page, size uint32) ([]store.Order, paging.Page, error) {
	p, err := auth.Require(ctx)
	if err != nil {
		return nil, paging.Page{}, err
	}
	pg, err := paging.Normalize(page, size)
	if err != nil {
		return nil, paging.Page{}, err
	}
	if f.CustomerID, err = scope(p, f.CustomerID); err != nil {
		return nil, paging.Page{}, err
	}
	if f.Status != nil && !slices.Contains(Statuses, Status(*f.Status)) {
		return nil, paging.Page{}, apperr.New(apperr.InvalidArgument, "unknown order status %q", *f.Status)
	}
	rows, total, err := store.ListOrders(ctx, s.db, f, pg.Limit(), pg.Offset())
	if err != nil {
		return nil, paging.Page{}, err
	}
	return rows, pg.WithTotal(total), nil
}

// CancelOrder cancels a pending order: the customer its own, an admin any.
// In one transaction the order becomes cancelled (reason customer or
// admin), its pending payments fail, and an order_cancelled event is queued
// with refund_due false (nothing was paid).
func (s *Service) CancelOrder(ctx context.Context, id uuid.UUID) (store.Order, error) {
	p, err := auth.Require(ctx)
	if err != nil {
		return store.Order{}, err
	}
	reason := CancelReasonCustomer
	if p.IsAdmin() {
		reason = CancelReasonAdmin
	}
	var out store.Order
	var failed []store.Payment
	err = store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		o, err := store.Q(tx).GetOrderForUpdate(ctx, id)
		hidden := apperr.New(apperr.NotFound, "order %s not found", id)
		if err := auth.Owned(p, o.CustomerID, err, hidden, hidden); err != nil {
			return err
		}
		// The table also allows provisioning → cancelled, but that is the
		// worker's move when provisioning fails; callers cancel only
		// orders nobody has paid for.
		if Status(o.Status) != StatusPending {
			return apperr.New(apperr.InvalidArgument, "order %s is %s; only a pending order can be cancelled", id, o.Status)
		}
		moved, err := Transition(ctx, tx, o, Move{
			To: StatusCancelled, By: audit.Of(p), At: s.now(),
			CancelReason: reason, FailReason: failedByOrderCancel,
		})
		if err != nil {
			return err
		}
		out, failed = moved.Order, moved.FailedPayments
		return nil
	})
	if err != nil {
		return store.Order{}, err
	}
	s.log.InfoContext(ctx, "order cancelled", "order_id", id, "reason", reason,
		"failed_payments", len(failed), "principal", p.String())
	return out, nil
}
