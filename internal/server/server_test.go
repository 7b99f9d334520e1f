package server_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"
	"github.com/stretchr/testify/require"
	reflectv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/server"
)

// unimplementedPayments stands in for the payment domain: these tests are
// about the transport, so every operation that passes validation answers
// Unimplemented.
type unimplementedPayments struct {
	paymentpbconnect.UnimplementedPaymentServiceHandler
}

type fakeDB struct{ err atomic.Pointer[error] }

func (f *fakeDB) Ping(context.Context) error {
	if p := f.err.Load(); p != nil {
		return *p
	}
	return nil
}

type bundle struct {
	baseURL    string
	db         *fakeDB
	h2c        *http.Client
	middleHits *atomic.Int64
	stop       func() error
}

func setup(t *testing.T, mutate ...func(*server.Options)) *bundle {
	t.Helper()
	o := server.Options{ShutdownTimeout: 5 * time.Second}
	for _, m := range mutate {
		m(&o)
	}
	opts, err := server.HandlerOptions(o, nil)
	require.NoError(t, err)
	path, h := paymentpbconnect.NewPaymentServiceHandler(unimplementedPayments{}, opts...)
	db := &fakeDB{}
	var hits atomic.Int64
	o.DB = db
	o.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	o.Services = []server.Service{{
		Name: paymentpbconnect.PaymentServiceName, Path: path, Handler: h,
	}}
	o.Limits = []server.Middleware{func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			next.ServeHTTP(w, r)
		})
	}}
	srv := server.New(o)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()

	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	h2c := &http.Client{Transport: &http.Transport{Protocols: &protocols}}

	b := &bundle{baseURL: "http://" + ln.Addr().String(), db: db, h2c: h2c, middleHits: &hits}
	var stopped bool
	b.stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		return <-done
	}
	t.Cleanup(func() {
		h2c.CloseIdleConnections()
		require.NoError(t, b.stop())
	})
	return b
}

const validID = "7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f"

func TestHealthAnswersEmpty200BeforeAnyMiddleware(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.db.err.Store(ptr(errors.New("database down")))
	resp, err := http.Get(b.baseURL + "/health")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Empty(t, body)
	require.Zero(t, b.middleHits.Load(), "/health must bypass every middleware layer")
}

func TestReadyFollowsTheDatabase(t *testing.T) {
	t.Parallel()
	b := setup(t)
	get := func() int {
		resp, err := http.Get(b.baseURL + "/ready")
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, get())
	b.db.err.Store(ptr(errors.New("connection refused")))
	require.Equal(t, http.StatusServiceUnavailable, get())
	b.db.err.Store(nil)
	require.Equal(t, http.StatusOK, get())
}

func TestGRPCOverCleartextHTTP2ReachesTheHandler(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client := paymentpbconnect.NewPaymentServiceClient(b.h2c, b.baseURL, connect.WithGRPC())
	_, err := client.GetPayment(context.Background(), connect.NewRequest(&paymentpb.GetPaymentRequest{Id: validID}))
	require.Equal(t, connect.CodeUnimplemented, connect.CodeOf(err), "%v", err)
}

func TestInvalidRequestIsRejectedNamingTheField(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, proto := range []connect.ClientOption{connect.WithGRPC(), connect.WithGRPCWeb(), connect.WithProtoJSON()} {
		client := paymentpbconnect.NewPaymentServiceClient(b.h2c, b.baseURL, proto)
		_, err := client.GetPayment(context.Background(), connect.NewRequest(&paymentpb.GetPaymentRequest{Id: "not-a-uuid"}))
		require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
		require.Contains(t, err.Error(), "id: must be a valid UUID")
	}
}

// A NUL in any string is refused before the handler, over every protocol,
// like a protovalidate violation (PostgreSQL cannot store it).
func TestNULInAStringIsRejectedNamingTheField(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, proto := range []connect.ClientOption{connect.WithGRPC(), connect.WithGRPCWeb(), connect.WithProtoJSON()} {
		client := paymentpbconnect.NewPaymentServiceClient(b.h2c, b.baseURL, proto)
		_, err := client.HandleCallback(context.Background(), connect.NewRequest(&paymentpb.PaymentCallbackRequest{
			GatewayInterfaceId: validID, Payload: "a=1&b=\x00",
		}))
		require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
		require.Contains(t, err.Error(), "validation error: payload: must not contain NUL characters")
	}
}

