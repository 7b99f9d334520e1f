package fulfillment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/secretpass"
	"github.com/rustbill/paymentd/internal/secrets"
	"github.com/rustbill/paymentd/internal/store"
)

// ProvisionRequest is what a provider needs to set up an order's service.
type ProvisionRequest struct {
	Order   store.Order
	Product store.Product
	// Instance is the order's instance row (status provisioning); its id
	// is ours, the provider answers with its own (the external id).
	Instance store.Instance
}

// Provisioner sets up the service an order bought. It is called at least
// once per order and must be idempotent on the order (a retry after a lost
// answer must find the machine the first call made, not make a second).
type Provisioner interface {
	Provision(ctx context.Context, req ProvisionRequest) (externalID string, details json.RawMessage, err error)
	// Terminate ends req.Instance (provisioned: it has an external id) at
	// its provider. Ending an instance the provider no longer has is not an
	// error.
	Terminate(ctx context.Context, req ProvisionRequest) error
	// Suspend suspends req.Instance (provisioned, not terminated) at its
	// provider: the customer's service stops answering until Unsuspend.
	// Suspending a suspended instance is not an error.
	Suspend(ctx context.Context, req ProvisionRequest) error
	// Unsuspend brings a suspended req.Instance back to running. Resuming a
	// running instance is not an error.
	Unsuspend(ctx context.Context, req ProvisionRequest) error
}

// ErrRefused marks a provisioning failure the provider reported as final:
// the order is cancelled at once instead of after the last attempt.
var ErrRefused = errors.New("provisioning refused by the provider")

// PluginProvisioner provisions through the product's provider plugin
// (products.provider_plugin), called as provision(config_json, input_json):
//
//	config_json  the plugin's configuration from the registry (API URL,
//	             token); when the registry keeps none, the product's
//	             provider_config, its secrets decrypted
//	input_json   {"order_id", "instance_id", "customer_id",
//	              "product": provider_config (decrypted) + {"id", "name"}}
//
// The product's settings are decrypted here, for the call and nowhere
// else; settings that do not decrypt fail the call (an ordinary error:
// retried, and the last attempt cancels the order) and the plugin is never
// called with a ciphertext.
//
// An answer with status provisioning or running is success (the instance
// then runs: the order is paid for and the provider has it). Any other
// status is ErrRefused. A failed call (script error, timeout, open circuit,
// plugin not loaded) is an ordinary error: the event is retried, and the
// last attempt cancels the order.
type PluginProvisioner struct {
	plugins plugin.Plugins
	keys    *secrets.Keyring
}

// NewPluginProvisioner returns a provisioner over the plugin registry that
// decrypts products' provider settings with keys ([secrets]; nil: none).
func NewPluginProvisioner(plugins plugin.Plugins, keys *secrets.Keyring) *PluginProvisioner {
	return &PluginProvisioner{plugins: plugins, keys: keys}
}

// productConfig is p's provider_config with its secrets decrypted: what
// the plugin gets.
func (p *PluginProvisioner) productConfig(prod store.Product) (string, error) {
	if len(prod.ProviderConfig) == 0 {
		return "", nil
	}
	return p.keys.OpenRaw(secretpass.Products.Owner(prod.ID), prod.ProviderConfig)
}

type provisionAnswer struct {
	ExternalID string          `json:"external_id"`
	Status     string          `json:"status"`
	Details    json.RawMessage `json:"details"`
	Message    string          `json:"message"`
}

// Provision implements Provisioner.
func (p *PluginProvisioner) Provision(ctx context.Context, req ProvisionRequest) (string, json.RawMessage, error) {
	if req.Product.ProviderPlugin == nil {
		return "", nil, errors.New("the product has no provider plugin")
	}
	name := *req.Product.ProviderPlugin
	c, config, ok := p.plugins.Get(name)
	if !ok {
		return "", nil, fmt.Errorf("provider plugin %q is not loaded", name)
	}
	productConfig, err := p.productConfig(req.Product)
	if err != nil {
		return "", nil, fmt.Errorf("provider plugin %s: %w", name, err)
	}
	if config == "" {
		config = productConfig
	}
	product := map[string]any{}
	if productConfig != "" {
		_ = json.Unmarshal([]byte(productConfig), &product) // not an object: no extra fields
	}
	product["id"] = req.Product.ID.String()
	product["name"] = req.Product.Name
	in, err := json.Marshal(map[string]any{
		"order_id":    req.Order.ID.String(),
		"instance_id": req.Instance.ID.String(),
		"customer_id": req.Order.CustomerID.String(),
		"product":     product,
	})
	if err != nil {
		return "", nil, err
	}
	out, err := c.Call(ctx, "provision", config, string(in))
	if err != nil {
		return "", nil, fmt.Errorf("provider plugin %s: %w", name, err)
	}
	var a provisionAnswer
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		return "", nil, fmt.Errorf("provider plugin %s answered no JSON: %w", name, err)
	}
	switch a.Status {
	case store.InstanceProvisioning, store.InstanceRunning:
	default:
		msg := a.Message
		if msg == "" {
			msg = "status " + a.Status
		}
		return "", nil, fmt.Errorf("%w: %s: %s", ErrRefused, name, msg)
	}
	if a.ExternalID == "" {
		return "", nil, fmt.Errorf("provider plugin %s answered no external_id", name)
	}
	details := a.Details
	if len(details) == 0 || string(details) == "null" {
		details = json.RawMessage("{}")
	}
	return a.ExternalID, details, nil
}

