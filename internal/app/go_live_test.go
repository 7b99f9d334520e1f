package app_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/emptypb"

	gatewaypb "github.com/rustbill/paymentd/gen/billing/gateway"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
)

// The callback URL an admin copies into a gateway's dashboard is, to the
// byte, the notify URL the payments give that gateway.
func TestGatewayInterfaceShowsTheNotifyURLItsPaymentsSend(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	created := e.createPayment(t, e.order(t))
	fo, ok := e.fake.Order(created.GetPayment().GetId())
	require.True(t, ok)

	got, err := e.admin.GetGatewayInterface(context.Background(), with(&gatewaypb.GetGatewayInterfaceRequest{Id: e.epayGW}, e.c.admin))
	require.NoError(t, err)
	require.Equal(t, fo.NotifyURL, got.Msg.GetGatewayInterface().GetCallbackUrl())
	require.Equal(t, e.r.baseURL+"/callbacks/"+e.epayGW, got.Msg.GetGatewayInterface().GetCallbackUrl())

	list, err := e.admin.ListGatewayInterfaces(context.Background(), with(&gatewaypb.ListGatewayInterfacesRequest{Pagination: &paymentpb.PageRequest{}}, e.c.admin))
	require.NoError(t, err)
	require.NotEmpty(t, list.Msg.GetGatewayInterfaces())
	for _, gi := range list.Msg.GetGatewayInterfaces() {
		require.Equal(t, e.r.baseURL+"/callbacks/"+gi.GetId(), gi.GetCallbackUrl())
	}
}

// The reference a bank-transfer customer quotes finds the payment, in
// either case; another reference does not; anything but 8 hexadecimal
// characters is InvalidArgument.
func TestListPaymentsFindsAPaymentByItsTransferReference(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	want := e.createPayment(t, e.order(t)).GetPayment().GetId()
	other := e.createPayment(t, e.order(t)).GetPayment().GetId()
	require.NotEqual(t, want[:8], other[:8])

	find := func(ref string) ([]string, error) {
		res, err := e.payments.ListPayments(context.Background(), with(&paymentpb.ListPaymentsRequest{
			Pagination: &paymentpb.PageRequest{}, Reference: &ref,
		}, e.c.admin))
		if err != nil {
			return nil, err
		}
		var ids []string
		for _, p := range res.Msg.GetPayments() {
			ids = append(ids, p.GetId())
		}
		require.EqualValues(t, len(ids), res.Msg.GetMeta().GetTotal())
		return ids, nil
	}
	for _, ref := range []string{strings.ToUpper(want[:8]), strings.ToLower(want[:8])} {
		ids, err := find(ref)
		require.NoError(t, err)
		require.Equal(t, []string{want}, ids, ref)
	}
	// The customer who paid finds it too (their own payments only).
	ref := strings.ToUpper(want[:8])
	res, err := e.payments.ListPayments(context.Background(), with(&paymentpb.ListPaymentsRequest{Pagination: &paymentpb.PageRequest{}, Reference: &ref}, e.c.customer))
	require.NoError(t, err)
	require.Len(t, res.Msg.GetPayments(), 1)

	miss := "00000000"
	if strings.HasPrefix(want, miss) || strings.HasPrefix(other, miss) {
		miss = "ffffffff"
	}
	ids, err := find(miss)
	require.NoError(t, err)
	require.Empty(t, ids)

	for _, bad := range []string{"", "44B14F8", "44B14F890", "44B14F8G", "44b1-f89", want} {
		_, err := find(bad)
		require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%q: %v", bad, err)
	}
}

// docs/api.md: pagination may be left out; page 0 means 1.
func TestListAuditEntriesWorksWithoutPagination(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	admin := paymentpbconnect.NewPaymentAdminServiceClient(http.DefaultClient, e.r.baseURL)
	res, err := admin.ListAuditEntries(context.Background(), with(&paymentpb.ListAuditEntriesRequest{}, e.c.admin))
	require.NoError(t, err)
	require.NotEmpty(t, res.Msg.GetEntries(), "creating the gateway interface and the product was audited")
	require.Equal(t, uint32(1), res.Msg.GetMeta().GetPage())
}

// connectCode reads a Connect JSON error's code and closes the body.
func connectCode(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var ce struct{ Code, Message string }
	require.NoError(t, json.Unmarshal(body, &ce), "%s", body)
	require.NotEmpty(t, ce.Message)
	return ce.Code
}

// A path no service serves answers an RPC error the caller's protocol
// can read, not a plain-text 404; the plain routes stay as they were.
func TestUnknownProcedureIsUnimplementedInTheCallersProtocol(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	h2c := &http.Client{Transport: &http.Transport{Protocols: &protocols}}
	t.Cleanup(h2c.CloseIdleConnections)

	for _, path := range []string{
		"/billing.payment.PaymentService/NoSuchMethod", // a known service
		"/billing.nothing.NoService/Get",
		"/no/such/path",
	} {
		// Connect (JSON): HTTP 501 and the error as JSON.
		resp, err := http.Post(e.r.baseURL+path, "application/json", strings.NewReader("{}"))
		require.NoError(t, err)
		require.Equal(t, http.StatusNotImplemented, resp.StatusCode, path)
		require.Equal(t, "unimplemented", connectCode(t, resp), path)
		// Not an RPC (a browser's GET): not_found, HTTP 404, still JSON.
		resp, err = http.Get(e.r.baseURL + path)
		require.NoError(t, err)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
		require.Equal(t, "not_found", connectCode(t, resp), path)

		// Connect and gRPC clients both read the code.
		for name, c := range map[string]*connect.Client[emptypb.Empty, emptypb.Empty]{
			"connect": connect.NewClient[emptypb.Empty, emptypb.Empty](http.DefaultClient, e.r.baseURL+path),
			"grpc":    connect.NewClient[emptypb.Empty, emptypb.Empty](h2c, e.r.baseURL+path, connect.WithGRPC()),
		} {
			_, err := c.CallUnary(context.Background(), connect.NewRequest(&emptypb.Empty{}))
			require.Equal(t, connect.CodeUnimplemented, connect.CodeOf(err), "%s %s: %v", name, path, err)
		}
	}

	// gRPC's own framing: HTTP 200 with grpc-status 12 (Unimplemented).
	req, err := http.NewRequest(http.MethodPost, e.r.baseURL+"/billing.payment.PaymentService/NoSuchMethod", strings.NewReader("\x00\x00\x00\x00\x00"))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	resp, err := h2c.Do(req)
	require.NoError(t, err)
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "12", resp.Trailer.Get("Grpc-Status")+resp.Header.Get("Grpc-Status"))

	// The plain routes keep their answers.
	require.Equal(t, http.StatusOK, status(t, e.r.baseURL+"/health"))
	require.Equal(t, http.StatusOK, status(t, e.r.baseURL+"/ready"))
	require.Equal(t, http.StatusNotFound, status(t, e.r.baseURL+"/metrics"), "never on the public port")
	cb, err := http.Get(e.r.baseURL + "/callbacks/" + e.epayGW + "?trade_status=TRADE_SUCCESS")
	require.NoError(t, err)
	_, _ = io.ReadAll(cb.Body)
	cb.Body.Close()
	require.NotEqual(t, "application/json", cb.Header.Get("Content-Type"), "the callback handler answered, not the fallback")
}