func TestValidationRulesOfTheContract(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client := paymentpbconnect.NewPaymentServiceClient(b.h2c, b.baseURL, connect.WithGRPC())
	ctx := context.Background()
	tests := []struct {
		name string
		call func() error
		want string // "" means the request passes validation (Unimplemented for now)
	}{
		{"create needs order or invoice", func() error {
			_, err := client.CreatePayment(ctx, connect.NewRequest(&paymentpb.CreatePaymentRequest{GatewayInterfaceId: validID, ReturnUrl: "https://shop.example/done"}))
			return err
		}, "order_id or invoice_id is required"},
		{"create with empty invoice id pays the order", func() error {
			_, err := client.CreatePayment(ctx, connect.NewRequest(&paymentpb.CreatePaymentRequest{OrderId: validID, GatewayInterfaceId: validID, ReturnUrl: "https://shop.example/done"}))
			return err
		}, ""},
		{"create with a bad invoice id", func() error {
			_, err := client.CreatePayment(ctx, connect.NewRequest(&paymentpb.CreatePaymentRequest{OrderId: validID, InvoiceId: "x", GatewayInterfaceId: validID, ReturnUrl: "https://shop.example/done"}))
			return err
		}, "invoice_id"},
		{"create without gateway interface", func() error {
			_, err := client.CreatePayment(ctx, connect.NewRequest(&paymentpb.CreatePaymentRequest{OrderId: validID, ReturnUrl: "https://shop.example/done"}))
			return err
		}, "gateway_interface_id"},
		{"create with a javascript return url", func() error {
			_, err := client.CreatePayment(ctx, connect.NewRequest(&paymentpb.CreatePaymentRequest{OrderId: validID, GatewayInterfaceId: validID, ReturnUrl: "javascript:alert(1)"}))
			return err
		}, "return_url"},
		{"list without pagination", func() error {
			_, err := client.ListPayments(ctx, connect.NewRequest(&paymentpb.ListPaymentsRequest{}))
			return err
		}, "pagination"},
		{"list with page size 101", func() error {
			_, err := client.ListPayments(ctx, connect.NewRequest(&paymentpb.ListPaymentsRequest{Pagination: &paymentpb.PageRequest{PageSize: 101}}))
			return err
		}, "pagination.page_size"},
		{"list with page size 100", func() error {
			_, err := client.ListPayments(ctx, connect.NewRequest(&paymentpb.ListPaymentsRequest{Pagination: &paymentpb.PageRequest{PageSize: 100}}))
			return err
		}, ""},
		{"list with an unknown status", func() error {
			_, err := client.ListPayments(ctx, connect.NewRequest(&paymentpb.ListPaymentsRequest{Pagination: &paymentpb.PageRequest{}, Status: proto.String("paid")}))
			return err
		}, "status"},
		{"refund with three decimals", func() error {
			_, err := client.RefundPayment(ctx, connect.NewRequest(&paymentpb.RefundPaymentRequest{PaymentId: validID, Amount: "1.005"}))
			return err
		}, "amount"},
		{"refund with an exponent", func() error {
			_, err := client.RefundPayment(ctx, connect.NewRequest(&paymentpb.RefundPaymentRequest{PaymentId: validID, Amount: "1e3"}))
			return err
		}, "amount"},
		{"refund with empty amount is a full refund", func() error {
			_, err := client.RefundPayment(ctx, connect.NewRequest(&paymentpb.RefundPaymentRequest{PaymentId: validID}))
			return err
		}, ""},
		{"callback without payload", func() error {
			_, err := client.HandleCallback(ctx, connect.NewRequest(&paymentpb.PaymentCallbackRequest{GatewayInterfaceId: validID}))
			return err
		}, "payload"},
		{"query with a bad id", func() error {
			_, err := client.QueryPaymentStatus(ctx, connect.NewRequest(&paymentpb.QueryPaymentStatusRequest{PaymentId: "1"}))
			return err
		}, "payment_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if tt.want == "" {
				require.Equal(t, connect.CodeUnimplemented, connect.CodeOf(err), "%v", err)
				return
			}
			require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestGRPCWebFailureIsHTTP200WithGRPCStatusHeader(t *testing.T) {
	t.Parallel()
	b := setup(t)
	msg, err := proto.Marshal(&paymentpb.GetPaymentRequest{Id: validID})
	require.NoError(t, err)
	var frame bytes.Buffer
	frame.WriteByte(0)
	require.NoError(t, binary.Write(&frame, binary.BigEndian, uint32(len(msg))))
	frame.Write(msg)
	req, err := http.NewRequest(http.MethodPost, b.baseURL+"/billing.payment.PaymentService/GetPayment", &frame)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/grpc-web+proto")
	req.Header.Set("X-Grpc-Web", "1")
	resp, err := http.DefaultClient.Do(req) // HTTP/1.1, as browsers' gRPC-Web
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "12", resp.Header.Get("Grpc-Status"), "12 is UNIMPLEMENTED")
}

func TestConnectJSONOverHTTP1(t *testing.T) {
	t.Parallel()
	b := setup(t)
	resp, err := http.Post(b.baseURL+"/billing.payment.PaymentService/GetPayment", "application/json", strings.NewReader(`{"id":"nope"}`))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, string(body), `"code":"invalid_argument"`)
	require.Contains(t, string(body), "id: must be a valid UUID")
}

