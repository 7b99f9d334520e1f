package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/parsers/toml/v2"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/providers/structs"
	"github.com/knadh/koanf/v2"

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
	RateLimit RateLimit `koanf:"rate_limit"`
	Redis     Redis     `koanf:"redis"`
	Events    Events    `koanf:"events"`
	Plugins   Plugins   `koanf:"plugins"`
	Billing   Billing   `koanf:"billing"`
	Payments  Payments  `koanf:"payments"`
	Cluster   Cluster   `koanf:"cluster"`
	Notify    Notify    `koanf:"notify"`
	Log       Log       `koanf:"log"`
	Metrics   Metrics   `koanf:"metrics"`
	Tracing   Tracing   `koanf:"tracing"`
	Outbound  Outbound  `koanf:"outbound"`
}

// Server is the listener and what it serves.
type Server struct {
	Host           string `koanf:"host"`
	Port           int    `koanf:"port"`
	MaxConcurrency int    `koanf:"max_concurrency"`
	// QueueTimeoutMS bounds how long a request waits for a
	// max_concurrency slot before ResourceExhausted; 0 waits as long as
	// the client does (the specification's behaviour).
	QueueTimeoutMS  int           `koanf:"queue_timeout_ms"`
	AdminPath       string        `koanf:"admin_path"`
	PublicURL       string        `koanf:"public_url"`
	TLSCertFile     string        `koanf:"tls_cert_file"`
	TLSKeyFile      string        `koanf:"tls_key_file"`
	MaxRequestBytes int           `koanf:"max_request_bytes"`
	ShutdownTimeout time.Duration `koanf:"shutdown_timeout"`
	// ReadTimeoutSecs bounds reading a request's headers, and then its
	// body, each; a client slower than that is cut off (408).
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

// DB is the PostgreSQL pool. The key names are the specification's.
type DB struct {
	URL                string `koanf:"url"`
	MaxConnections     int    `koanf:"max_connections"`
	MinConnections     int    `koanf:"min_connections"`
	IdleTimeoutSecs    int    `koanf:"idle_timeout_secs"`
	MaxLifetimeSecs    int    `koanf:"max_lifetime_secs"`
	AcquireTimeoutSecs int    `koanf:"acquire_timeout_secs"`
	TestBeforeAcquire  bool   `koanf:"test_before_acquire"`
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

// RateLimit bounds login and registration attempts per client IP.
type RateLimit struct {
	Enabled        bool `koanf:"enabled"`
	LoginPerSec    int  `koanf:"login_per_sec"`
	RegisterPerSec int  `koanf:"register_per_sec"`
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
}

// Payments holds the rules of the payment domain that are configuration.
type Payments struct {
	// LateCaptureDays: a gateway payment that failed at most this many days
	// ago is still asked about (the reconciler, QueryPaymentStatus), in
	// case its gateway took the money after all; 0 turns it off.
	LateCaptureDays int `koanf:"late_capture_days"`
}

// LateCapture is LateCaptureDays as a duration.
func (p Payments) LateCapture() time.Duration {
	return time.Duration(p.LateCaptureDays) * 24 * time.Hour
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

// Default returns the configuration with every default of the specification
// and of docs/decisions.md. koanf.example.toml documents the same values.
func Default() Config {
	return Config{
		Server: Server{
			Host:            "127.0.0.1",
			Port:            50051,
			MaxConcurrency:  30,
			AdminPath:       "/admin",
			PublicURL:       "http://127.0.0.1:50051",
			MaxRequestBytes: 1 << 20,
			ShutdownTimeout: 15 * time.Second,
			ReadTimeoutSecs: 10,
			// Go's own default is 250; a client needs far fewer.
			MaxConcurrentStreams: 100,
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
		},
		JWT:       JWT{ExpiryHours: 24},
		Session:   Session{CookieName: "paymentd_session", IdleTimeoutMinutes: 1440, AbsoluteTimeoutHours: 168, CookieSameSite: "Lax"},
		Bootstrap: Bootstrap{AdminUsername: "admin"},
		RateLimit: RateLimit{Enabled: true, LoginPerSec: 5, RegisterPerSec: 1},
		Redis:     Redis{URL: "redis://127.0.0.1:6379/0", MaxConnections: 10, KeyPrefix: "rustbill"},
		Events: Events{
			PollInterval: 5 * time.Second, BatchSize: 10, MaxAttempts: 8, Concurrency: 16,
			HandlerTimeout: time.Minute, LockGrace: 30 * time.Second,
			RetryBase: 10 * time.Second, RetryMax: 30 * time.Minute,
			DrainTimeout: 10 * time.Second, TimeoutScanInterval: time.Minute,
		},
		Notify: Notify{
			PollInterval: 5 * time.Second, BatchSize: 20, Concurrency: 4, MaxAttempts: 8,
			RetryBase: 30 * time.Second, RetryMax: time.Hour, SendTimeout: 30 * time.Second,
			CustomerEmail: true, AdminEmails: []string{}, WebhookPlugin: "webhook", Webhooks: []NotifyWebhook{},
			SMTP: NotifySMTP{Port: 587, TLSPolicy: "mandatory", Auth: "none", Timeout: 15 * time.Second},
		},
		Plugins:  Plugins{Dir: "./plugins", ScanInterval: 5 * time.Minute},
		Billing:  Billing{Currencies: []string{"CNY", "USD"}, PaymentTimeout: 24 * time.Hour, ReconcileAfter: 10 * time.Minute},
		Payments: Payments{LateCaptureDays: 7},
		Cluster: Cluster{
			LeaseTTL:          30 * time.Second,
			LeaseRenew:        10 * time.Second,
			HeartbeatInterval: 10 * time.Second,
			NodeLostAfter:     30 * time.Second,
			MigrationWait:     60 * time.Second,
		},
		Log:      Log{Level: "info", Format: "auto"},
		Outbound: Outbound{FailureThreshold: 5, Cooldown: 30 * time.Second, Attempts: 3, Timeout: 10 * time.Second},
		Metrics:  Metrics{Enabled: true, Host: "127.0.0.1", Port: 9464},
		Tracing:  Tracing{Endpoint: "127.0.0.1:4317", Protocol: "grpc", SampleRatio: 1, ServiceName: "paymentd"},
		Secrets:  Secrets{Keys: map[string]string{}},
	}
}

// Load reads defaults, then path (when not empty; a missing explicit file is
// an error), then the environment given as KEY=VALUE strings (os.Environ()).
// It does not validate: call Validate.
func Load(path string, environ []string) (Config, error) {
	var paths []string
	if path != "" {
		paths = append(paths, path)
	}
	return LoadFiles(paths, environ)
}

// LoadFiles is Load with several files, each overriding the ones before it.
func LoadFiles(paths []string, environ []string) (Config, error) {
	k := koanf.New(".")
	if err := k.Load(structs.Provider(Default(), "koanf"), nil); err != nil {
		return Config{}, fmt.Errorf("config defaults: %w", err)
	}
	for _, path := range paths {
		if err := k.Load(file.Provider(path), toml.Parser()); err != nil {
			return Config{}, fmt.Errorf("config file %s: %w", path, err)
		}
	}
	envProvider := env.Provider(".", env.Opt{
		Prefix:        EnvPrefix,
		TransformFunc: envKey,
		EnvironFunc:   func() []string { return environ },
	})
	if err := k.Load(envProvider, nil); err != nil {
		return Config{}, fmt.Errorf("config environment: %w", err)
	}
	var c Config
	dc := &mapstructure.DecoderConfig{
		TagName:          "koanf",
		Result:           &c,
		WeaklyTypedInput: true,
		ErrorUnused:      true,
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			mapstructure.StringToTimeDurationHookFunc(),
			mapstructure.StringToSliceHookFunc(","),
		),
	}
	if err := k.UnmarshalWithConf("", &c, koanf.UnmarshalConf{DecoderConfig: dc}); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return c, nil
}

// envKey maps PAYMENTD_DB__URL to "db.url": a double underscore separates the
// section from the key, since keys themselves contain single underscores.
// A PAYMENTD_ variable without a double underscore (PAYMENTD_TEST_DATABASE_URL,
// PAYMENTD_BENCH_DATABASE_URL: the tests' and tools' own settings) is not
// configuration and is left out; a misspelt key within a section is still
// refused as unknown.
func envKey(k, v string) (string, any) {
	if !IsConfigEnv(k) {
		return "", nil
	}
	k = strings.ToLower(strings.TrimPrefix(k, EnvPrefix))
	return strings.ReplaceAll(k, "__", "."), v
}

// IsConfigEnv reports whether an environment variable's name is a
// configuration key: PAYMENTD_<SECTION>__<KEY>.
func IsConfigEnv(name string) bool {
	rest, ok := strings.CutPrefix(name, EnvPrefix)
	return ok && strings.Contains(rest, "__")
}

// ResolvePath picks the file to load: the flag when given, else DefaultFile
// when it exists, else none.
func ResolvePath(flag string) string {
	if flag != "" {
		return flag
	}
	if _, err := os.Stat(DefaultFile); err == nil {
		return DefaultFile
	}
	return ""
}

var currencyRE = regexp.MustCompile(`^[A-Z]{3}$`)

// Validate checks every key and returns all problems joined, each naming its
// key as [section].key.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s %s", key, fmt.Sprintf(format, args...)))
	}

	if c.Server.Host == "" {
		bad("[server].host", "must not be empty")
	}
	if c.Server.Port < 1 || c.Server.Port > 65535 {
		bad("[server].port", "must be between 1 and 65535, got %d", c.Server.Port)
	}
	if c.Server.MaxConcurrency < 1 {
		bad("[server].max_concurrency", "must be at least 1, got %d", c.Server.MaxConcurrency)
	}
	if c.Server.QueueTimeoutMS < 0 || c.Server.QueueTimeoutMS > 600_000 {
		bad("[server].queue_timeout_ms", "must be between 0 (wait) and 600000, got %d", c.Server.QueueTimeoutMS)
	}
	if !strings.HasPrefix(c.Server.AdminPath, "/") || c.Server.AdminPath == "/" || strings.HasSuffix(c.Server.AdminPath, "/") {
		bad("[server].admin_path", "must start with / and name a path such as /admin, got %q", c.Server.AdminPath)
	}
	if u, err := url.Parse(c.Server.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("[server].public_url", "must be an absolute http or https URL, got %q", c.Server.PublicURL)
	}
	if (c.Server.TLSCertFile == "") != (c.Server.TLSKeyFile == "") {
		bad("[server].tls_cert_file", "and [server].tls_key_file must be set together")
	}
	if c.Server.MaxRequestBytes < 1024 {
		bad("[server].max_request_bytes", "must be at least 1024, got %d", c.Server.MaxRequestBytes)
	}
	if c.Server.ShutdownTimeout <= 0 {
		bad("[server].shutdown_timeout", "must be positive")
	}
	if c.Server.ReadTimeoutSecs < 1 || c.Server.ReadTimeoutSecs > 300 {
		bad("[server].read_timeout_secs", "must be between 1 and 300, got %d", c.Server.ReadTimeoutSecs)
	}
	if c.Server.MaxConcurrentStreams < 1 || c.Server.MaxConcurrentStreams > 1000 {
		bad("[server].max_concurrent_streams", "must be between 1 and 1000, got %d", c.Server.MaxConcurrentStreams)
	}
	for _, p := range c.Server.TrustedProxies {
		if _, err := parsePrefix(p); err != nil {
			bad("[server].trusted_proxies", "must hold addresses or CIDR prefixes such as 10.0.0.0/8, got %q", p)
		}
	}

	for _, o := range c.Server.CORSAllowedOrigins {
		if !validOrigin(o) {
			bad("[server].cors_allowed_origins", "must hold origins such as https://shop.example (scheme, host, optional port; one * for a subdomain label), got %q", o)
		}
	}

	if c.DB.URL != "" {
		if _, err := url.Parse(c.DB.URL); err != nil || !(strings.HasPrefix(c.DB.URL, "postgres://") || strings.HasPrefix(c.DB.URL, "postgresql://")) {
			bad("[db].url", "must be a postgres:// URL")
		}
	}
	if c.DB.MaxConnections < 1 {
		bad("[db].max_connections", "must be at least 1, got %d", c.DB.MaxConnections)
	}
	if c.DB.MinConnections < 0 || c.DB.MinConnections > c.DB.MaxConnections {
		bad("[db].min_connections", "must be between 0 and [db].max_connections, got %d", c.DB.MinConnections)
	}
	for key, v := range map[string]int{
		"[db].idle_timeout_secs":    c.DB.IdleTimeoutSecs,
		"[db].max_lifetime_secs":    c.DB.MaxLifetimeSecs,
		"[db].acquire_timeout_secs": c.DB.AcquireTimeoutSecs,
	} {
		if v < 1 {
			bad(key, "must be at least 1, got %d", v)
		}
	}

	switch {
	case c.JWT.Secret == "":
		bad("[jwt].secret", "is required (at least 32 characters)")
	case c.JWT.Secret == PlaceholderJWTSecret:
		bad("[jwt].secret", "is the placeholder of koanf.example.toml: set a random secret of at least 32 characters")
	case utf8.RuneCountInString(c.JWT.Secret) < 32:
		bad("[jwt].secret", "must be at least 32 characters, got %d", utf8.RuneCountInString(c.JWT.Secret))
	}
	if c.JWT.ExpiryHours < 1 {
		bad("[jwt].expiry_hours", "must be at least 1, got %d", c.JWT.ExpiryHours)
	}

	if c.Session.CookieName == "" || strings.ContainsAny(c.Session.CookieName, " ;,=\t\r\n\"") {
		bad("[session].cookie_name", "must be a non-empty cookie token, got %q", c.Session.CookieName)
	}
	if c.Session.IdleTimeoutMinutes < 1 {
		bad("[session].idle_timeout_minutes", "must be at least 1, got %d", c.Session.IdleTimeoutMinutes)
	}
	if c.Session.AbsoluteTimeoutHours < 1 {
		bad("[session].absolute_timeout_hours", "must be at least 1, got %d", c.Session.AbsoluteTimeoutHours)
	}
	switch c.Session.CookieSameSite {
	case "Strict", "Lax":
	case "None":
		if !c.Session.CookieSecure {
			bad("[session].cookie_same_site", "None requires [session].cookie_secure = true (browsers drop the cookie otherwise)")
		}
	default:
		bad("[session].cookie_same_site", "must be Strict, Lax or None, got %q", c.Session.CookieSameSite)
	}

	if c.Bootstrap.AdminUsername == "" {
		bad("[bootstrap].admin_username", "must not be empty")
	}
	if c.Bootstrap.AdminPassword != "" && len(c.Bootstrap.AdminPassword) < 8 {
		bad("[bootstrap].admin_password", "must be at least 8 characters")
	}

	if c.RateLimit.Enabled {
		if c.RateLimit.LoginPerSec < 1 {
			bad("[rate_limit].login_per_sec", "must be at least 1, got %d", c.RateLimit.LoginPerSec)
		}
		if c.RateLimit.RegisterPerSec < 1 {
			bad("[rate_limit].register_per_sec", "must be at least 1, got %d", c.RateLimit.RegisterPerSec)
		}
	}

	if c.Redis.Enabled {
		if u, err := url.Parse(c.Redis.URL); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") {
			bad("[redis].url", "must be a redis:// or rediss:// URL")
		}
	}
	if c.Redis.MaxConnections < 1 {
		bad("[redis].max_connections", "must be at least 1, got %d", c.Redis.MaxConnections)
	}
	if c.Redis.KeyPrefix == "" {
		bad("[redis].key_prefix", "must not be empty")
	}

	if c.Events.PollInterval <= 0 {
		bad("[events].poll_interval", "must be positive")
	}
	if c.Events.BatchSize < 1 {
		bad("[events].batch_size", "must be at least 1, got %d", c.Events.BatchSize)
	}
	if c.Events.MaxAttempts < 1 {
		bad("[events].max_attempts", "must be at least 1, got %d", c.Events.MaxAttempts)
	}
	if c.Events.Concurrency < 1 {
		bad("[events].concurrency", "must be at least 1, got %d", c.Events.Concurrency)
	}
	for key, d := range map[string]time.Duration{
		"[events].handler_timeout": c.Events.HandlerTimeout, "[events].lock_grace": c.Events.LockGrace,
		"[events].retry_base": c.Events.RetryBase, "[events].retry_max": c.Events.RetryMax,
		"[events].drain_timeout": c.Events.DrainTimeout, "[events].timeout_scan_interval": c.Events.TimeoutScanInterval,
		"[notify].poll_interval": c.Notify.PollInterval, "[notify].retry_base": c.Notify.RetryBase,
		"[notify].retry_max": c.Notify.RetryMax, "[notify].send_timeout": c.Notify.SendTimeout,
	} {
		if d <= 0 {
			bad(key, "must be positive")
		}
	}

	if c.Plugins.Dir == "" {
		bad("[plugins].dir", "must not be empty")
	}
	if c.Plugins.ScanInterval <= 0 {
		bad("[plugins].scan_interval", "must be positive")
	}

	if len(c.Billing.Currencies) == 0 {
		bad("[billing].currencies", "must list at least one currency")
	}
	for _, cur := range c.Billing.Currencies {
		if !currencyRE.MatchString(cur) {
			bad("[billing].currencies", "must hold ISO 4217 codes of three capital letters, got %q", cur)
		}
	}
	if c.Billing.PaymentTimeout <= 0 {
		bad("[billing].payment_timeout", "must be positive")
	}
	if c.Billing.ReconcileAfter <= 0 {
		bad("[billing].reconcile_after", "must be positive")
	}
	if c.Payments.LateCaptureDays < 0 || c.Payments.LateCaptureDays > 366 {
		bad("[payments].late_capture_days", "must be from 0 (off) to 366, got %d", c.Payments.LateCaptureDays)
	}

	if c.Cluster.LeaseTTL <= 0 || c.Cluster.LeaseRenew <= 0 || c.Cluster.LeaseRenew >= c.Cluster.LeaseTTL {
		bad("[cluster].lease_renew", "must be positive and shorter than [cluster].lease_ttl")
	}
	if c.Cluster.HeartbeatInterval <= 0 || c.Cluster.NodeLostAfter <= c.Cluster.HeartbeatInterval {
		bad("[cluster].node_lost_after", "must be longer than [cluster].heartbeat_interval")
	}
	if c.Cluster.MigrationWait <= 0 {
		bad("[cluster].migration_wait", "must be positive")
	}

	if c.Outbound.FailureThreshold < 1 {
		bad("[outbound].failure_threshold", "must be at least 1, got %d", c.Outbound.FailureThreshold)
	}
	if c.Outbound.Attempts < 1 {
		bad("[outbound].attempts", "must be at least 1, got %d", c.Outbound.Attempts)
	}
	if c.Outbound.Timeout <= 0 || c.Outbound.Cooldown <= c.Outbound.Timeout {
		bad("[outbound].cooldown", "must be longer than [outbound].timeout (an attempt begun before the breaker opened must be over before its probe)")
	}

	switch strings.ToLower(c.Log.Level) {
	case "debug", "info", "warn", "error":
	default:
		bad("[log].level", "must be debug, info, warn or error, got %q", c.Log.Level)
	}
	switch c.Log.Format {
	case "auto", "json", "text":
	default:
		bad("[log].format", "must be auto, json or text, got %q", c.Log.Format)
	}

	if c.Metrics.Enabled {
		if c.Metrics.Host == "" {
			bad("[metrics].host", "must not be empty")
		}
		if c.Metrics.Port < 0 || c.Metrics.Port > 65535 {
			bad("[metrics].port", "must be between 0 and 65535, got %d", c.Metrics.Port)
		}
		if c.Metrics.Port != 0 && c.Metrics.Port == c.Server.Port && (c.Metrics.Host == c.Server.Host || c.Server.Host == "0.0.0.0" || c.Server.Host == "::") {
			bad("[metrics].port", "must differ from [server].port: metrics stay off the public listener")
		}
	} else if c.Metrics.Pprof {
		bad("[metrics].pprof", "needs [metrics].enabled = true (pprof is served on the metrics listener only)")
	}
	if c.Tracing.Enabled {
		if host, port, err := net.SplitHostPort(c.Tracing.Endpoint); err != nil || host == "" || port == "" {
			bad("[tracing].endpoint", "must be host:port of an OTLP collector, got %q", c.Tracing.Endpoint)
		}
		if c.Tracing.ServiceName == "" {
			bad("[tracing].service_name", "must not be empty")
		}
	}
	switch c.Tracing.Protocol {
	case "grpc", "http":
	default:
		bad("[tracing].protocol", "must be grpc or http, got %q", c.Tracing.Protocol)
	}
	if c.Tracing.SampleRatio < 0 || c.Tracing.SampleRatio > 1 || math.IsNaN(c.Tracing.SampleRatio) {
		bad("[tracing].sample_ratio", "must be between 0 and 1, got %v", c.Tracing.SampleRatio)
	}
	c.Secrets.validate(bad)
	return errors.Join(errs...)
}

