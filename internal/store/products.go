package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// The parameters of the queries run through Q.
type (
	UpdateProductParams = dbsqlc.UpdateProductParams
)

// Product is a products row.
type Product = dbsqlc.Product

// NewProduct is what InsertProduct writes; a new product is enabled.
type NewProduct struct {
	// ID is the caller's: secrets in ProviderConfig are encrypted bound to
	// it. uuid.Nil: a new random one.
	ID             uuid.UUID
	Name           string
	Description    string
	Price          money.Amount
	Currency       string
	ProviderPlugin *string
	// ProviderConfig is a JSON object; nil: {}.
	ProviderConfig []byte
	CreatedAt      time.Time
	// BillingCycle is one_time or a recurring cycle; Price is per cycle.
	// "" is one_time.
	BillingCycle string
}

// InsertProduct adds a product to the catalogue. A provider plugin that does
// not exist fails with ErrForeignKeyViolation.
func InsertProduct(ctx context.Context, db DB, p NewProduct) (Product, error) {
	if p.ID == uuid.Nil {
		p.ID = uuid.New()
	}
	cfg := p.ProviderConfig
	if cfg == nil {
		cfg = []byte("{}")
	}
	if p.BillingCycle == "" {
		p.BillingCycle = OneTime
	}
	row, err := dbsqlc.New(db).InsertProduct(ctx, dbsqlc.InsertProductParams{
		ID:             p.ID,
		Name:           p.Name,
		Description:    p.Description,
		Price:          p.Price,
		Currency:       p.Currency,
		BillingCycle:   p.BillingCycle,
		ProviderPlugin: p.ProviderPlugin,
		ProviderConfig: cfg,
		CreatedAt:      p.CreatedAt,
	})
	return row, MapError(err)
}

// ListProducts returns one page of products, newest first, and the number of
// products matching; enabled nil lists enabled and disabled ones.
func ListProducts(ctx context.Context, db DB, enabled *bool, limit, offset int64) ([]Product, int64, error) {
	q := dbsqlc.New(db)
	return countThenList(func() (int64, error) { return q.CountProducts(ctx, enabled) }, offset,
		func() ([]Product, error) {
			return q.ListProducts(ctx, dbsqlc.ListProductsParams{Enabled: enabled, RowLimit: limit, RowOffset: offset})
		})
}
