package notify

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/store"
)

// WebhookChannel delivers notifications through a notifier plugin
// (plugins/notifier/webhook.lua: an HMAC-signed POST), one configured
// endpoint per recipient name. The plugin decides success and whether a
// failure is worth retrying.
type WebhookChannel struct {
	plugins    plugin.Plugins
	pluginName string
	endpoints  map[string]Webhook
}

// NewWebhookChannel returns the webhook channel: the notifier plugin
// pluginName from plugins, sending to endpoints.
func NewWebhookChannel(plugins plugin.Plugins, pluginName string, endpoints []Webhook) *WebhookChannel {
	m := make(map[string]Webhook, len(endpoints))
	for _, w := range endpoints {
		m[w.Name] = w
	}
	return &WebhookChannel{plugins: plugins, pluginName: pluginName, endpoints: m}
}

// Name is "webhook".
func (c *WebhookChannel) Name() string { return ChannelWebhook }

// configJSON is the plugin config of endpoint w (the plugin's config_schema).
func configJSON(w Webhook) (string, error) {
	cfg := map[string]any{"url": w.URL, "secret": w.Secret}
	if len(w.Headers) > 0 {
		cfg["headers"] = w.Headers
	}
	b, err := json.Marshal(cfg)
	return string(b), err
}

type sendResult struct {
	Status    string `json:"status"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
}

// Send posts n to the endpoint named n.Recipient.
func (c *WebhookChannel) Send(ctx context.Context, n store.Notification) error {
	w, ok := c.endpoints[n.Recipient]
	if !ok {
		return Permanent(fmt.Errorf("no webhook endpoint named %q is configured", n.Recipient))
	}
	p, _, ok := c.plugins.Get(c.pluginName)
	if !ok {
		return fmt.Errorf("notifier plugin %q is not loaded", c.pluginName)
	}
	cfg, err := configJSON(w)
	if err != nil {
		return Permanent(err)
	}
	in, err := json.Marshal(map[string]string{
		"notification_id": n.ID.String(), "recipient": n.Recipient, "subject": n.Subject, "body": n.Body,
	})
	if err != nil {
		return Permanent(err)
	}
	out, err := p.Call(ctx, "send", cfg, string(in))
	if err != nil {
		return fmt.Errorf("notifier plugin %s: %w", c.pluginName, err)
	}
	var res sendResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		return fmt.Errorf("notifier plugin %s answered no JSON: %w", c.pluginName, err)
	}
	switch {
	case res.Status == "sent":
		return nil
	case res.Retryable:
		return fmt.Errorf("webhook %s: %s", w.Name, res.Message)
	default:
		return Permanent(fmt.Errorf("webhook %s: %s", w.Name, res.Message))
	}
}

type rendered struct {
	Subject string `json:"subject"`
	Body    string `json:"body"`
}

// render asks the plugin for the subject and body of a notice to the
// endpoint named recipient; ok false when the plugin is not available or
// failed, and the caller renders itself.
func (c *WebhookChannel) render(ctx context.Context, recipient, eventType string, data map[string]string) (rendered, bool) {
	w, ok := c.endpoints[recipient]
	if !ok {
		return rendered{}, false
	}
	p, _, ok := c.plugins.Get(c.pluginName)
	if !ok {
		return rendered{}, false
	}
	cfg, err := configJSON(w)
	if err != nil {
		return rendered{}, false
	}
	in, err := json.Marshal(map[string]any{"event_type": eventType, "recipient": recipient, "data": data})
	if err != nil {
		return rendered{}, false
	}
	out, err := p.Call(ctx, "render", cfg, string(in))
	if err != nil {
		return rendered{}, false
	}
	var r rendered
	if json.Unmarshal([]byte(out), &r) != nil || r.Body == "" {
		return rendered{}, false
	}
	return r, true
}
