package config

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/rustbill/paymentd/internal/secrets"
)

// PlaceholderJWTSecret is the value koanf.example.toml ships with. The server
// refuses to start with it: a copied example must not become a production key.
const PlaceholderJWTSecret = "change-me-to-a-random-secret-of-at-least-32-characters"

// EnvPrefix starts every environment variable the configuration reads.
const EnvPrefix = "PAYMENTD_"

// DefaultFile is read when --config is not given and the file exists.
const DefaultFile = "paymentd.toml"

// Config is the whole configuration. Field tags are the TOML keys.
type Config struct {
	Server    Server    `koanf:"server"`
	DB        DB        `koanf:"db"`
	JWT       JWT       `koanf:"jwt"`
	Secrets   Secrets   `koanf:"secrets"`
	Session   Session   `koanf:"session"`
	Bootstrap Bootstrap `koanf:"bootstrap"`
	Admin     Admin     `koanf:"admin"`
	RateLimit RateLimit `koanf:"rate_limit"`
	Redis     Redis     `koanf:"redis"`
	Events    Events    `koanf:"events"`
	Plugins   Plugins   `koanf:"plugins"`
	Billing   Billing   `koanf:"billing"`
	Payments  Payments  `koanf:"payments"`
	Disputes  Disputes  `koanf:"disputes"`
	Cluster   Cluster   `koanf:"cluster"`
	Notify    Notify    `koanf:"notify"`
	Log       Log       `koanf:"log"`
	Metrics   Metrics   `koanf:"metrics"`
	Tracing   Tracing   `koanf:"tracing"`
	Outbound  Outbound  `koanf:"outbound"`
	Export    Export    `koanf:"export"`
	Retention Retention `koanf:"retention"`
}

// Server is the listener and what it serves.
type Server struct {
	Host           string `koanf:"host"`
	Port           int    `koanf:"port"`
	MaxConcurrency int    `koanf:"max_concurrency"`
	// QueueTimeoutMS bounds how long a request waits for a max_concurrency slot
	// before ResourceExhausted; 0 waits as long as the client does (the API
	// contract's behaviour: docs/api.md, "Limits").
	QueueTimeoutMS  int           `koanf:"queue_timeout_ms"`
	AdminPath       string        `koanf:"admin_path"`
	PublicURL       string        `koanf:"public_url"`
	TLSCertFile     string        `koanf:"tls_cert_file"`
	TLSKeyFile      string        `koanf:"tls_key_file"`
	MaxRequestBytes int           `koanf:"max_request_bytes"`
	ShutdownTimeout time.Duration `koanf:"shutdown_timeout"`
	// ReadTimeoutSecs bounds reading a request's headers, and then its
	// body, each; a client slower than that is cut off (DeadlineExceeded,
	// 408 to plain HTTP) and its connection ended.
	ReadTimeoutSecs int `koanf:"read_timeout_secs"`
	// MaxConcurrentStreams bounds the requests one HTTP/2 connection may
	// have open at once.
	MaxConcurrentStreams int `koanf:"max_concurrent_streams"`
	// TrustedProxies are the load balancers (CIDR prefixes) whose
	// X-Forwarded-For names the client for the per-IP rate limits.
	TrustedProxies []string `koanf:"trusted_proxies"`
	// CORSAllowedOrigins are the browser origins (https://shop.example)
	// whose pages may call the API with gRPC-Web and Connect.
	CORSAllowedOrigins []string `koanf:"cors_allowed_origins"`
}

// Export bounds the CSV exports (internal/export), which a client reads at
// its own pace.
type Export struct {
	// MaxConcurrent is how many exports one instance streams at once;
	// one more is answered 429 with Retry-After.
	MaxConcurrent int `koanf:"max_concurrent"`
	// WriteTimeout is how long a client may take to accept each chunk of
	// the file (about 4 KiB) before the server cuts it off.
	WriteTimeout time.Duration `koanf:"write_timeout"`
}

// DB is the PostgreSQL pool. The key names are the API contract's (docs/api.md,
// "Limits").
type DB struct {
	URL                string `koanf:"url"`
	MaxConnections     int    `koanf:"max_connections"`
	MinConnections     int    `koanf:"min_connections"`
	IdleTimeoutSecs    int    `koanf:"idle_timeout_secs"`
	MaxLifetimeSecs    int    `koanf:"max_lifetime_secs"`
	AcquireTimeoutSecs int    `koanf:"acquire_timeout_secs"`
	TestBeforeAcquire  bool   `koanf:"test_before_acquire"`
	// ReplicaURL is a streaming standby of the primary that answers the
	// heavy reads (exports, trends, stats, an admin's payment list) while
	// it is at most ReplicaMaxLag behind; empty: none.
	ReplicaURL    string        `koanf:"replica_url"`
	ReplicaMaxLag time.Duration `koanf:"replica_max_lag"`
}