type actionAnswer struct {
	OK      bool   `json:"ok"`
	Status  string `json:"status"`
	Message string `json:"message"`
}

// Terminate implements Provisioner: terminate(config_json,
// {"instance_id", "external_id"}) of the instance's provider plugin, whose
// answer {"ok", "status", "message"} must be ok or say terminated.
func (p *PluginProvisioner) Terminate(ctx context.Context, req ProvisionRequest) error {
	return p.action(ctx, req, "terminate", store.InstanceTerminated)
}

// Suspend implements Provisioner: suspend(config_json, {"instance_id",
// "external_id"}), whose answer must be ok or say suspended.
func (p *PluginProvisioner) Suspend(ctx context.Context, req ProvisionRequest) error {
	return p.action(ctx, req, "suspend", store.InstanceSuspended)
}

// Unsuspend implements Provisioner: unsuspend(config_json, {"instance_id",
// "external_id"}), whose answer must be ok or say running.
func (p *PluginProvisioner) Unsuspend(ctx context.Context, req ProvisionRequest) error {
	return p.action(ctx, req, "unsuspend", store.InstanceRunning)
}

// action calls fn(config_json, {"instance_id", "external_id"}) of the
// instance's provider plugin (the instance's, else its product's), with the
// registry's configuration or else the product's decrypted settings. The
// answer {"ok", "status", "message"} is success when ok or when status is
// want (the instance is there already). Anything else — a refusal, a failed
// call — is an ordinary error: the event that asked is retried.
func (p *PluginProvisioner) action(ctx context.Context, req ProvisionRequest, fn, want string) error {
	name := req.Product.ProviderPlugin
	if req.Instance.ProviderPlugin != nil {
		name = req.Instance.ProviderPlugin
	}
	if name == nil {
		return errors.New("the instance has no provider plugin")
	}
	c, config, ok := p.plugins.Get(*name)
	if !ok {
		return fmt.Errorf("provider plugin %q is not loaded", *name)
	}
	if config == "" {
		var err error
		if config, err = p.productConfig(req.Product); err != nil {
			return fmt.Errorf("provider plugin %s: %w", *name, err)
		}
	}
	in, err := json.Marshal(map[string]string{"instance_id": req.Instance.ID.String(), "external_id": req.Instance.ExternalID})
	if err != nil {
		return err
	}
	out, err := c.Call(ctx, fn, config, string(in))
	if err != nil {
		return fmt.Errorf("provider plugin %s: %w", *name, err)
	}
	var a actionAnswer
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		return fmt.Errorf("provider plugin %s answered no JSON: %w", *name, err)
	}
	if !a.OK && a.Status != want {
		return fmt.Errorf("provider plugin %s did not %s instance %s: %s", *name, fn, req.Instance.ExternalID, a.Message)
	}
	return nil
}

// PlanChanger moves a provisioned instance to another plan (a plan change
// took effect: plan_changed). A Provisioner that is not one leaves the
// instance as it is.
type PlanChanger interface {
	// ChangePlan moves req.Instance to req.Product, the order's new
	// product. Asking for the plan the instance has is not an error.
	ChangePlan(ctx context.Context, req ProvisionRequest) error
}

var _ PlanChanger = (*PluginProvisioner)(nil)

// ChangePlan implements PlanChanger: change_plan(config_json,
// {"instance_id", "external_id", "product"}) of the instance's provider
// plugin, product being the new product's decrypted settings with its id
// and name (as provision gets them); the answer {"ok", "status",
// "message"} must be ok or say running. A plugin that does not declare
// change_plan (it is optional in the contract) is not asked: nil.
func (p *PluginProvisioner) ChangePlan(ctx context.Context, req ProvisionRequest) error {
	name := req.Product.ProviderPlugin
	if req.Instance.ProviderPlugin != nil {
		name = req.Instance.ProviderPlugin
	}
	if name == nil {
		return nil // nothing to provision, nothing to change
	}
	c, config, ok := p.plugins.Get(*name)
	if !ok {
		return fmt.Errorf("provider plugin %q is not loaded", *name)
	}
	productConfig, err := p.productConfig(req.Product)
	if err != nil {
		return fmt.Errorf("provider plugin %s: %w", *name, err)
	}
	if config == "" {
		config = productConfig
	}
	product := map[string]any{}
	if productConfig != "" {
		_ = json.Unmarshal([]byte(productConfig), &product) // not an object: no extra fields
	}
	product["id"] = req.Product.ID.String()
	product["name"] = req.Product.Name
	in, err := json.Marshal(map[string]any{
		"instance_id": req.Instance.ID.String(), "external_id": req.Instance.ExternalID, "product": product,
	})
	if err != nil {
		return err
	}
	out, err := c.Call(ctx, plugin.ChangePlan, config, string(in))
	if errors.Is(err, plugin.ErrUnknownFunction) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("provider plugin %s: %w", *name, err)
	}
	var a actionAnswer
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		return fmt.Errorf("provider plugin %s answered no JSON: %w", *name, err)
	}
	if !a.OK && a.Status != store.InstanceRunning {
		return fmt.Errorf("provider plugin %s did not change the plan of instance %s: %s", *name, req.Instance.ExternalID, a.Message)
	}
	return nil
}
