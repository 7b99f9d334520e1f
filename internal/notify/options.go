package notify

import (
	"cmp"
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

// The defaults of Options, and of [notify] in the configuration.
const (
	DefaultPollInterval  = 5 * time.Second
	DefaultBatchSize     = 20
	DefaultConcurrency   = 4
	DefaultMaxAttempts   = 8
	DefaultRetryBase     = 30 * time.Second
	DefaultRetryMax      = time.Hour
	DefaultSendTimeout   = 30 * time.Second
	DefaultCustomerEmail = true
	DefaultWebhookPlugin = "webhook"

	DefaultSMTPPort        = 587
	DefaultSMTPImplicitTLS = 465 // the port with SMTP.ImplicitTLS
	DefaultSMTPTLSPolicy   = "mandatory"
	DefaultSMTPAuth        = "none" // "plain" when a username is set
	DefaultSMTPTimeout     = 15 * time.Second
)

// Options is the [notify] configuration. Zero values take the defaults
// above; the e-mail channel is off while SMTP.Host is empty and the webhook
// channel while Webhooks is empty.
type Options struct {
	// PollInterval: how often the sender looks for due notifications
	// without a wake-up ([notify].poll_interval).
	PollInterval time.Duration
	// BatchSize: notifications claimed at a time ([notify].batch_size).
	BatchSize int
	// Concurrency: deliveries at the same time ([notify].concurrency).
	Concurrency int
	// MaxAttempts: delivery attempts before a notification is failed
	// ([notify].max_attempts).
	MaxAttempts int
	// RetryBase and RetryMax shape the backoff between attempts
	// ([notify].retry_base, [notify].retry_max).
	RetryBase time.Duration
	RetryMax  time.Duration
	// SendTimeout bounds one delivery ([notify].send_timeout).
	SendTimeout time.Duration

	// CustomerEmail sends the customer an e-mail about their order
	// ([notify].customer_email; nil: DefaultCustomerEmail).
	CustomerEmail *bool
	// AdminEmails receive every order notification ([notify].admin_emails).
	AdminEmails []string

	// WebhookPlugin is the notifier plugin that renders and sends webhooks
	// ([notify].webhook_plugin).
	WebhookPlugin string
	// Webhooks receive every order notification ([[notify.webhooks]]).
	Webhooks []Webhook

	// SMTP is the e-mail channel ([notify.smtp]).
	SMTP SMTP

	// Tracer, when set (tracing on), gives each delivery a span, whose
	// trace id the delivery's log lines carry. Not configuration: the
	// service sets it from [tracing].
	Tracer trace.Tracer
}

// Webhook is one endpoint of the webhook channel. Its name is the
// notification's recipient; the URL and the secret stay in the
// configuration and go to the plugin only.
type Webhook struct {
	Name   string
	URL    string
	Secret string
	// Headers are extra request headers.
	Headers map[string]string
}

// SMTP configures the e-mail channel (github.com/wneessen/go-mail).
type SMTP struct {
	// Host of the SMTP server; empty disables e-mail ([notify.smtp].host).
	Host string
	// Port (DefaultSMTPPort, or DefaultSMTPImplicitTLS with ImplicitTLS).
	Port int
	// From is the sender address, e.g. "Billing <billing@example.com>".
	From string
	// TLSPolicy: "mandatory" (STARTTLS required),
	// "opportunistic" (STARTTLS when offered) or "none".
	TLSPolicy string
	// ImplicitTLS connects with TLS from the first byte (SMTPS, port 465)
	// instead of STARTTLS.
	ImplicitTLS bool
	// Auth: "" or "none", "plain", "login", "cram-md5", "scram-sha-256" or
	// "auto" (the strongest the server offers).
	Auth     string
	Username string
	Password string
	// HELO is the name sent in EHLO/HELO (default: the host name).
	HELO string
	// Timeout bounds connecting and every SMTP command.
	Timeout time.Duration
	// TLSConfig overrides the TLS settings (tests: a private CA); not a
	// configuration key.
	TLSConfig *tls.Config
}

// Enabled reports whether the e-mail channel is configured.
func (s SMTP) Enabled() bool { return s.Host != "" }

// Defaults fills the zero values (a negative count or duration counts as
// zero).
func (o Options) Defaults() Options {
	o.PollInterval = cmp.Or(max(o.PollInterval, 0), DefaultPollInterval)
	o.BatchSize = cmp.Or(max(o.BatchSize, 0), DefaultBatchSize)
	o.Concurrency = cmp.Or(max(o.Concurrency, 0), DefaultConcurrency)
	o.MaxAttempts = cmp.Or(max(o.MaxAttempts, 0), DefaultMaxAttempts)
	o.RetryBase = cmp.Or(max(o.RetryBase, 0), DefaultRetryBase)
	o.RetryMax = cmp.Or(max(o.RetryMax, 0), DefaultRetryMax)
	o.SendTimeout = cmp.Or(max(o.SendTimeout, 0), DefaultSendTimeout)
	if o.CustomerEmail == nil {
		yes := DefaultCustomerEmail
		o.CustomerEmail = &yes
	}
	o.WebhookPlugin = cmp.Or(o.WebhookPlugin, DefaultWebhookPlugin)
	o.SMTP.TLSPolicy = cmp.Or(o.SMTP.TLSPolicy, DefaultSMTPTLSPolicy)
	if o.SMTP.Port == 0 {
		o.SMTP.Port = DefaultSMTPPort
		if o.SMTP.ImplicitTLS {
			o.SMTP.Port = DefaultSMTPImplicitTLS
		}
	}
	if o.SMTP.Auth == "" {
		o.SMTP.Auth = DefaultSMTPAuth
		if o.SMTP.Username != "" {
			o.SMTP.Auth = "plain"
		}
	}
	o.SMTP.Timeout = cmp.Or(max(o.SMTP.Timeout, 0), DefaultSMTPTimeout)
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