func TestReflectionListsThePaymentService(t *testing.T) {
	t.Parallel()
	b := setup(t)
	stream := grpcreflect.NewClient(b.h2c, b.baseURL, connect.WithGRPC()).NewStream(context.Background())
	names, err := stream.ListServices()
	require.NoError(t, err)
	_, _ = stream.Close()
	require.Contains(t, names, protoreflect.FullName(paymentpbconnect.PaymentServiceName))
}

// Older grpcurl and grpc clients speak only grpc.reflection.v1alpha: a client
// of that service lists the same services, and resolves one.
func TestReflectionV1AlphaListsThePaymentService(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client := connect.NewClient[reflectv1alpha.ServerReflectionRequest, reflectv1alpha.ServerReflectionResponse](
		b.h2c, b.baseURL+"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", connect.WithGRPC())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream := client.CallBidiStream(ctx)
	ask := func(req *reflectv1alpha.ServerReflectionRequest) *reflectv1alpha.ServerReflectionResponse {
		t.Helper()
		require.NoError(t, stream.Send(req))
		res, err := stream.Receive()
		require.NoError(t, err)
		require.Nil(t, res.GetErrorResponse(), "%v", res.GetErrorResponse())
		return res
	}
	listed := ask(&reflectv1alpha.ServerReflectionRequest{
		MessageRequest: &reflectv1alpha.ServerReflectionRequest_ListServices{ListServices: "*"},
	})
	var names []string
	for _, s := range listed.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	require.Contains(t, names, paymentpbconnect.PaymentServiceName)

	files := ask(&reflectv1alpha.ServerReflectionRequest{
		MessageRequest: &reflectv1alpha.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: paymentpbconnect.PaymentServiceName},
	})
	var found bool
	for _, raw := range files.GetFileDescriptorResponse().GetFileDescriptorProto() {
		var fd descriptorpb.FileDescriptorProto
		require.NoError(t, proto.Unmarshal(raw, &fd))
		for _, svc := range fd.GetService() {
			if fd.GetPackage()+"."+svc.GetName() == paymentpbconnect.PaymentServiceName {
				found = true
			}
		}
	}
	require.True(t, found, "the descriptor of %s", paymentpbconnect.PaymentServiceName)
	require.NoError(t, stream.CloseRequest())
	require.NoError(t, stream.CloseResponse())
}

func TestOversizedRequestIsResourceExhausted(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *server.Options) { o.MaxRequestBytes = 4096 })
	client := paymentpbconnect.NewPaymentServiceClient(b.h2c, b.baseURL, connect.WithGRPC())
	_, err := client.HandleCallback(context.Background(), connect.NewRequest(&paymentpb.PaymentCallbackRequest{
		GatewayInterfaceId: validID, Payload: strings.Repeat("a", 8192),
	}))
	require.Equal(t, connect.CodeResourceExhausted, connect.CodeOf(err), "%v", err)
}

func TestShutdownFinishesRequestsInFlight(t *testing.T) {
	t.Parallel()
	b := setup(t)
	slow := make(chan struct{})
	release := make(chan struct{})
	b.db.err.Store(nil)
	// A readiness probe blocked inside the database ping stands in for a slow request.
	blocking := &blockingDB{entered: slow, release: release}
	srv := server.New(server.Options{DB: blocking, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()

	got := make(chan int, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String() + "/ready")
		if err != nil {
			got <- -1
			return
		}
		resp.Body.Close()
		got <- resp.StatusCode
	}()
	<-slow
	cancel()
	select {
	case <-done:
		t.Fatal("Serve returned while a request was in flight")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	require.Equal(t, http.StatusOK, <-got)
	require.NoError(t, <-done)
	_, err = net.DialTimeout("tcp", ln.Addr().String(), time.Second)
	require.Error(t, err, "the listener is closed after shutdown")
}

type blockingDB struct {
	entered chan struct{}
	release chan struct{}
}

func (b *blockingDB) Ping(context.Context) error {
	close(b.entered)
	<-b.release
	return nil
}

func ptr[T any](v T) *T { return &v }
