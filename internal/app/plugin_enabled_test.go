package app_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	gatewaypb "github.com/rustbill/paymentd/gen/billing/gateway"
	"github.com/rustbill/paymentd/gen/billing/gateway/gatewaypbconnect"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/config"
)

// An admin disables the epay plugin: customers no longer see its interface
// and cannot start payments through it, while the payments already made
// through it still settle by callback and by status query, and refund. The
// choice survives a reload and is in the audit log; enabling it again
// offers the interface again.
func TestADisabledPluginRefusesNewPaymentsButSettlesAndRefundsOldOnes(t *testing.T) {
	t.Parallel()
	e := startPayments(t, func(c *config.Config) {
		src, err := os.ReadFile(filepath.Join("..", "..", "plugins", "notifier", "webhook.lua"))
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Join(c.Plugins.Dir, "notifier"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(c.Plugins.Dir, "notifier", "webhook.lua"), src, 0o644))
	})
	ctx := context.Background()
	methods := gatewaypbconnect.NewPaymentMethodServiceClient(http.DefaultClient, e.r.baseURL)
	listMethods := func() []*gatewaypb.PaymentMethod {
		res, err := methods.ListPaymentMethods(ctx, with(&gatewaypb.ListPaymentMethodsRequest{}, e.c.customer))
		require.NoError(t, err)
		return res.Msg.GetPaymentMethods()
	}
	pay := func(orderID string) (*paymentpb.CreatePaymentResponse, error) {
		res, err := e.payments.CreatePayment(ctx, with(&paymentpb.CreatePaymentRequest{
			OrderId: orderID, GatewayInterfaceId: e.epayGW, ReturnUrl: "https://shop.example/done",
		}, e.c.customer))
		if err != nil {
			return nil, err
		}
		return res.Msg, nil
	}

	// Before: one payment settled, two waiting for the buyer.
	settled := e.createPayment(t, e.order(t)).GetPayment().GetId()
	require.NoError(t, e.fake.Pay(settled))
	e.waitSettled(t, settled)
	waitingOrder := e.order(t)
	byCallback := e.createPayment(t, waitingOrder).GetPayment().GetId()
	byQuery := e.createPayment(t, e.order(t)).GetPayment().GetId()
	require.Len(t, listMethods(), 1)

	res, err := e.admin.DisablePlugin(ctx, with(&gatewaypb.DisablePluginRequest{Name: "epay"}, e.c.admin))
	require.NoError(t, err)
	p := res.Msg.GetPlugin()
	require.False(t, p.GetEnabled())
	require.Equal(t, "loaded", p.GetStatus(), "disabled is not a load error")
	require.NotEmpty(t, p.GetLoadedVersion(), "the plugin stays loaded")

	// Gone for customers; the interface keeps its own flag.
	require.Empty(t, listMethods())
	gi, err := e.admin.GetGatewayInterface(ctx, with(&gatewaypb.GetGatewayInterfaceRequest{Id: e.epayGW}, e.c.admin))
	require.NoError(t, err)
	require.True(t, gi.Msg.GetGatewayInterface().GetEnabled())
	require.False(t, gi.Msg.GetGatewayInterface().GetPluginEnabled())
	newOrder := e.order(t)
	_, err = pay(newOrder)
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
	require.ErrorContains(t, err, `its plugin "epay" is disabled`)
	_, err = pay(waitingOrder)
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "not even the pending payment again: %v", err)

	// Money already on its way still lands: the gateway's callback ...
	require.NoError(t, e.fake.Pay(byCallback))
	e.waitSettled(t, byCallback)
	// ... and an admin's status query.
	e.fake.DropNotify(true)
	require.NoError(t, e.fake.Pay(byQuery))
	q, err := e.payments.QueryPaymentStatus(ctx, with(&paymentpb.QueryPaymentStatusRequest{PaymentId: byQuery}, e.c.admin))
	require.NoError(t, err)
	require.Equal(t, "success", q.Msg.GetPayment().GetStatus())
	// And money goes back.
	ref, err := e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: settled, Amount: "5.00"}, e.c.admin))
	require.NoError(t, err)
	require.Equal(t, "5.00", ref.Msg.GetPayment().GetRefundedAmount())
	require.Len(t, e.fake.Refunds(), 1)

	// A reload does not undo the admin's choice.
	_, err = e.admin.ReloadPlugins(ctx, with(&gatewaypb.ReloadPluginsRequest{}, e.c.admin))
	require.NoError(t, err)
	got, err := e.admin.GetPlugin(ctx, with(&gatewaypb.GetPluginRequest{Name: "epay"}, e.c.admin))
	require.NoError(t, err)
	require.False(t, got.Msg.GetPlugin().GetEnabled())
	require.Empty(t, listMethods())

	// Enabled again: offered again, and payments go through.
	en, err := e.admin.EnablePlugin(ctx, with(&gatewaypb.EnablePluginRequest{Name: "epay"}, e.c.admin))
	require.NoError(t, err)
	require.True(t, en.Msg.GetPlugin().GetEnabled())
	require.Len(t, listMethods(), 1)
	created, err := pay(newOrder)
	require.NoError(t, err)
	require.Equal(t, "pending", created.GetPayment().GetStatus())

	// Both changes are in the plugin's audit trail, by the admin.
	audit, err := paymentpbconnect.NewPaymentAdminServiceClient(http.DefaultClient, e.r.baseURL).ListAuditEntries(ctx, with(&paymentpb.ListAuditEntriesRequest{
		EntityType: "plugin", EntityId: "epay", Pagination: &paymentpb.PageRequest{PageSize: 100},
	}, e.c.admin))
	require.NoError(t, err)
	var actions []string
	for _, a := range audit.Msg.GetEntries() {
		if a.GetAction() == "plugin.enable" || a.GetAction() == "plugin.disable" {
			require.Equal(t, "admin", a.GetActorKind())
			require.NotEmpty(t, a.GetActorId())
			actions = append(actions, a.GetAction())
		}
	}
	require.Equal(t, []string{"plugin.enable", "plugin.disable"}, actions, "newest first")
}

