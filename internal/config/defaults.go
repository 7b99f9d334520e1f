package config

import (
	"slices"
	"time"

	"github.com/rustbill/paymentd/internal/cache"
	"github.com/rustbill/paymentd/internal/cluster"
	"github.com/rustbill/paymentd/internal/event"
	"github.com/rustbill/paymentd/internal/export"
	"github.com/rustbill/paymentd/internal/fulfillment"
	"github.com/rustbill/paymentd/internal/identity"
	"github.com/rustbill/paymentd/internal/logging"
	"github.com/rustbill/paymentd/internal/migrate"
	"github.com/rustbill/paymentd/internal/notify"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/order/renewal"
	"github.com/rustbill/paymentd/internal/outbound"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/ratelimit"
	"github.com/rustbill/paymentd/internal/replica"
	"github.com/rustbill/paymentd/internal/retention"
	"github.com/rustbill/paymentd/internal/server"
	"github.com/rustbill/paymentd/internal/tracing"
)

// Default returns the configuration with every default of the API contract
// (docs/api.md, "Limits") and of docs/decisions.md. koanf.example.toml documents
// the same values.
//
// A setting whose package has options of its own takes that package's
// exported default (event.DefaultConcurrency, notify.DefaultBatchSize, …),
// which the package also applies to a zero option: each default is written
// once (tracing.DefaultSampleRatio too, though New cannot apply it: zero
// is a valid ratio). Only the settings no package applies are written
// here: the listener's address, the concurrency limit, the pool, the
// plugin directory, the currencies, the billing time zone, metrics and
// [rate_limit].enabled.
func Default() Config {
	return Config{
		Server: Server{
			Host:                 "127.0.0.1",
			Port:                 50051,
			MaxConcurrency:       30,
			AdminPath:            server.DefaultAdminPath,
			PublicURL:            payment.DefaultPublicURL,
			MaxRequestBytes:      server.DefaultMaxRequestBytes,
			ShutdownTimeout:      server.DefaultShutdownTimeout,
			ReadTimeoutSecs:      int(server.DefaultReadTimeout / time.Second),
			MaxConcurrentStreams: server.DefaultMaxConcurrentStreams,
			TrustedProxies:       []string{},
			CORSAllowedOrigins:   []string{},
		},
		DB: DB{
			MaxConnections:     20,
			MinConnections:     2,
			IdleTimeoutSecs:    300,
			MaxLifetimeSecs:    1800,
			AcquireTimeoutSecs: 5,
			TestBeforeAcquire:  true,
			ReplicaMaxLag:      replica.DefaultMaxLag,
		},
		JWT: JWT{ExpiryHours: int(identity.DefaultJWTExpiry / time.Hour)},
		Session: Session{
			CookieName:           identity.DefaultSessionCookieName,
			IdleTimeoutMinutes:   int(identity.DefaultSessionIdleTimeout / time.Minute),
			AbsoluteTimeoutHours: int(identity.DefaultSessionAbsoluteTimeout / time.Hour),
			CookieSameSite:       identity.DefaultSessionCookieSameSite,
		},
		Bootstrap: Bootstrap{AdminUsername: identity.DefaultBootstrapAdminUsername},
		RateLimit: RateLimit{Enabled: true, LoginPerSec: ratelimit.DefaultLoginPerSec, RegisterPerSec: ratelimit.DefaultRegisterPerSec,
			PasswordPerSec: ratelimit.DefaultPasswordPerSec, PasswordPerAccountPerMin: ratelimit.DefaultPasswordPerAccountPerMin},
		Redis: Redis{URL: cache.DefaultURL, MaxConnections: cache.DefaultMaxConnections, KeyPrefix: cache.DefaultKeyPrefix},
		Events: Events{
			PollInterval: event.DefaultPollInterval, BatchSize: event.DefaultBatchSize,
			MaxAttempts: event.DefaultMaxAttempts, Concurrency: event.DefaultConcurrency,
			HandlerTimeout: event.DefaultHandlerTimeout, LockGrace: event.DefaultLockGrace,
			RetryBase: event.DefaultRetryBase, RetryMax: event.DefaultRetryMax,
			DrainTimeout: event.DefaultDrainTimeout, TimeoutScanInterval: fulfillment.DefaultTimeoutScanInterval,
		},
		Notify: Notify{
			PollInterval: notify.DefaultPollInterval, BatchSize: notify.DefaultBatchSize,
			Concurrency: notify.DefaultConcurrency, MaxAttempts: notify.DefaultMaxAttempts,
			RetryBase: notify.DefaultRetryBase, RetryMax: notify.DefaultRetryMax, SendTimeout: notify.DefaultSendTimeout,
			CustomerEmail: notify.DefaultCustomerEmail, AdminEmails: []string{},
			WebhookPlugin: notify.DefaultWebhookPlugin, Webhooks: []NotifyWebhook{},
			SMTP: NotifySMTP{
				Port: notify.DefaultSMTPPort, TLSPolicy: notify.DefaultSMTPTLSPolicy,
				Auth: notify.DefaultSMTPAuth, Timeout: notify.DefaultSMTPTimeout,
			},
		},
		Plugins: Plugins{Dir: "./plugins", ScanInterval: 5 * time.Minute},
		Billing: Billing{
			Currencies:          []string{"CNY", "USD"},
			PaymentTimeout:      fulfillment.DefaultPaymentTimeout,
			ReconcileAfter:      payment.DefaultReconcileAfter,
			TimeZone:            "UTC",
			RenewalInvoiceDays:  renewal.DefaultInvoiceDays,
			RunInterval:         renewal.DefaultInterval,
			AutoApplyBalance:    renewal.DefaultAutoApplyBalance,
			SuspendAfterDays:    renewal.DefaultSuspendAfterDays,
			TerminateAfterDays:  renewal.DefaultTerminateAfterDays,
			ReminderDaysBefore:  renewal.DefaultReminderDaysBefore,
			OverdueReminderDays: renewal.DefaultOverdueReminderDays(),
			CardRetryDays:       slices.Clone(payment.DefaultCardRetryDays),
			EndNowCredit:        string(order.DefaultEndNowCredit),
			PlanChangeDays:      order.DefaultPlanChangeDays,
			DowngradeCredit:     string(order.DefaultDowngradeCredit),
		},
		Payments: Payments{LateCaptureDays: int(payment.DefaultLateCapture / (24 * time.Hour))},
		Disputes: Disputes{Suspend: true},
		Cluster: Cluster{
			LeaseTTL:          cluster.DefaultLeaseTTL,
			LeaseRenew:        cluster.DefaultLeaseRenew,
			HeartbeatInterval: cluster.DefaultHeartbeatInterval,
			NodeLostAfter:     cluster.DefaultNodeLostAfter,
			MigrationWait:     migrate.WaitTimeout,
		},
		Log: Log{Level: logging.DefaultLevel, Format: logging.DefaultFormat},
		Outbound: Outbound{
			FailureThreshold: outbound.DefaultFailureThreshold, Cooldown: outbound.DefaultCooldown,
			Attempts: outbound.DefaultAttempts, Timeout: outbound.DefaultTimeout,
		},
		Export: Export{MaxConcurrent: export.DefaultMaxConcurrent, WriteTimeout: export.DefaultWriteTimeout},
		Retention: Retention{
			EventDays: retention.DefaultEventDays, NotificationDays: retention.DefaultNotificationDays,
			AuditMonths: retention.DefaultAuditMonths, Interval: retention.DefaultInterval, BatchSize: retention.DefaultBatchSize,
		},
		Metrics: Metrics{Enabled: true, Host: "127.0.0.1", Port: 9464},
		Tracing: Tracing{
			Endpoint: tracing.DefaultEndpoint, Protocol: tracing.DefaultProtocol,
			SampleRatio: tracing.DefaultSampleRatio, ServiceName: tracing.DefaultServiceName,
		},
		Secrets: Secrets{Keys: map[string]string{}},
	}
}
