package server

import (
	"strings"
	"testing"

	"buf.build/gen/go/bufbuild/protovalidate/protocolbuffers/go/buf/validate"
	"buf.build/go/protovalidate"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	gatewaypb "github.com/rustbill/paymentd/gen/billing/gateway"
	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
)

func mustStruct(t testing.TB, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	require.NoError(t, err)
	return s
}

func TestNULIsFoundInEveryKindOfStringAndNamedByItsPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		msg  proto.Message
		path string
	}{
		{"top-level string", &identitypb.AdminLoginRequest{Username: "ad\x00min", Password: "long enough"}, "username"},
		{"NUL alone", &identitypb.RegisterRequest{Email: "a@example.com", Password: "long enough", Name: "\x00"}, "name"},
		{"nested message", &paymentpb.ListPaymentsRequest{Pagination: &paymentpb.PageRequest{}, Status: new("pending\x00")}, "status"},
		{"optional string", &paymentpb.ListPaymentsRequest{OrderId: new("\x00")}, "order_id"},
		{"struct value", &gatewaypb.CreateGatewayInterfaceRequest{PluginName: "epay", DisplayName: "x",
			Config: mustStruct(t, map[string]any{"key": "k3y\x00"})}, `config.fields["key"].string_value`},
		{"struct key", &gatewaypb.CreateGatewayInterfaceRequest{PluginName: "epay", DisplayName: "x",
			Config: mustStruct(t, map[string]any{"k\x00": "v"})}, `config.fields["k\x00"]`},
		{"struct in a list in a struct", &orderpb.CreateProductRequest{Name: "VPS", Price: "1.00", Currency: "CNY",
			ProviderConfig: mustStruct(t, map[string]any{"a": []any{1.0, "ok", map[string]any{"b": "x\x00y"}}})},
			`provider_config.fields["a"].list_value.values[2].struct_value.fields["b"].string_value`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			verr := nulError(tc.msg.ProtoReflect())
			require.NotNil(t, verr)
			require.Len(t, verr.Violations, 1)
			v := verr.Violations[0].Proto
			require.Equal(t, tc.path, protovalidate.FieldPathString(v.GetField()))
			require.Equal(t, "paymentd.no_nul", v.GetRuleId())
			require.Equal(t, tc.name == "struct key", v.GetForKey())
			require.Equal(t, "validation error: "+tc.path+": must not contain NUL characters", verr.Error())
			// The path carries what protovalidate's own paths carry.
			for _, el := range v.GetField().GetElements() {
				require.NotZero(t, el.GetFieldNumber())
				require.NotZero(t, el.GetFieldType())
			}
		})
	}
}

func TestRequestsWithoutNULPass(t *testing.T) {
	t.Parallel()
	for _, msg := range []proto.Message{
		&identitypb.AdminLoginRequest{Username: "admin", Password: "long enough"},
		&identitypb.RegisterRequest{Email: "a@example.com", Password: "long enough", Name: "Ünïcode ✓ \x01\x7f"},
		&paymentpb.GetPaymentRequest{},
		&gatewaypb.CreateGatewayInterfaceRequest{PluginName: "epay", DisplayName: "x",
			Config: mustStruct(t, map[string]any{"a": []any{1.0, true, nil, map[string]any{"b": "c"}}})},
	} {
		require.Nil(t, nulError(msg.ProtoReflect()), "%v", msg)
	}
}

// The violation goes out as protovalidate's own do: InvalidArgument, the
// path in the message, buf.validate.Violations as the detail.
func TestNULViolationIsAnInvalidArgumentWithViolationsDetail(t *testing.T) {
	t.Parallel()
	cerr := validationError(nulError((&identitypb.AdminLoginRequest{Username: "ad\x00min"}).ProtoReflect()))
	require.Equal(t, "invalid_argument: validation error: username: must not contain NUL characters", cerr.Error())
	require.Len(t, cerr.Details(), 1)
	detail, err := cerr.Details()[0].Value()
	require.NoError(t, err)
	violations, ok := detail.(*validate.Violations)
	require.True(t, ok, "%T", detail)
	require.Equal(t, "username", protovalidate.FieldPathString(violations.GetViolations()[0].GetField()))
}

// BenchmarkNULCheck is the cost the check adds to every request: go test
// -run '^$' -bench NULCheck -benchmem ./internal/server
func BenchmarkNULCheck(b *testing.B) {
	for _, bc := range []struct {
		name string
		msg  proto.Message
	}{
		{"AdminLogin", &identitypb.AdminLoginRequest{Username: "admin", Password: "a long enough password"}},
		{"HandleCallback_48KiB", &paymentpb.PaymentCallbackRequest{GatewayInterfaceId: "7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f",
			Payload: strings.Repeat("k=v&", 12<<10)}},
		{"ListPayments", &paymentpb.ListPaymentsRequest{Pagination: &paymentpb.PageRequest{Page: 2, PageSize: 50}, Status: new("pending")}},
		{"CreateGatewayInterface_config", &gatewaypb.CreateGatewayInterfaceRequest{PluginName: "epay", DisplayName: "Alipay",
			Config: mustStruct(b, map[string]any{"api_url": "https://pay.example.com/", "pid": "1001", "key": "k3y", "pay_type": "alipay"})}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			m := bc.msg.ProtoReflect()
			b.ReportAllocs()
			for b.Loop() {
				if nulError(m) != nil {
					b.Fatal("found a NUL")
				}
			}
		})
	}
}
