package config

import (
	"net/url"
	"slices"
)

// Masked returns a copy with every secret replaced, for printing.
func (c Config) Masked() Config {
	m := c
	mask := func(s string) string {
		if s == "" {
			return ""
		}
		return "********"
	}
	m.JWT.Secret = mask(c.JWT.Secret)
	m.Bootstrap.AdminPassword = mask(c.Bootstrap.AdminPassword)
	m.DB.URL = maskURL(c.DB.URL)
	m.DB.ReplicaURL = maskURL(c.DB.ReplicaURL)
	m.Redis.URL = maskURL(c.Redis.URL)
	m.Billing.Currencies = append([]string(nil), c.Billing.Currencies...)
	m.Server.TrustedProxies = slices.Clone(c.Server.TrustedProxies)
	m.Notify.SMTP.Password = mask(c.Notify.SMTP.Password)
	m.Notify.Webhooks = make([]NotifyWebhook, len(c.Notify.Webhooks))
	for i, w := range c.Notify.Webhooks {
		w.Secret = mask(w.Secret)
		// Header values are often credentials (Authorization, tokens);
		// all of them are masked rather than guessing which.
		if w.Headers != nil {
			h := make(map[string]string, len(w.Headers))
			for k, v := range w.Headers {
				h[k] = mask(v)
			}
			w.Headers = h
		}
		m.Notify.Webhooks[i] = w
	}
	m.Notify.AdminEmails = slices.Clone(c.Notify.AdminEmails)
	m.Secrets.Keys = make(map[string]string, len(c.Secrets.Keys))
	for id, k := range c.Secrets.Keys {
		m.Secrets.Keys[id] = mask(k)
	}
	return m
}

func maskURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		// An unparsable URL may still hold a password: show none of it.
		if raw == "" {
			return ""
		}
		return "********"
	}
	if u.User == nil {
		return raw
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}
