package order_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"buf.build/gen/go/bufbuild/protovalidate/protocolbuffers/go/buf/validate"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/store"
)

// order.BillingCycles is the one list of cycles: both tables' CHECKs and
// comments list the same values, and so do the API's `in` rules.
func TestBillingCyclesAreTheSchemasAndTheAPIs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	want := make([]string, len(order.BillingCycles))
	for i, c := range order.BillingCycles {
		want[i] = string(c)
	}
	for _, table := range []string{"products", "orders"} {
		var check, comment string
		require.NoError(t, b.pool.QueryRow(context.Background(), `
			SELECT pg_get_constraintdef(oid), col_description($1::regclass,
				(SELECT attnum FROM pg_attribute WHERE attrelid = $1::regclass AND attname = 'billing_cycle'))
			FROM pg_constraint WHERE conname = $1 || '_billing_cycle_check'`, table).Scan(&check, &comment))
		var inCheck []string
		for _, m := range regexp.MustCompile(`'(\w+)'`).FindAllStringSubmatch(check, -1) {
			inCheck = append(inCheck, m[1])
		}
		require.Equal(t, want, inCheck, "%s_billing_cycle_check against order.BillingCycles", table)
		require.True(t, strings.HasPrefix(comment, strings.Join(want, " | ")), "COMMENT ON COLUMN %s.billing_cycle: %s", table, comment)
	}
	for _, msg := range []proto.Message{&orderpb.CreateProductRequest{}, &orderpb.UpdateProductRequest{}} {
		field := msg.ProtoReflect().Descriptor().Fields().ByName("billing_cycle")
		rules, _ := proto.GetExtension(field.Options(), validate.E_Field).(*validate.FieldRules)
		require.Equal(t, want, rules.GetString().GetIn(), "%s.billing_cycle's \"in\" rule", field.FullName())
	}
}

func TestCreateProductTakesACycleOneTimeByDefault(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.product(t, "10.00", "CNY")
	require.Equal(t, "one_time", p.BillingCycle)

	m, err := b.svc.CreateProduct(b.asAdmin, order.NewProduct{Name: "VPS", Price: money.MustParse("5.00"), Currency: "CNY", BillingCycle: "monthly"})
	require.NoError(t, err)
	require.Equal(t, "monthly", m.BillingCycle)
	require.Equal(t, "monthly", b.audits(t, "product", m.ID.String())[0].After["billing_cycle"])

	_, err = b.svc.CreateProduct(b.asAdmin, order.NewProduct{Name: "VPS", Price: money.MustParse("5.00"), Currency: "CNY", BillingCycle: "weekly"})
	requireKind(t, err, apperr.InvalidArgument)
	require.ErrorContains(t, err, `billing_cycle "weekly"`)
}

// An order keeps the cycle and price it was bought at; a one-time order has
// no renewal price.
func TestOrderRemembersItsCycleAndRenewalPrice(t *testing.T) {
	t.Parallel()
	b := setup(t)
	once, err := b.svc.CreateOrder(b.asAlice, b.product(t, "10.00", "CNY").ID)
	require.NoError(t, err)
	require.Equal(t, "one_time", once.BillingCycle)
	require.False(t, once.RenewalPrice.Valid)

	o := b.recurringOrder(t, "quarterly", "30.00")
	require.Equal(t, "quarterly", o.BillingCycle)
	require.Equal(t, money.NullAmount{Amount: money.MustParse("30.00"), Valid: true}, o.RenewalPrice)
	require.Equal(t, "quarterly", b.audits(t, "order", o.ID.String())[0].After["billing_cycle"])
}

// The rule of docs/decisions.md, "billing cycles": a product's new cycle or
// price reaches its existing orders only with ApplyToExistingOrders, and
// then only those that are not final.
func TestUpdateProductMovesExistingOrdersOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	open := b.recurringOrder(t, "monthly", "10.00")
	prodID := *open.ProductID
	closed, err := b.svc.CreateOrder(b.asBob, prodID)
	require.NoError(t, err)
	_, err = b.svc.CancelOrder(b.asBob, closed.ID)
	require.NoError(t, err)
	another, err := b.svc.CreateOrder(b.asBob, prodID)
	require.NoError(t, err)

	price := money.MustParse("12.00")
	_, err = b.svc.UpdateProduct(b.asAdmin, prodID, order.ProductUpdate{Price: &price})
	require.NoError(t, err)
	require.Equal(t, "10.00", b.getOrder(t, open.ID).RenewalPrice.Amount.String(), "kept without the flag")

	annual := "annual"
	_, err = b.svc.UpdateProduct(b.asAdmin, prodID, order.ProductUpdate{BillingCycle: &annual, ApplyToExistingOrders: true})
	require.NoError(t, err)
	moved := b.getOrder(t, open.ID)
	require.Equal(t, "annual", moved.BillingCycle)
	require.Equal(t, "12.00", moved.RenewalPrice.Amount.String(), "the product's price as it is after the update")
	require.Equal(t, "10.00", moved.TotalAmount.String(), "what was bought stays")
	rows := b.audits(t, "order", open.ID.String())
	last := rows[len(rows)-1]
	require.Equal(t, order.ActionOrderBillingChange, last.Action)
	require.Equal(t, "monthly", last.Before["billing_cycle"])
	require.Equal(t, "10.00", last.Before["renewal_price"])
	require.Equal(t, "annual", last.After["billing_cycle"])
	require.Equal(t, "12.00", last.After["renewal_price"])
	require.Equal(t, "annual", b.getOrder(t, another.ID).BillingCycle, "every open order moves, not only the first")

	kept := b.getOrder(t, closed.ID)
	require.Equal(t, "monthly", kept.BillingCycle, "a cancelled order has no later periods")
	require.Equal(t, "10.00", kept.RenewalPrice.Amount.String())

	// Back to one-time: the open order has no renewal price any more.
	oneTime := "one_time"
	_, err = b.svc.UpdateProduct(b.asAdmin, prodID, order.ProductUpdate{BillingCycle: &oneTime, ApplyToExistingOrders: true})
	require.NoError(t, err)
	require.Equal(t, "one_time", b.getOrder(t, open.ID).BillingCycle)
	require.False(t, b.getOrder(t, open.ID).RenewalPrice.Valid)

	bogus := "fortnightly"
	_, err = b.svc.UpdateProduct(b.asAdmin, prodID, order.ProductUpdate{BillingCycle: &bogus})
	requireKind(t, err, apperr.InvalidArgument)
	require.ErrorContains(t, err, "billing_cycle")
}

// recurringOrder is a pending order of alice's for a new product of cycle
// and price (CNY).
func (b *bundle) recurringOrder(t *testing.T, cycle, price string) store.Order {
	t.Helper()
	p, err := b.svc.CreateProduct(b.asAdmin, order.NewProduct{Name: "VPS " + cycle, Price: money.MustParse(price), Currency: "CNY", BillingCycle: cycle})
	require.NoError(t, err)
	o, err := b.svc.CreateOrder(b.asAlice, p.ID)
	require.NoError(t, err)
	return o
}
