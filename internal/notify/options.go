package notify

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// Channels (notifications_channel_check).
const (
	ChannelWebhook = "webhook"
	ChannelEmail   = "email"
)

// Options is the [notify] configuration. Zero values take the defaults
// noted; the e-mail channel is off while SMTP.Host is empty and the webhook
// channel while Webhooks is empty.
type Options struct {
	// PollInterval: how often the sender looks for due notifications
	// without a wake-up ([notify].poll_interval, 5 s).
	PollInterval time.Duration `koanf:"poll_interval"`
	// BatchSize: notifications claimed at a time ([notify].batch_size, 20).
	BatchSize int `koanf:"batch_size"`
	// Concurrency: deliveries at the same time ([notify].concurrency, 4).
	Concurrency int `koanf:"concurrency"`
	// MaxAttempts: delivery attempts before a notification is failed
	// ([notify].max_attempts, 8).
	MaxAttempts int `koanf:"max_attempts"`
	// RetryBase and RetryMax shape the backoff between attempts
	// ([notify].retry_base 30 s, [notify].retry_max 1 h).
	RetryBase time.Duration `koanf:"retry_base"`
	RetryMax  time.Duration `koanf:"retry_max"`
	// SendTimeout bounds one delivery ([notify].send_timeout, 30 s).
	SendTimeout time.Duration `koanf:"send_timeout"`

	// CustomerEmail sends the customer an e-mail about their order
	// ([notify].customer_email, true).
	CustomerEmail *bool `koanf:"customer_email"`
	// AdminEmails receive every order notification ([notify].admin_emails).
	AdminEmails []string `koanf:"admin_emails"`

	// WebhookPlugin is the notifier plugin that renders and sends webhooks
	// ([notify].webhook_plugin, "webhook").
	WebhookPlugin string `koanf:"webhook_plugin"`
	// Webhooks receive every order notification ([[notify.webhooks]]).
	Webhooks []Webhook `koanf:"webhooks"`

	// SMTP is the e-mail channel ([notify.smtp]).
	SMTP SMTP `koanf:"smtp"`

	// Tracer, when set (tracing on), gives each delivery a span, whose
	// trace id the delivery's log lines carry. Not configuration: the
	// service sets it from [tracing].
	Tracer trace.Tracer `koanf:"-"`
}

// Webhook is one endpoint of the webhook channel. Its name is the
// notification's recipient; the URL and the secret stay in the
// configuration and go to the plugin only.
type Webhook struct {
	Name   string `koanf:"name"`
	URL    string `koanf:"url"`
	Secret string `koanf:"secret"`
	// Headers are extra request headers.
	Headers map[string]string `koanf:"headers"`
}

// SMTP configures the e-mail channel (github.com/wneessen/go-mail).
type SMTP struct {
	// Host of the SMTP server; empty disables e-mail ([notify.smtp].host).
	Host string `koanf:"host"`
	// Port (default 587, or 465 with ImplicitTLS).
	Port int `koanf:"port"`
	// From is the sender address, e.g. "Billing <billing@example.com>".
	From string `koanf:"from"`
	// TLSPolicy: "mandatory" (STARTTLS required, the default),
	// "opportunistic" (STARTTLS when offered) or "none".
	TLSPolicy string `koanf:"tls_policy"`
	// ImplicitTLS connects with TLS from the first byte (SMTPS, port 465)
	// instead of STARTTLS.
	ImplicitTLS bool `koanf:"implicit_tls"`
	// Auth: "" or "none", "plain", "login", "cram-md5", "scram-sha-256" or
	// "auto" (the strongest the server offers). Default "plain" when a
	// username is set, "none" otherwise.
	Auth     string `koanf:"auth"`
	Username string `koanf:"username"`
	Password string `koanf:"password"`
	// HELO is the name sent in EHLO/HELO (default: the host name).
	HELO string `koanf:"helo"`
	// Timeout bounds connecting and every SMTP command (default 15 s).
	Timeout time.Duration `koanf:"timeout"`
	// TLSConfig overrides the TLS settings (tests: a private CA); not a
	// configuration key.
	TLSConfig *tls.Config `koanf:"-"`
}