// JWT signs customer access tokens.
type JWT struct {
	Secret      string `koanf:"secret"`
	ExpiryHours int    `koanf:"expiry_hours"`
}

// Session is the admin session cookie.
type Session struct {
	CookieName           string `koanf:"cookie_name"`
	IdleTimeoutMinutes   int    `koanf:"idle_timeout_minutes"`
	AbsoluteTimeoutHours int    `koanf:"absolute_timeout_hours"`
	CookieSecure         bool   `koanf:"cookie_secure"`
	CookieSameSite       string `koanf:"cookie_same_site"`
}

// Bootstrap creates the first admin on a database without admins.
type Bootstrap struct {
	AdminUsername string `koanf:"admin_username"`
	AdminPassword string `koanf:"admin_password"`
}

// Admin is how admins sign in: their API keys' lifetime, and whether a
// second factor is required.
type Admin struct {
	// APIKeyMaxLifetimeDays bounds an admin API key's expires_at, and
	// every key's life from its creation, checked at every request; 0 lets
	// keys never expire (the default, as before expiry existed).
	APIKeyMaxLifetimeDays int `koanf:"api_key_max_lifetime_days"`
	// Require2FA makes every admin enrol TOTP: a session of an admin
	// without it may only enrol (and GetMe, Logout) until it is confirmed.
	Require2FA bool `koanf:"require_2fa"`
}

// RateLimit bounds login and registration attempts per client IP, and
// password attempts across every address and per account.
type RateLimit struct {
	Enabled        bool `koanf:"enabled"`
	LoginPerSec    int  `koanf:"login_per_sec"`
	RegisterPerSec int  `koanf:"register_per_sec"`
	// PasswordPerSec bounds the password attempts (logins, admin logins,
	// registrations, password changes, turning 2FA off) of every address
	// together.
	PasswordPerSec int `koanf:"password_per_sec"`
	// PasswordPerAccountPerMin bounds the password attempts on one
	// account (an e-mail or admin username, whether it exists or not)
	// from every address together.
	PasswordPerAccountPerMin int `koanf:"password_per_account_per_min"`
}

// Redis is the optional shared cache for sessions and rate counters.
type Redis struct {
	Enabled        bool   `koanf:"enabled"`
	URL            string `koanf:"url"`
	MaxConnections int    `koanf:"max_connections"`
	KeyPrefix      string `koanf:"key_prefix"`
}

// Events is the transactional event queue's worker.
type Events struct {
	PollInterval time.Duration `koanf:"poll_interval"`
	BatchSize    int           `koanf:"batch_size"`
	MaxAttempts  int           `koanf:"max_attempts"`
	Concurrency  int           `koanf:"concurrency"`
	// HandlerTimeout bounds one handling attempt; LockGrace is added to it
	// for the claim, after which a dead worker's event is reclaimed.
	HandlerTimeout time.Duration `koanf:"handler_timeout"`
	LockGrace      time.Duration `koanf:"lock_grace"`
	// RetryBase and RetryMax shape the backoff between attempts.
	RetryBase time.Duration `koanf:"retry_base"`
	RetryMax  time.Duration `koanf:"retry_max"`
	// DrainTimeout is how long a stopping worker waits for running handlers.
	DrainTimeout time.Duration `koanf:"drain_timeout"`
	// TimeoutScanInterval is how often unpaid pending orders are looked for.
	TimeoutScanInterval time.Duration `koanf:"timeout_scan_interval"`
}

// Notify is the notification channels: webhooks through a notifier plugin
// and e-mail over SMTP. Validated in depth by internal/notify at start.
type Notify struct {
	PollInterval  time.Duration   `koanf:"poll_interval"`
	BatchSize     int             `koanf:"batch_size"`
	Concurrency   int             `koanf:"concurrency"`
	MaxAttempts   int             `koanf:"max_attempts"`
	RetryBase     time.Duration   `koanf:"retry_base"`
	RetryMax      time.Duration   `koanf:"retry_max"`
	SendTimeout   time.Duration   `koanf:"send_timeout"`
	CustomerEmail bool            `koanf:"customer_email"`
	AdminEmails   []string        `koanf:"admin_emails"`
	WebhookPlugin string          `koanf:"webhook_plugin"`
	Webhooks      []NotifyWebhook `koanf:"webhooks"`
	SMTP          NotifySMTP      `koanf:"smtp"`
}

// NotifyWebhook is one [[notify.webhooks]] endpoint.
type NotifyWebhook struct {
	Name    string            `koanf:"name"`
	URL     string            `koanf:"url"`
	Secret  string            `koanf:"secret"`
	Headers map[string]string `koanf:"headers"`
}

