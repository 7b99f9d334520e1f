package order

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/paging"
	"github.com/rustbill/paymentd/internal/secrets"
	"github.com/rustbill/paymentd/internal/store"
)

// NewProduct is a product to add to the catalogue.
type NewProduct struct {
	Name        string
	Description string
	Price       money.Amount
	Currency    string
	// BillingCycle is how often it is billed, Price being per cycle; "" is
	// one_time.
	BillingCycle string
	// ProviderPlugin names the provider plugin that provisions it; nil: none.
	ProviderPlugin *string
	// ProviderConfig is what the provider plugin gets for the product: its
	// settings (checked against the plugin's config schema) and the
	// product's own attributes (plan). nil: an empty object. Only with
	// ProviderPlugin.
	ProviderConfig map[string]any
}

// CreateProduct adds an enabled product (admin).
func (s *Service) CreateProduct(ctx context.Context, in NewProduct) (store.Product, error) {
	p, err := auth.RequireAdmin(ctx)
	if err != nil {
		return store.Product{}, err
	}
	in.Name = strings.TrimSpace(in.Name)
	if in.Name == "" {
		return store.Product{}, apperr.New(apperr.InvalidArgument, "name is required")
	}
	if in.Price.Sign() < 0 {
		return store.Product{}, apperr.New(apperr.InvalidArgument, "price must not be negative")
	}
	if err := s.checkCurrency(in.Currency); err != nil {
		return store.Product{}, err
	}
	cycle, err := parseCycle(in.BillingCycle)
	if err != nil {
		return store.Product{}, err
	}
	id := uuid.New()
	providerConfig, err := s.checkProvider(ctx, id, in.ProviderPlugin, in.ProviderConfig)
	if err != nil {
		return store.Product{}, err
	}
	var out store.Product
	err = store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		now := s.now()
		prod, err := store.InsertProduct(ctx, tx, store.NewProduct{
			ID: id, Name: in.Name, Description: in.Description, Price: in.Price, Currency: in.Currency,
			BillingCycle: string(cycle), ProviderPlugin: in.ProviderPlugin, ProviderConfig: providerConfig, CreatedAt: now,
		})
		if errors.Is(err, store.ErrForeignKeyViolation) { // the plugin went away since the check
			return apperr.New(apperr.InvalidArgument, "provider plugin %q does not exist", *in.ProviderPlugin)
		}
		if err != nil {
			return err
		}
		out = prod
		return audit.Write(ctx, tx, audit.Of(p), now, ActionProductCreate, entityProduct, prod.ID.String(), nil, productSnapshot(prod))
	})
	if err != nil {
		return store.Product{}, err
	}
	s.log.InfoContext(ctx, "product created", "product_id", out.ID, "price", out.Price.String(), "currency", out.Currency,
		"billing_cycle", out.BillingCycle, "principal", p.String())
	return out, nil
}

// ProductUpdate is what UpdateProduct changes; nil fields stay.
type ProductUpdate struct {
	Name        *string
	Description *string
	Price       *money.Amount
	// BillingCycle is the new cycle; nil or "" keeps it.
	BillingCycle *string
	Enabled      *bool
	// ApplyToExistingOrders moves the later periods of the product's
	// orders that are not final to the product's cycle and price as they
	// are after the update; false leaves every order at what it was bought
	// at (docs/decisions.md, "billing cycles").
	ApplyToExistingOrders bool
	// ProviderConfig replaces the provider_config; a secret it omits or
	// sends as the mask keeps the stored value (which must then decrypt).
	ProviderConfig map[string]any
}