// validate reports [secrets] problems through bad; a key's value is never
// quoted.
func (s Secrets) validate(bad func(key, format string, args ...any)) {
	switch _, ok := s.Keys[s.Current]; {
	case len(s.Keys) == 0 && s.Current != "":
		bad("[secrets].current", "names key %q, but [secrets].keys is empty", s.Current)
	case len(s.Keys) > 0 && s.Current == "":
		bad("[secrets].current", "is required when [secrets].keys is set: it names the key that encrypts (the others only decrypt)")
	case len(s.Keys) > 0 && !ok:
		bad("[secrets].current", "names key %q, which [secrets].keys does not hold", s.Current)
	}
	ids := make([]string, 0, len(s.Keys))
	for id := range s.Keys {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if !secrets.ValidKeyID(id) {
			bad("[secrets].keys", "key ids are lowercase letters and digits, words joined by single underscores, at most %d characters (they are part of PAYMENTD_SECRETS__KEYS__<ID> and of every encrypted value), got %q",
				secrets.MaxKeyIDLen, id)
			continue
		}
		if _, err := secrets.DecodeKey(s.Keys[id]); err != nil {
			bad("[secrets].keys."+id, "%v: a key is 32 random bytes in standard base64 (openssl rand -base64 32)", err)
		}
	}
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

// validOrigin reports whether o is a browser origin: http or https, a host
// and an optional port, nothing more. A "*" may stand for one leading part
// of the host (https://*.shop.example, which rs/cors matches); "*" alone is
// refused: an operator names the sites whose pages may call the API.
func validOrigin(o string) bool {
	u, err := url.Parse(strings.Replace(o, "://*.", "://x--wildcard.", 1))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return false
	}
	return u.Path == "" && u.RawQuery == "" && u.Fragment == "" && u.User == nil &&
		!strings.Contains(u.Host, "*") && o == strings.ToLower(o) &&
		u.Scheme+"://"+strings.Replace(u.Host, "x--wildcard.", "*.", 1) == o
}
