package notify

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/wneessen/go-mail"

	"github.com/rustbill/paymentd/internal/store"
)

// EmailChannel delivers notifications as plain-text e-mail over SMTP, one
// connection per message.
type EmailChannel struct {
	opts []mail.Option
	host string
	from string
}

// NewEmailChannel returns the e-mail channel of s (after Options.Defaults).
func NewEmailChannel(s SMTP) (*EmailChannel, error) {
	if !s.Enabled() {
		return nil, errors.New("notify: [notify.smtp].host is empty")
	}
	policy, err := tlsPolicy(s.TLSPolicy)
	if err != nil {
		return nil, err
	}
	auth, err := authType(s.Auth)
	if err != nil {
		return nil, err
	}
	opts := []mail.Option{
		mail.WithPort(s.Port),
		mail.WithTimeout(s.Timeout),
		mail.WithTLSPolicy(policy),
	}
	if s.ImplicitTLS {
		opts = append(opts, mail.WithSSL())
	}
	if s.TLSConfig != nil {
		opts = append(opts, mail.WithTLSConfig(s.TLSConfig))
	}
	if auth != mail.SMTPAuthNoAuth {
		opts = append(opts, mail.WithSMTPAuth(auth), mail.WithUsername(s.Username), mail.WithPassword(s.Password))
	}
	if s.HELO != "" {
		opts = append(opts, mail.WithHELO(s.HELO))
	}
	return &EmailChannel{opts: opts, host: s.Host, from: s.From}, nil
}

// Name is "email".
func (c *EmailChannel) Name() string { return ChannelEmail }

// Send delivers n to its recipient. A refused address or a permanent SMTP
// answer (5xx) is Permanent; connection failures and 4xx answers are
// retried.
func (c *EmailChannel) Send(ctx context.Context, n store.Notification) error {
	m := mail.NewMsg()
	if err := m.From(c.from); err != nil {
		return Permanent(fmt.Errorf("sender address: %w", err))
	}
	if err := m.To(n.Recipient); err != nil {
		return Permanent(fmt.Errorf("recipient address: %w", err))
	}
	m.Subject(n.Subject)
	m.SetBodyString(mail.TypeTextPlain, n.Body)
	m.SetGenHeader("X-Paymentd-Notification-Id", n.ID.String())
	m.SetMessageID()
	m.SetDate()

	client, err := mail.NewClient(c.host, c.opts...)
	if err != nil {
		return Permanent(fmt.Errorf("smtp client: %w", err))
	}
	if err := client.DialAndSendWithContext(ctx, m); err != nil {
		var se *mail.SendError
		if errors.As(err, &se) && !se.IsTemp() && se.ErrorCode() >= 500 {
			return Permanent(fmt.Errorf("smtp: %w", err))
		}
		return fmt.Errorf("smtp: %w", err)
	}
	return nil
}

func tlsPolicy(s string) (mail.TLSPolicy, error) {
	switch strings.ToLower(s) {
	case "mandatory", "":
		return mail.TLSMandatory, nil
	case "opportunistic":
		return mail.TLSOpportunistic, nil
	case "none":
		return mail.NoTLS, nil
	}
	return mail.TLSMandatory, fmt.Errorf("must be mandatory, opportunistic or none, got %q", s)
}

func authType(s string) (mail.SMTPAuthType, error) {
	switch strings.ToLower(s) {
	case "", "none":
		return mail.SMTPAuthNoAuth, nil
	case "plain":
		return mail.SMTPAuthPlain, nil
	case "login":
		return mail.SMTPAuthLogin, nil
	case "cram-md5":
		return mail.SMTPAuthCramMD5, nil
	case "scram-sha-256":
		return mail.SMTPAuthSCRAMSHA256, nil
	case "auto":
		return mail.SMTPAuthAutoDiscover, nil
	}
	return mail.SMTPAuthNoAuth, fmt.Errorf("must be none, plain, login, cram-md5, scram-sha-256 or auto, got %q", s)
}
