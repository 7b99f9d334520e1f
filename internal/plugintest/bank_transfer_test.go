package plugintest_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/plugintest"
)

func bankConfig() map[string]any {
	return map[string]any{
		"bank_name":      "Example Bank",
		"account_name":   "Rustbill Ltd",
		"account_number": "DE89 3704 0044 0532 0130 00",
		"currencies":     []any{"USD"},
	}
}

func bankInput() map[string]any {
	return map[string]any{
		"payment_id": "3f2504e0-4f89-11d3-9a0c-0305e82c3301",
		"order_id":   "ord-9",
		"amount":     "12.30",
		"currency":   "USD",
		"subject":    "VPS",
	}
}

func TestBankTransferInstructionsCarryAmountAndReference(t *testing.T) {
	t.Parallel()
	p := plugintest.Load(t, "gateway/bank_transfer.lua", plugin.Options{})
	res := plugintest.Call(t, p, "create_payment", bankConfig(), bankInput())
	require.Equal(t, "", res["payment_url"])
	require.Equal(t, "", res["qr_code"])
	require.Equal(t, "3F2504E0", res["gateway_payment_id"])
	// The reference the customer quotes is the one the API searches by.
	require.Equal(t, payment.Reference(uuid.MustParse(bankInput()["payment_id"].(string))), res["gateway_payment_id"])
	text := res["instructions"].(string)
	require.Contains(t, text, "12.30 USD")
	require.Contains(t, text, "3F2504E0")
	require.Contains(t, text, "DE89 3704 0044 0532 0130 00")
	require.Contains(t, text, "Rustbill Ltd")
}

func TestBankTransferUsesTheConfiguredTemplate(t *testing.T) {
	t.Parallel()
	p := plugintest.Load(t, "gateway/bank_transfer.lua", plugin.Options{})
	cfg := bankConfig()
	cfg["instructions_template"] = "请转账 {amount} {currency}（100% 到账）至 {account_number}，备注 {reference}；{unknown} 保留"
	res := plugintest.Call(t, p, "create_payment", cfg, bankInput())
	require.Equal(t, "请转账 12.30 USD（100% 到账）至 DE89 3704 0044 0532 0130 00，备注 3F2504E0；{unknown} 保留", res["instructions"])
}

func TestBankTransferIsConfirmedAndRefundedByAnAdmin(t *testing.T) {
	t.Parallel()
	p := plugintest.Load(t, "gateway/bank_transfer.lua", plugin.Options{})
	cfg := bankConfig()

	q := plugintest.Call(t, p, "query_payment", cfg, map[string]any{"payment_id": "3f2504e0", "gateway_payment_id": "3F2504E0"})
	require.Equal(t, "pending", q["status"])

	cb := plugintest.Call(t, p, "parse_callback", cfg, map[string]any{"method": "POST", "payload": "paid=1"})
	require.Equal(t, map[string]any{"valid": false, "reason": "bank transfers are confirmed by an admin"}, cb)

	r := plugintest.Call(t, p, "refund", cfg, map[string]any{
		"payment_id": "3f2504e0-4f89-11d3-9a0c-0305e82c3301", "amount": "5.00", "currency": "USD",
	})
	require.Equal(t, "pending", r["status"])
	require.Contains(t, r["message"], "refund manually")
	require.Contains(t, r["message"], "5.00 USD")

	info := plugintest.Call(t, p, "info", nil, nil)
	require.Equal(t, false, info["supports_query"])
}

func TestBankTransferTestConfig(t *testing.T) {
	t.Parallel()
	p := plugintest.Load(t, "gateway/bank_transfer.lua", plugin.Options{})
	res := plugintest.Call(t, p, "test_config", bankConfig(), nil)
	require.Equal(t, true, res["ok"])

	res = plugintest.Call(t, p, "test_config", map[string]any{"bank_name": "x"}, nil)
	require.Equal(t, false, res["ok"])
	require.Contains(t, res["message"], "account_name")

	cfg := bankConfig()
	cfg["instructions_template"] = "pay {amount}"
	res = plugintest.Call(t, p, "test_config", cfg, nil)
	require.Equal(t, false, res["ok"])
	require.Contains(t, res["message"], "{reference}")

	_, err := plugintest.CallErr(p, "create_payment", map[string]any{}, bankInput())
	require.Error(t, err)
}

func TestBankTransferTakesTheCurrenciesItsInterfaceNames(t *testing.T) {
	t.Parallel()
	p := plugintest.Load(t, "gateway/bank_transfer.lua", plugin.Options{})
	info := plugintest.Call(t, p, "info", nil, nil)
	require.Equal(t, []any{"*"}, info["currencies"], "the account decides, so the interface config names them")
	schema := plugintest.Call(t, p, "config_schema", nil, nil)
	require.Contains(t, schema["required"], "currencies")
	require.Equal(t, "array", schema["properties"].(map[string]any)["currencies"].(map[string]any)["type"])

	cfg := bankConfig()
	cfg["currencies"] = []any{"EUR"}
	_, err := plugintest.CallErr(p, "create_payment", cfg, bankInput())
	require.ErrorContains(t, err, "the account does not take USD")

	delete(cfg, "currencies")
	_, err = plugintest.CallErr(p, "create_payment", cfg, bankInput())
	require.ErrorContains(t, err, "the account does not take USD", "an account without currencies takes none")
	res := plugintest.Call(t, p, "test_config", cfg, nil)
	require.Equal(t, false, res["ok"])
	require.Contains(t, res["message"], "currencies")
}