// NotifySMTP is [notify.smtp]; an empty host turns e-mail off.
type NotifySMTP struct {
	Host        string        `koanf:"host"`
	Port        int           `koanf:"port"`
	From        string        `koanf:"from"`
	TLSPolicy   string        `koanf:"tls_policy"`
	ImplicitTLS bool          `koanf:"implicit_tls"`
	Auth        string        `koanf:"auth"`
	Username    string        `koanf:"username"`
	Password    string        `koanf:"password"`
	HELO        string        `koanf:"helo"`
	Timeout     time.Duration `koanf:"timeout"`
}

// Plugins is the plugin directory scanner.
type Plugins struct {
	Dir          string        `koanf:"dir"`
	ScanInterval time.Duration `koanf:"scan_interval"`
}

// Billing holds the money rules that are configuration.
type Billing struct {
	Currencies     []string      `koanf:"currencies"`
	PaymentTimeout time.Duration `koanf:"payment_timeout"`
	ReconcileAfter time.Duration `koanf:"reconcile_after"`
	// TimeZone is the billing time zone, an IANA name: the calendar in
	// which recurring orders' periods end.
	TimeZone string `koanf:"time_zone"`
	// RenewalInvoiceDays is how many days before a period ends the next
	// period's invoice is issued.
	RenewalInvoiceDays int `koanf:"renewal_invoice_days"`
	// RunInterval is how often the billing leader runs the renewals (and
	// how soon a new leader does after a takeover).
	RunInterval time.Duration `koanf:"run_interval"`
	// AutoApplyBalance pays a renewal invoice from the customer's balance
	// when it is issued and the balance covers it.
	AutoApplyBalance bool `koanf:"auto_apply_balance"`
	// SuspendAfterDays and TerminateAfterDays are how many days past its
	// due date an unpaid renewal invoice suspends, then ends, the service;
	// 0 turns the step off.
	SuspendAfterDays   int `koanf:"suspend_after_days"`
	TerminateAfterDays int `koanf:"terminate_after_days"`
	// ReminderDaysBefore: the customer is reminded of an unpaid renewal
	// invoice this many days before it is due (0: not); OverdueReminderDays:
	// and again on these days past due (ascending; empty: not).
	ReminderDaysBefore  int   `koanf:"reminder_days_before"`
	OverdueReminderDays []int `koanf:"overdue_reminder_days"`
	// CardRetryDays are the days past due a renewal invoice is charged to
	// the saved payment method again after a decline (ascending; empty:
	// once, on the due day).
	CardRetryDays []int `koanf:"card_retry_days"`
	// TestClock allows the admin procedure that moves the billing clock
	// forward. paymentd dev turns it on; never in production.
	TestClock bool `koanf:"test_clock"`
	// EndNowCredit is what a customer who ends a service now (EndService)
	// may get of the unused share of the paid period: "balance" (credited
	// to the balance) or "none" (kept). An admin may choose any mode,
	// gateway included.
	EndNowCredit string `koanf:"end_now_credit"`
	// PlanChangeDays is how many days an upgrade's proration invoice may
	// stay unpaid before the plan change lapses and the invoice is
	// cancelled (ChangeOrderPlan, when now).
	PlanChangeDays int `koanf:"plan_change_days"`
	// DowngradeCredit is what a downgrade now does with the unused
	// difference of the current period: "balance" (refunded to the
	// balance from the period's payments) or "none" (kept).
	DowngradeCredit string `koanf:"downgrade_credit"`
}

// Payments holds the rules of the payment domain that are configuration.
type Payments struct {
	// LateCaptureDays: a gateway payment that failed at most this many days
	// ago is still asked about (the reconciler, QueryPaymentStatus), in
	// case its gateway took the money after all; 0 turns it off.
	LateCaptureDays int `koanf:"late_capture_days"`
}

// Disputes holds what the service does about a payment's dispute
// (chargeback) a gateway reports.
type Disputes struct {
	// Suspend: an open dispute suspends its order's service (reason
	// dispute) until it is won, lost in part, or an admin resumes it.
	Suspend bool `koanf:"suspend"`
}

// LateCapture is LateCaptureDays as a duration.
func (p Payments) LateCapture() time.Duration {
	return time.Duration(p.LateCaptureDays) * 24 * time.Hour
}

// Retention is how long what grows with business is kept
// (internal/retention; docs/operations.md, "Retention"). Money rows
// (payments, refunds, invoices, orders, the balance ledger) are never
// deleted. A retention of 0 keeps that kind for good.
type Retention struct {
	// EventDays: a done event (but order_paid) is deleted this many days
	// after it finished.
	EventDays int `koanf:"event_days"`
	// NotificationDays: a sent notification is deleted this many days
	// after it was sent.
	NotificationDays int `koanf:"notification_days"`
	// AuditMonths: a month of audit_log is dropped this many months after
	// it ended (at least 12).
	AuditMonths int `koanf:"audit_months"`
	// Interval is how often the event_worker leader applies it.
	Interval time.Duration `koanf:"interval"`
	// BatchSize bounds the rows one delete statement examines.
	BatchSize int `koanf:"batch_size"`
}

