package payment

import (
	"context"
	"slices"
	"strings"

	"github.com/google/uuid"
)

// Payment methods (payments.method).
const (
	methodGateway = "gateway"
	methodBalance = "balance"
)

// Caller runs one contract function of a loaded plugin: fn(configJSON,
// inputJSON) → a JSON string (docs/plugins.md). *plugin.Plugin satisfies it.
type Caller interface {
	Call(ctx context.Context, fn, configJSON, inputJSON string) (string, error)
}

// Gateway is one gateway interface, ready to call.
type Gateway struct {
	InterfaceID uuid.UUID
	PluginName  string
	DisplayName string
	Enabled     bool
	// PluginDisabled is an admin's DisablePlugin of the interface's plugin:
	// like a disabled interface, it takes no new payments, but it settles
	// and refunds the payments already made through it.
	PluginDisabled bool
	// ConfigJSON is the interface's full configuration, secrets included: it
	// goes to the plugin and nowhere else.
	ConfigJSON string
	// Plugin is nil when the plugin is disabled or failed to load.
	Plugin Caller
	// Currencies are the ISO 4217 codes the interface takes new payments
	// in: its plugin's info().currencies, narrowed (or, for a plugin whose
	// merchant account decides, named) by the interface config's
	// "currencies". Empty: none — a plugin that declares nothing is never
	// assumed to take the order's currency (docs/decisions.md).
	Currencies []string
	// SavesMethods: the plugin declares info().saves_payment_methods and
	// defines charge_saved and remove_saved (docs/plugins.md).
	SavesMethods bool
	// CallbackRefusal is the answer body of a refused callback the plugin
	// declares (info().callback_refusal), nil when it declares none: the
	// refusal is then a short plain-text reason.
	CallbackRefusal *CallbackRefusal
}

// CallbackRefusal is the body a gateway expects when its notification is
// refused (WeChat Pay: {"code":"FAIL","message":"失败"}), sent with the
// refusal's 4xx or 5xx status instead of the short plain-text reason.
type CallbackRefusal struct {
	ContentType string `json:"content_type"`
	Body        string `json:"body"`
}

// Takes reports whether the interface takes new payments in currency.
func (g Gateway) Takes(currency string) bool { return slices.Contains(g.Currencies, currency) }

// takesText is what an interface takes, for messages.
func (g Gateway) takesText() string { return currenciesText(g.Currencies) }

// currenciesText is a list of currencies for messages: "CNY, USD", or "no
// currency".
func currenciesText(codes []string) string {
	if len(codes) == 0 {
		return "no currency"
	}
	return strings.Join(codes, ", ")
}

// Gateways looks gateway interfaces up. The plugin registry implements it;
// Get answers an apperr NotFound error for an unknown interface id.
type Gateways interface {
	Get(ctx context.Context, interfaceID uuid.UUID) (Gateway, error)
}