// UpdateProduct changes a product (admin). Orders already placed keep the
// copy of the product they froze, and their billing cycle and renewal
// price unless u.ApplyToExistingOrders, which moves them in the same
// transaction (repriceOrders).
func (s *Service) UpdateProduct(ctx context.Context, id uuid.UUID, u ProductUpdate) (store.Product, error) {
	p, err := auth.RequireAdmin(ctx)
	if err != nil {
		return store.Product{}, err
	}
	var out store.Product
	moved := 0
	err = store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		before, err := store.Q(tx).LockProduct(ctx, id)
		if err != nil {
			return store.NotFound(err, "product %s not found", id)
		}
		next := before
		if u.Name != nil {
			if next.Name = strings.TrimSpace(*u.Name); next.Name == "" {
				return apperr.New(apperr.InvalidArgument, "name must not be blank")
			}
		}
		if u.Description != nil {
			next.Description = *u.Description
		}
		if u.Price != nil {
			if u.Price.Sign() < 0 {
				return apperr.New(apperr.InvalidArgument, "price must not be negative")
			}
			next.Price = *u.Price
		}
		if u.BillingCycle != nil && *u.BillingCycle != "" {
			cycle, err := parseCycle(*u.BillingCycle)
			if err != nil {
				return err
			}
			next.BillingCycle = string(cycle)
		}
		if u.Enabled != nil {
			next.Enabled = *u.Enabled
		}
		if u.ProviderConfig != nil {
			if before.ProviderPlugin == nil {
				return apperr.New(apperr.InvalidArgument, "provider_config needs a provider_plugin; product %s has none", id)
			}
			if problems := secrets.SealedLooking(providerConfigField, u.ProviderConfig); len(problems) > 0 {
				return apperr.New(apperr.InvalidArgument, "%s", strings.Join(problems, "; "))
			}
			schema, err := s.providerSchema(ctx, tx, *before.ProviderPlugin)
			if err != nil {
				return err
			}
			stored, err := secrets.DecodeConfig(before.ProviderConfig)
			if err != nil {
				return apperr.Wrap(apperr.Internal, err, "product %s: stored provider_config is not a JSON object", id)
			}
			merged, err := s.keys.MergeUpdate(productOwner(id), stored, u.ProviderConfig, schema.Merge)
			if err != nil {
				return err
			}
			if next.ProviderConfig, err = s.providerConfigJSON(id, schema, merged, nil); err != nil {
				return err
			}
		}
		now := s.now()
		if out, err = store.Q(tx).UpdateProduct(ctx, store.UpdateProductParams{
			ID:             next.ID,
			Name:           next.Name,
			Description:    next.Description,
			Price:          next.Price,
			BillingCycle:   next.BillingCycle,
			Enabled:        next.Enabled,
			ProviderConfig: next.ProviderConfig,
			UpdatedAt:      now,
		}); err != nil {
			return err
		}
		if err := audit.Write(ctx, tx, audit.Of(p), now, ActionProductUpdate, entityProduct, id.String(), productSnapshot(before), productSnapshot(out)); err != nil {
			return err
		}
		if !u.ApplyToExistingOrders {
			return nil
		}
		moved, err = repriceOrders(ctx, tx, audit.Of(p), out, now)
		return err
	})
	if err != nil {
		return store.Product{}, err
	}
	s.log.InfoContext(ctx, "product updated", "product_id", out.ID, "price", out.Price.String(), "billing_cycle", out.BillingCycle,
		"enabled", out.Enabled, "orders_moved", moved, "principal", p.String())
	return out, nil
}

// repriceOrders moves the orders of prod that are not final, and whose
// billing differs from prod's, to prod's cycle and price for their later
// periods: one order.billing_change audit row each. It returns how many
// moved. An order placed concurrently from the product as it was read
// before the update keeps that reading: it was bought at the price shown.
func repriceOrders(ctx context.Context, tx pgx.Tx, by audit.Actor, prod store.Product, at time.Time) (int, error) {
	billing := billingOf(prod)
	orders, err := store.Q(tx).LockOrdersToReprice(ctx, store.LockOrdersToRepriceParams{
		ProductID:    &prod.ID,
		Statuses:     nonFinalStatuses(),
		BillingCycle: billing.BillingCycle,
		RenewalPrice: billing.RenewalPrice,
	})
	if err != nil {
		return 0, err
	}
	for _, before := range orders {
		after, err := store.Q(tx).SetOrderBilling(ctx, store.SetOrderBillingParams{
			ID: before.ID, BillingCycle: billing.BillingCycle, RenewalPrice: billing.RenewalPrice, UpdatedAt: at,
		})
		if err != nil {
			return 0, store.BugIfNotFound(err, "moving an order's billing")
		}
		if err := audit.Write(ctx, tx, by, at, ActionOrderBillingChange, entityOrder, after.ID.String(), orderSnapshot(before), orderSnapshot(after)); err != nil {
			return 0, err
		}
	}
	return len(orders), nil
}

// ListProducts returns a page of products, newest first. Admins see every
// product (enabled filters when set); customers see enabled products only,
// so asking for disabled ones gives an empty page.
func (s *Service) ListProducts(ctx context.Context, enabled *bool, page, size uint32) ([]store.Product, paging.Page, error) {
	p, err := auth.Require(ctx)
	if err != nil {
		return nil, paging.Page{}, err
	}
	pg, err := paging.Normalize(page, size)
	if err != nil {
		return nil, paging.Page{}, err
	}
	if !p.IsAdmin() {
		if enabled != nil && !*enabled {
			return nil, pg, nil
		}
		yes := true
		enabled = &yes
	}
	rows, total, err := store.ListProducts(ctx, s.db, enabled, pg.Limit(), pg.Offset())
	if err != nil {
		return nil, paging.Page{}, err
	}
	return rows, pg.WithTotal(total), nil
}
