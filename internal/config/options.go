package config

import (
	"slices"
	"time"

	"github.com/rustbill/paymentd/internal/cache"
	"github.com/rustbill/paymentd/internal/event"
	"github.com/rustbill/paymentd/internal/export"
	"github.com/rustbill/paymentd/internal/identity"
	"github.com/rustbill/paymentd/internal/logging"
	"github.com/rustbill/paymentd/internal/notify"
	"github.com/rustbill/paymentd/internal/order/renewal"
	"github.com/rustbill/paymentd/internal/outbound"
	"github.com/rustbill/paymentd/internal/ratelimit"
	"github.com/rustbill/paymentd/internal/retention"
	"github.com/rustbill/paymentd/internal/server"
	"github.com/rustbill/paymentd/internal/tracing"
)

// The sections below map onto the options of the package that owns them:
// the key names and units are the configuration's, the options and their
// defaults the package's. The caller (internal/app) adds what is not
// configuration: node ids, loggers, tracers, clocks.

// Options maps [server] onto the server's options; internal/app adds the
// services, the layers and the pool. The concurrency limit, the public URL
// and the trusted proxies go to the packages that use them.
func (s Server) Options() server.Options {
	return server.Options{
		Addr: s.Addr(), TLSCertFile: s.TLSCertFile, TLSKeyFile: s.TLSKeyFile,
		MaxRequestBytes: s.MaxRequestBytes, ShutdownTimeout: s.ShutdownTimeout,
		ReadTimeout:          time.Duration(s.ReadTimeoutSecs) * time.Second,
		MaxConcurrentStreams: s.MaxConcurrentStreams,
		CORSAllowedOrigins:   s.CORSAllowedOrigins, AdminPath: s.AdminPath,
	}
}

// Limits maps [rate_limit] onto the rate limiter's limits.
func (r RateLimit) Limits() ratelimit.Limits {
	return ratelimit.Limits{Enabled: r.Enabled, LoginPerSec: r.LoginPerSec, RegisterPerSec: r.RegisterPerSec,
		PasswordPerSec: r.PasswordPerSec, PasswordPerAccountPerMin: r.PasswordPerAccountPerMin}
}

// Options maps [tracing] onto the tracing options; internal/app adds the
// version, the instance and the logger.
func (t Tracing) Options() tracing.Options {
	return tracing.Options{
		Enabled: t.Enabled, Endpoint: t.Endpoint, Protocol: t.Protocol,
		Insecure: t.Insecure, SampleRatio: t.SampleRatio, ServiceName: t.ServiceName,
	}
}

// Options maps [log] onto the logger's options.
func (l Log) Options() logging.Options {
	return logging.Options{Level: l.Level, Format: l.Format}
}

// Options maps [redis] onto the cache's options.
func (r Redis) Options() cache.Options {
	return cache.Options{Enabled: r.Enabled, URL: r.URL, MaxConnections: r.MaxConnections, KeyPrefix: r.KeyPrefix}
}

// Options maps [jwt] onto identity's token options.
func (j JWT) Options() identity.JWTOptions {
	return identity.JWTOptions{Secret: j.Secret, Expiry: time.Duration(j.ExpiryHours) * time.Hour}
}

// Options maps [session] onto identity's session options.
func (s Session) Options() identity.SessionOptions {
	return identity.SessionOptions{
		CookieName:      s.CookieName,
		IdleTimeout:     time.Duration(s.IdleTimeoutMinutes) * time.Minute,
		AbsoluteTimeout: time.Duration(s.AbsoluteTimeoutHours) * time.Hour,
		CookieSecure:    s.CookieSecure,
		CookieSameSite:  s.CookieSameSite,
	}
}

// Options maps [bootstrap] onto identity's first admin.
func (b Bootstrap) Options() identity.BootstrapOptions {
	return identity.BootstrapOptions{AdminUsername: b.AdminUsername, AdminPassword: b.AdminPassword}
}

