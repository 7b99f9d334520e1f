package orderrpc_test

import (
	"net/http"
	"testing"

	"connectrpc.com/connect"

	"github.com/rustbill/paymentd/gen/billing/order/orderpbconnect"
	"github.com/rustbill/paymentd/internal/order/orderrpc"
	"github.com/rustbill/paymentd/internal/ordertest"
	"github.com/rustbill/paymentd/internal/rpctest"
)

// wireBundle is ordertest's bundle (a database of one's own, the order
// domain over it, two CNY customers and an admin) with OrderService served
// over it by rpctest, and clients of it over Connect and gRPC. A caller is
// named by rpctest.Admin or rpctest.Customer.
type wireBundle struct {
	*ordertest.Bundle
	client orderpbconnect.OrderServiceClient
	grpc   orderpbconnect.OrderServiceClient
}

func setupWire(t *testing.T) *wireBundle {
	t.Helper()
	b := ordertest.Setup(t)
	srv := rpctest.Serve(t, orderrpc.Policy, nil, func(opts ...connect.HandlerOption) (string, http.Handler) {
		return orderpbconnect.NewOrderServiceHandler(orderrpc.NewHandler(b.Svc), opts...)
	})
	return &wireBundle{
		Bundle: b,
		client: orderpbconnect.NewOrderServiceClient(srv.Client(), srv.URL),
		grpc:   orderpbconnect.NewOrderServiceClient(srv.Client(), srv.URL, connect.WithGRPC()),
	}
}

func (w *wireBundle) admin() string { return rpctest.Admin(w.AdminID) }

func ptr[T any](v T) *T { return &v }
