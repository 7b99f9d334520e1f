package order

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/configschema"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/paging"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/secretpass"
	"github.com/rustbill/paymentd/internal/secrets"
	"github.com/rustbill/paymentd/internal/store"
)

// Service is the order domain: catalogue, orders, balance payment, invoices.
type Service struct {
	db         store.DB
	currencies []string
	// keys seals and opens the secrets of products' provider settings and
	// of the copies orders keep; nil without [secrets] keys.
	keys  *secrets.Keyring
	clock func() time.Time
	log   *slog.Logger
}

// NewService returns the order domain over db. currencies is
// [billing].currencies, the set every product, order and invoice currency
// must belong to; keys is the keyring of [secrets] (nil: none, and a
// product's provider settings may then hold no secret); clock is the time
// source (nil: time.Now).
func NewService(db store.DB, currencies []string, keys *secrets.Keyring, clock func() time.Time, log *slog.Logger) *Service {
	if clock == nil {
		clock = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	return &Service{db: db, currencies: slices.Clone(currencies), keys: keys, clock: clock, log: log}
}

// now is the clock in UTC at PostgreSQL's precision, so a time written and
// read back compares equal.
func (s *Service) now() time.Time {
	return store.Timestamp(s.clock())
}

// Now is the order domain's time, as its operations take it: the renewal
// overview's "now" when the billing run has no test clock of its own.
func (s *Service) Now() time.Time { return s.now() }

// checkCurrency refuses a currency outside [billing].currencies.
func (s *Service) checkCurrency(c string) error {
	if !slices.Contains(s.currencies, c) {
		return apperr.New(apperr.InvalidArgument, "currency %q is not accepted (accepted: %s)", c, strings.Join(s.currencies, ", "))
	}
	return nil
}

// scope limits a list to the caller's own rows: a customer gets its own id
// (asking for another customer's rows is PermissionDenied), an admin what
// it asked for.
func scope(p auth.Principal, asked *uuid.UUID) (*uuid.UUID, error) {
	own := auth.CustomerScope(p)
	if own == nil {
		return asked, nil
	}
	if asked != nil && *asked != *own {
		return nil, apperr.New(apperr.PermissionDenied, "customers may list only their own")
	}
	return own, nil
}

// ---- products ----

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

// checkProvider checks product id's provider plugin and its
// provider_config and returns the config as stored: JSON, its secrets
// sealed (nil when there is no plugin). The plugin must exist and be a
// provider; the config must satisfy the plugin's config schema, keys of the
// product's own (plan) aside.
func (s *Service) checkProvider(ctx context.Context, id uuid.UUID, name *string, cfg map[string]any) ([]byte, error) {
	if name == nil {
		if len(cfg) > 0 {
			return nil, apperr.New(apperr.InvalidArgument, "provider_config needs a provider_plugin")
		}
		return nil, nil
	}
	schema, err := s.providerSchema(ctx, s.db, *name)
	if err != nil {
		return nil, err
	}
	if cfg == nil {
		cfg = map[string]any{}
	}
	return s.providerConfigJSON(id, schema, cfg, append(secrets.SealedLooking(providerConfigField, cfg), schema.MaskSent(cfg)...))
}

// providerSchema is the config schema of provider plugin name.
func (s *Service) providerSchema(ctx context.Context, db store.DB, name string) (*configschema.Schema, error) {
	pl, err := store.GetPlugin(ctx, db, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, apperr.New(apperr.InvalidArgument, "provider plugin %q does not exist", name)
	}
	if err != nil {
		return nil, err
	}
	if pl.Type != string(plugin.FirstPartyProvider) && pl.Type != string(plugin.UpstreamProvider) {
		return nil, apperr.New(apperr.InvalidArgument, "plugin %q is a %s plugin, not a provider", name, pl.Type)
	}
	schema, err := configschema.Of(pl.ConfigSchema)
	if err != nil {
		return nil, apperr.Wrap(apperr.Internal, err, "plugin %q: stored config schema does not parse", pl.Name)
	}
	return schema, nil
}

// providerConfigField names a product's provider settings in messages.
const providerConfigField = "provider_config"

// productOwner is what product id's provider settings are bound to.
func productOwner(id uuid.UUID) secrets.Owner { return secretpass.Products.Owner(id) }

// providerConfigJSON checks cfg (clear) against schema (the product's own
// keys aside) and encodes it for product id, its secrets sealed; problems
// are found beforehand and already named (provider_config.token).
func (s *Service) providerConfigJSON(id uuid.UUID, schema *configschema.Schema, cfg map[string]any, problems []string) ([]byte, error) {
	for _, p := range schema.ProblemsBesideOwnKeys(cfg) {
		problems = append(problems, "provider_"+p) // config.token → provider_config.token
	}
	if len(problems) > 0 {
		return nil, apperr.New(apperr.InvalidArgument, "%s", strings.Join(problems, "; "))
	}
	sealed, err := s.keys.SealConfig(productOwner(id), schema.SecretPaths(), cfg)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(sealed)
	if err != nil {
		return nil, apperr.Wrap(apperr.InvalidArgument, err, "provider_config: not representable as JSON")
	}
	return raw, nil
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
		before, err := store.LockProduct(ctx, tx, id)
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
		if out, err = store.UpdateProduct(ctx, tx, next, now); err != nil {
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
	orders, err := store.LockOrdersToReprice(ctx, tx, prod.ID, nonFinalStatuses(), billing)
	if err != nil {
		return 0, err
	}
	for _, before := range orders {
		after, err := store.SetOrderBilling(ctx, tx, before.ID, billing, at)
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

// ---- orders ----

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

// frozenProviderConfig is the copy of prod's provider settings order
// orderID keeps in its item: the secrets sealed for the product opened and
// sealed again bound to the order, so that the copy is the order's own — a
// later change of the product leaves it as it was placed, and it cannot be
// moved to another order or back into a product. Settings that do not
// decrypt are FailedPrecondition: the product cannot be ordered until an
// admin sends its secrets again.
func (s *Service) frozenProviderConfig(prod store.Product, orderID uuid.UUID) (json.RawMessage, error) {
	raw := prod.ProviderConfig
	if len(raw) == 0 {
		return json.RawMessage("{}"), nil
	}
	if !secrets.ContainsSealed(raw) {
		return json.RawMessage(raw), nil
	}
	cfg, err := secrets.DecodeConfig(raw)
	if err != nil {
		return nil, apperr.Wrap(apperr.Internal, err, "product %s: stored provider_config is not a JSON object", prod.ID)
	}
	var sealedPaths [][]string
	secrets.VisitStrings(cfg, func(path []string, v string) (string, bool) {
		if secrets.IsSealed(v) {
			sealedPaths = append(sealedPaths, path)
		}
		return "", false
	})
	opened, err := s.keys.OpenConfig(productOwner(prod.ID), cfg)
	if err != nil {
		return nil, apperr.Wrap(apperr.FailedPrecondition, err, "product %s cannot be ordered: its provider settings do not decrypt with the keys of [secrets]", prod.ID)
	}
	frozen, err := s.keys.SealConfig(secretpass.Orders.Owner(orderID), sealedPaths, opened)
	if err != nil {
		return nil, err
	}
	out, err := json.Marshal(frozen)
	if err != nil {
		return nil, err
	}
	return out, nil
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
	prod, err := store.GetProduct(ctx, s.db, productID)
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
	o, err := store.GetOrder(ctx, s.db, id)
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
		o, err := store.GetOrderForUpdate(ctx, tx, id)
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