// WorkerOptions maps [events] onto the event worker's options of node
// (TimeoutScanInterval goes to fulfillment.Options).
func (e Events) WorkerOptions(node string) event.WorkerOptions {
	return event.WorkerOptions{
		Node: node, PollInterval: e.PollInterval, BatchSize: e.BatchSize,
		MaxAttempts: e.MaxAttempts, Concurrency: e.Concurrency,
		HandlerTimeout: e.HandlerTimeout, LockGrace: e.LockGrace,
		RetryBase: e.RetryBase, RetryMax: e.RetryMax, DrainTimeout: e.DrainTimeout,
	}
}

// Options maps [notify] onto the notification sender's options.
func (n Notify) Options() notify.Options {
	customer := n.CustomerEmail
	o := notify.Options{
		PollInterval: n.PollInterval, BatchSize: n.BatchSize, Concurrency: n.Concurrency,
		MaxAttempts: n.MaxAttempts, RetryBase: n.RetryBase, RetryMax: n.RetryMax, SendTimeout: n.SendTimeout,
		CustomerEmail: &customer, AdminEmails: n.AdminEmails, WebhookPlugin: n.WebhookPlugin,
		SMTP: notify.SMTP{
			Host: n.SMTP.Host, Port: n.SMTP.Port, From: n.SMTP.From, TLSPolicy: n.SMTP.TLSPolicy,
			ImplicitTLS: n.SMTP.ImplicitTLS, Auth: n.SMTP.Auth, Username: n.SMTP.Username,
			Password: n.SMTP.Password, HELO: n.SMTP.HELO, Timeout: n.SMTP.Timeout,
		},
	}
	for _, w := range n.Webhooks {
		o.Webhooks = append(o.Webhooks, notify.Webhook{Name: w.Name, URL: w.URL, Secret: w.Secret, Headers: w.Headers})
	}
	return o
}

// Options maps [outbound] onto the outbound client's options.
func (o Outbound) Options() outbound.Options {
	return outbound.Options{FailureThreshold: o.FailureThreshold, Cooldown: o.Cooldown, Attempts: o.Attempts, Timeout: o.Timeout}
}

// Options maps [export] onto the export handler's options.
func (e Export) Options() export.Options {
	return export.Options{MaxConcurrent: e.MaxConcurrent, WriteTimeout: e.WriteTimeout}
}

// RenewalOptions maps [billing] onto the billing run's options of node;
// internal/app adds the clock and the logger. The interval and batch size
// are the run's defaults. test_clock is not an option of the run: it
// allows the admin procedure that moves the clock.
func (b Billing) RenewalOptions(node string) renewal.Options {
	loc, err := time.LoadLocation(b.TimeZone)
	if err != nil {
		loc = time.UTC // not reached: Validate refuses a zone that does not load
	}
	return renewal.Options{
		Node: node, Location: loc,
		InvoiceDays: b.RenewalInvoiceDays, AutoApplyBalance: b.AutoApplyBalance,
		SuspendAfterDays: b.SuspendAfterDays, TerminateAfterDays: b.TerminateAfterDays,
		ReminderDaysBefore: b.ReminderDaysBefore, OverdueReminderDays: slices.Clone(b.OverdueReminderDays),
		Interval: b.RunInterval, BatchSize: renewal.DefaultBatchSize,
	}
}

// Options maps [retention] onto the retention job's options; a retention
// of 0 (keep for good) is retention.KeepForever. internal/app adds the
// clock, the leader check and the logger.
func (r Retention) Options() retention.Options {
	keep := func(n int) int {
		if n == 0 {
			return retention.KeepForever
		}
		return n
	}
	return retention.Options{
		EventDays: keep(r.EventDays), NotificationDays: keep(r.NotificationDays), AuditMonths: keep(r.AuditMonths),
		Interval: r.Interval, BatchSize: r.BatchSize,
	}
}
