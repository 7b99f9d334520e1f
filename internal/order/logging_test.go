package order_test

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
)

// The order domain logs to the logger it is given (the service's, with
// the operator's format and level), not to the process default.
// (NewService's `log == nil` negated replaced every given logger with
// slog.Default(), and no test noticed.)
func TestTheOrderDomainLogsToTheLoggerItIsGiven(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var buf bytes.Buffer
	svc := order.NewService(b.pool, currencies, b.keys, nil, slog.New(slog.NewTextHandler(&buf, nil)))

	p, err := svc.CreateProduct(b.asAdmin, order.NewProduct{Name: "logged", Price: money.MustParse("7.00"), Currency: "CNY"})
	require.NoError(t, err)
	require.Contains(t, buf.String(), `msg="product created"`)
	require.Contains(t, buf.String(), "product_id="+p.ID.String())
}