// Enabled reports whether the e-mail channel is configured.
func (s SMTP) Enabled() bool { return s.Host != "" }

// Defaults fills the zero values.
func (o Options) Defaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	defInt := func(n *int, v int) {
		if *n <= 0 {
			*n = v
		}
	}
	def(&o.PollInterval, 5*time.Second)
	defInt(&o.BatchSize, 20)
	defInt(&o.Concurrency, 4)
	defInt(&o.MaxAttempts, 8)
	def(&o.RetryBase, 30*time.Second)
	def(&o.RetryMax, time.Hour)
	def(&o.SendTimeout, 30*time.Second)
	if o.CustomerEmail == nil {
		yes := true
		o.CustomerEmail = &yes
	}
	if o.WebhookPlugin == "" {
		o.WebhookPlugin = "webhook"
	}
	if o.SMTP.TLSPolicy == "" {
		o.SMTP.TLSPolicy = "mandatory"
	}
	if o.SMTP.Port == 0 {
		o.SMTP.Port = 587
		if o.SMTP.ImplicitTLS {
			o.SMTP.Port = 465
		}
	}
	if o.SMTP.Auth == "" {
		o.SMTP.Auth = "none"
		if o.SMTP.Username != "" {
			o.SMTP.Auth = "plain"
		}
	}
	def(&o.SMTP.Timeout, 15*time.Second)
	return o
}

// Validate reports every problem, each naming its key.
func (o Options) Validate() error {
	o = o.Defaults()
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s %s", key, fmt.Sprintf(format, args...)))
	}
	if o.RetryMax < o.RetryBase {
		bad("[notify].retry_max", "must not be shorter than [notify].retry_base")
	}
	for _, a := range o.AdminEmails {
		if _, err := mail.ParseAddress(a); err != nil {
			bad("[notify].admin_emails", "holds %q, which is not an e-mail address", a)
		}
	}
	if len(o.AdminEmails) > 0 && !o.SMTP.Enabled() {
		bad("[notify].admin_emails", "needs [notify.smtp].host")
	}
	names := map[string]bool{}
	for i, w := range o.Webhooks {
		key := fmt.Sprintf("[[notify.webhooks]] #%d", i+1)
		switch {
		case w.Name == "":
			bad(key, "needs a name")
		case names[w.Name]:
			bad(key, "repeats the name %q", w.Name)
		}
		names[w.Name] = true
		if !strings.HasPrefix(w.URL, "http://") && !strings.HasPrefix(w.URL, "https://") {
			bad(key+".url", "must be an http:// or https:// URL")
		}
		if len(w.Secret) < 16 {
			bad(key+".secret", "must be at least 16 characters")
		}
	}
	if o.SMTP.Enabled() {
		if _, err := mail.ParseAddress(o.SMTP.From); err != nil {
			bad("[notify.smtp].from", "must be an e-mail address, got %q", o.SMTP.From)
		}
		if _, err := tlsPolicy(o.SMTP.TLSPolicy); err != nil {
			bad("[notify.smtp].tls_policy", "%v", err)
		}
		if _, err := authType(o.SMTP.Auth); err != nil {
			bad("[notify.smtp].auth", "%v", err)
		}
		if o.SMTP.Auth != "none" && (o.SMTP.Username == "" || o.SMTP.Password == "") {
			bad("[notify.smtp].username", "and [notify.smtp].password are required with auth %q", o.SMTP.Auth)
		}
		if o.SMTP.Port < 1 || o.SMTP.Port > 65535 {
			bad("[notify.smtp].port", "must be between 1 and 65535")
		}
	}
	return errors.Join(errs...)
}

// Masked returns a copy without secrets, for printing.
func (o Options) Masked() Options {
	m := o
	m.Webhooks = make([]Webhook, len(o.Webhooks))
	for i, w := range o.Webhooks {
		w.Secret = "********"
		m.Webhooks[i] = w
	}
	if m.SMTP.Password != "" {
		m.SMTP.Password = "********"
	}
	return m
}