// Cluster is leader leases and heartbeats.
type Cluster struct {
	LeaseTTL          time.Duration `koanf:"lease_ttl"`
	LeaseRenew        time.Duration `koanf:"lease_renew"`
	HeartbeatInterval time.Duration `koanf:"heartbeat_interval"`
	NodeLostAfter     time.Duration `koanf:"node_lost_after"`
	MigrationWait     time.Duration `koanf:"migration_wait"`
}

// Outbound is the protection of every downstream host (gateways,
// providers, webhook receivers) by the one outbound HTTP client: a circuit
// breaker per host, bounded retries of idempotent calls, a per-attempt
// timeout.
type Outbound struct {
	// FailureThreshold consecutive failures open a host's breaker.
	FailureThreshold int `koanf:"failure_threshold"`
	// Cooldown is how long an open breaker refuses calls before one probe.
	Cooldown time.Duration `koanf:"cooldown"`
	// Attempts is the number of tries of an idempotent call.
	Attempts int `koanf:"attempts"`
	// Timeout bounds one attempt; it must be shorter than Cooldown.
	Timeout time.Duration `koanf:"timeout"`
}

// Log is the structured log output.
type Log struct {
	Level  string `koanf:"level"`
	Format string `koanf:"format"`
}

// Metrics is the private listener for Prometheus (/metrics) and, when
// asked for, pprof. It must never be the public port: the figures describe
// the business, and pprof can stall the process.
type Metrics struct {
	Enabled bool   `koanf:"enabled"`
	Host    string `koanf:"host"`
	// Port 0 picks a free port (logged at start); tests use it.
	Port  int  `koanf:"port"`
	Pprof bool `koanf:"pprof"`
}

// Tracing exports OpenTelemetry traces over OTLP.
type Tracing struct {
	Enabled bool `koanf:"enabled"`
	// Endpoint is the collector's host:port.
	Endpoint string `koanf:"endpoint"`
	// Protocol is grpc (port 4317) or http (port 4318, path /v1/traces).
	Protocol string `koanf:"protocol"`
	// Insecure sends without TLS.
	Insecure bool `koanf:"insecure"`
	// SampleRatio is the share of new traces that are recorded (0 to 1).
	SampleRatio float64 `koanf:"sample_ratio"`
	ServiceName string  `koanf:"service_name"`
}

// Secrets are the keys that encrypt plugin config secrets (a gateway's
// merchant key, a product's provider token) in the database. Keys maps a key id to 32 random bytes in
// standard base64; Current names the one that encrypts, every one
// decrypts. A map and a name rather than an ordered list: TOML tables are
// unordered, and each key can come from an environment variable of its own
// (PAYMENTD_SECRETS__KEYS__<ID>). Empty: no secret can be stored, and the
// service refuses to start on a database that holds any.
type Secrets struct {
	Current string            `koanf:"current"`
	Keys    map[string]string `koanf:"keys"`
}

// Keyring builds the keyring of a validated configuration; nil when no key
// is configured.
func (s Secrets) Keyring() (*secrets.Keyring, error) {
	if len(s.Keys) == 0 {
		return nil, nil
	}
	keys := make(map[string][]byte, len(s.Keys))
	for id, b64 := range s.Keys {
		k, err := secrets.DecodeKey(b64)
		if err != nil {
			return nil, fmt.Errorf("[secrets].keys.%s %v", id, err)
		}
		keys[id] = k
	}
	k, err := secrets.New(s.Current, keys)
	if err != nil {
		return nil, fmt.Errorf("[secrets]: %w", err)
	}
	return k, nil
}

// TrustedProxyPrefixes parses TrustedProxies (validated: errors are
// skipped); a bare address is a /32 or /128.
func (s Server) TrustedProxyPrefixes() []netip.Prefix {
	out := make([]netip.Prefix, 0, len(s.TrustedProxies))
	for _, p := range s.TrustedProxies {
		if pfx, err := parsePrefix(p); err == nil {
			out = append(out, pfx)
		}
	}
	return out
}

func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		return netip.ParsePrefix(s)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// Addr is the metrics listen address host:port.
func (m Metrics) Addr() string { return joinHostPort(m.Host, m.Port) }

// Addr is the listen address host:port.
func (s Server) Addr() string { return joinHostPort(s.Host, s.Port) }

func joinHostPort(host string, port int) string {
	if strings.Contains(host, ":") {
		return fmt.Sprintf("[%s]:%d", host, port)
	}
	return fmt.Sprintf("%s:%d", host, port)
}