func TestPluginEnableAndDisableAnswerClearErrors(t *testing.T) {
	t.Parallel()
	dir := pluginDir(t)
	src, err := os.ReadFile(filepath.Join("..", "..", "plugins", "notifier", "webhook.lua"))
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "notifier"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notifier", "webhook.lua"), src, 0o644))
	_, c, cl := startWithPlugins(t, dir)
	ctx := context.Background()

	disable := func(name string) error {
		_, err := cl.admin.DisablePlugin(ctx, with(&gatewaypb.DisablePluginRequest{Name: name}, c.admin))
		return err
	}
	err = disable("")
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
	require.ErrorContains(t, err, "name")
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(disable("no-such-plugin")))
	err = disable("webhook")
	require.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err), "%v", err)
	require.ErrorContains(t, err, "only gateway plugins can be disabled")
	_, err = cl.admin.EnablePlugin(ctx, with(&gatewaypb.EnablePluginRequest{Name: "no-such-plugin"}, c.admin))
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(err))

	// Twice is the same as once.
	require.NoError(t, disable("bank_transfer"))
	require.NoError(t, disable("bank_transfer"))
	// No interface of a disabled plugin can be created.
	_, err = cl.admin.CreateGatewayInterface(ctx, with(&gatewaypb.CreateGatewayInterfaceRequest{
		PluginName: "bank_transfer", DisplayName: "Bank",
		Config: mustStruct(t, map[string]any{"bank_name": "B", "account_name": "A", "account_number": "1", "currencies": []any{"CNY"}}),
	}, c.admin))
	require.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err), "%v", err)
	require.ErrorContains(t, err, `plugin "bank_transfer" is disabled`)
}
