package config

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // [billing].time_zone loads on a host without /usr/share/zoneinfo
	"unicode/utf8"

	"github.com/rustbill/paymentd/internal/logging"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/retention"
	"github.com/rustbill/paymentd/internal/secrets"
)

var currencyRE = regexp.MustCompile(`^[A-Z]{3}$`)

// Warnings names what is valid but most likely a mistake, each naming its
// keys; config check prints them and the service logs them at start. They
// do not stop either.
func (c Config) Warnings() []string {
	var out []string
	if u, err := url.Parse(c.Server.PublicURL); err == nil && u.Scheme == "https" && !c.Session.CookieSecure {
		// Behind a proxy that terminates TLS the service sees plain HTTP,
		// so the public URL is what says browsers reach it over HTTPS.
		out = append(out, fmt.Sprintf("[server].public_url is %s but [session].cookie_secure = false: browsers will also send the admin session cookie over plain HTTP; set [session].cookie_secure = true", u.Scheme+"://"+u.Host))
	}
	if w := c.Server.publicPortWarning(); w != "" {
		out = append(out, w)
	}
	return out
}

// publicPortWarning names a loopback [server].public_url on another port
// than [server].port: gateways (here, a fake or a tunnel on this host)
// would post callbacks to a port nothing of ours listens on, typically
// after the port was moved and the URL was not. A public URL on another
// host is a proxy's or a tunnel's, whose port is rightly its own: not
// looked at. A loopback proxy in front is possible too, hence a warning.
func (s Server) publicPortWarning() string {
	u, err := url.Parse(s.PublicURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return ""
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); !(strings.EqualFold(host, "localhost") || (err == nil && ip.IsLoopback())) {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if port == strconv.Itoa(s.Port) {
		return ""
	}
	return fmt.Sprintf("[server].public_url %s is this host on port %s but [server].port is %d: gateways would post callbacks to %s/callbacks/… where the service does not listen; set [server].public_url to %s://%s unless a proxy on this host listens on %s",
		s.PublicURL, port, s.Port, strings.TrimSuffix(s.PublicURL, "/"), u.Scheme, net.JoinHostPort(host, strconv.Itoa(s.Port)), port)
}

// ErrInvalid marks a configuration problem found outside Validate (a
// plugin directory that cannot be read, a bootstrap password a database
// without admins needs): the commands exit 2 on it, as on Validate's
// errors, since restarting cannot fix it.
var ErrInvalid = errors.New("invalid configuration")

// Invalid marks err as a configuration problem (errors.Is(_, ErrInvalid))
// without changing its message.
func Invalid(err error) error { return invalidError{err} }

type invalidError struct{ error }

func (e invalidError) Unwrap() error        { return e.error }
func (e invalidError) Is(target error) bool { return target == ErrInvalid }

// Section names a section of the configuration for ValidateSections.
type Section string

// The sections, in the order of the file.
const (
	SectionServer    Section = "server"
	SectionDB        Section = "db"
	SectionJWT       Section = "jwt"
	SectionSession   Section = "session"
	SectionBootstrap Section = "bootstrap"
	SectionAdmin     Section = "admin"
	SectionRateLimit Section = "rate_limit"
	SectionRedis     Section = "redis"
	SectionEvents    Section = "events"
	SectionNotify    Section = "notify"
	SectionPlugins   Section = "plugins"
	SectionBilling   Section = "billing"
	SectionPayments  Section = "payments"
	SectionCluster   Section = "cluster"
	SectionOutbound  Section = "outbound"
	SectionExport    Section = "export"
	SectionRetention Section = "retention"
	SectionLog       Section = "log"
	SectionMetrics   Section = "metrics"
	SectionTracing   Section = "tracing"
	SectionSecrets   Section = "secrets"
)

// sectionChecks are the sections' validations in the order of the file;
// [metrics] also looks at [server]'s port.
var sectionChecks = []struct {
	section Section
	check   func(c Config, bad badFunc)
}{
	{SectionServer, func(c Config, bad badFunc) { c.Server.validate(bad) }},
	{SectionDB, func(c Config, bad badFunc) { c.DB.validate(bad) }},
	{SectionJWT, func(c Config, bad badFunc) { c.JWT.validate(bad) }},
	{SectionSession, func(c Config, bad badFunc) { c.Session.validate(bad) }},
	{SectionBootstrap, func(c Config, bad badFunc) { c.Bootstrap.validate(bad) }},
	{SectionAdmin, func(c Config, bad badFunc) {
		if c.Admin.APIKeyMaxLifetimeDays < 0 || c.Admin.APIKeyMaxLifetimeDays > 3650 {
			bad("[admin].api_key_max_lifetime_days", "must be 0 (keys may never expire) to 3650, got %d", c.Admin.APIKeyMaxLifetimeDays)
		}
		if c.Admin.Require2FA && c.Secrets.Current == "" {
			// Enrolment seals the TOTP secret with [secrets]: without a key
			// no admin could ever get past enrolment.
			bad("[admin].require_2fa", "needs a [secrets] key (current and keys), which seals the admins' TOTP secrets; without one no admin could enrol")
		}
	}},
	{SectionRateLimit, func(c Config, bad badFunc) { c.RateLimit.validate(bad) }},
	{SectionRedis, func(c Config, bad badFunc) { c.Redis.validate(bad) }},
	{SectionEvents, func(c Config, bad badFunc) { c.Events.validate(bad) }},
	{SectionNotify, func(c Config, bad badFunc) { c.Notify.validate(bad) }},
	{SectionPlugins, func(c Config, bad badFunc) { c.Plugins.validate(bad) }},
	{SectionBilling, func(c Config, bad badFunc) { c.Billing.validate(bad) }},
	{SectionPayments, func(c Config, bad badFunc) { c.Payments.validate(bad) }},
	{SectionCluster, func(c Config, bad badFunc) { c.Cluster.validate(bad) }},
	{SectionOutbound, func(c Config, bad badFunc) { c.Outbound.validate(bad) }},
	{SectionExport, func(c Config, bad badFunc) { c.Export.validate(bad) }},
	{SectionRetention, func(c Config, bad badFunc) { c.Retention.validate(bad) }},
	{SectionLog, func(c Config, bad badFunc) { c.Log.validate(bad) }},
	{SectionMetrics, func(c Config, bad badFunc) { c.Metrics.validate(c.Server, bad) }},
	{SectionTracing, func(c Config, bad badFunc) { c.Tracing.validate(bad) }},
	{SectionSecrets, func(c Config, bad badFunc) { c.Secrets.validate(bad) }},
}

// Validate checks every key and returns all problems joined, each naming its
// key as [section].key: what the service (serve, dev) and config check ask.
func (c Config) Validate() error {
	return c.validate(func(Section) bool { return true })
}

// ValidateSections checks the keys of the given sections only: an
// operator's command asks for what it uses (verify reads the ledger and
// needs [db], not a [jwt].secret).
func (c Config) ValidateSections(sections ...Section) error {
	return c.validate(func(s Section) bool { return slices.Contains(sections, s) })
}

func (c Config) validate(want func(Section) bool) error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s %s", key, fmt.Sprintf(format, args...)))
	}
	for _, sc := range sectionChecks {
		if want(sc.section) {
			sc.check(c, bad)
		}
	}
	return errors.Join(errs...)
}

// CheckPluginDir reports, wrapping ErrInvalid, a [plugins].dir that cannot
// be read: the service would start with no gateway loaded and answer
// /ready all the same. One line, naming the key and the resolved path.
func (c Config) CheckPluginDir() error {
	if _, err := os.ReadDir(c.Plugins.Dir); err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return Invalid(fmt.Errorf("[plugins].dir %s cannot be read: %v (a relative dir is resolved against the configuration file's directory; docs/operations.md, \"The plugin directory\")",
			c.Plugins.Dir, err))
	}
	return nil
}

// badFunc reports one problem of key; Validate collects them.
type badFunc func(key, format string, args ...any)

// validate reports problems of the listener through bad.
func (s Server) validate(bad badFunc) {
	if s.Host == "" {
		bad("[server].host", "must not be empty")
	}
	if s.Port < 1 || s.Port > 65535 {
		bad("[server].port", "must be between 1 and 65535, got %d", s.Port)
	}
	if s.MaxConcurrency < 1 {
		bad("[server].max_concurrency", "must be at least 1, got %d", s.MaxConcurrency)
	}
	if s.QueueTimeoutMS < 0 || s.QueueTimeoutMS > 600_000 {
		bad("[server].queue_timeout_ms", "must be between 0 (wait) and 600000, got %d", s.QueueTimeoutMS)
	}
	if !strings.HasPrefix(s.AdminPath, "/") || s.AdminPath == "/" || strings.HasSuffix(s.AdminPath, "/") {
		bad("[server].admin_path", "must start with / and name a path such as /admin, got %q", s.AdminPath)
	}
	if u, err := url.Parse(s.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("[server].public_url", "must be an absolute http or https URL, got %q", s.PublicURL)
	}
	if (s.TLSCertFile == "") != (s.TLSKeyFile == "") {
		bad("[server].tls_cert_file", "and [server].tls_key_file must be set together")
	}
	if s.MaxRequestBytes < 1024 {
		bad("[server].max_request_bytes", "must be at least 1024, got %d", s.MaxRequestBytes)
	}
	if s.ShutdownTimeout <= 0 {
		bad("[server].shutdown_timeout", "must be positive")
	}
	if s.ReadTimeoutSecs < 1 || s.ReadTimeoutSecs > 300 {
		bad("[server].read_timeout_secs", "must be between 1 and 300, got %d", s.ReadTimeoutSecs)
	}
	if s.MaxConcurrentStreams < 1 || s.MaxConcurrentStreams > 1000 {
		bad("[server].max_concurrent_streams", "must be between 1 and 1000, got %d", s.MaxConcurrentStreams)
	}
	for _, p := range s.TrustedProxies {
		if _, err := parsePrefix(p); err != nil {
			bad("[server].trusted_proxies", "must hold addresses or CIDR prefixes such as 10.0.0.0/8, got %q", p)
		}
	}

	for _, o := range s.CORSAllowedOrigins {
		if !validOrigin(o) {
			bad("[server].cors_allowed_origins", "must hold origins such as https://shop.example (scheme, host, optional port; one * for a subdomain label), got %q", o)
		}
	}
}

// validate reports problems of the pool through bad.
func (d DB) validate(bad badFunc) {
	for _, k := range [][2]string{{"[db].url", d.URL}, {"[db].replica_url", d.ReplicaURL}} {
		key, u := k[0], k[1]
		if u == "" {
			continue
		}
		if _, err := url.Parse(u); err != nil || !(strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://")) {
			bad(key, "must be a postgres:// URL")
		}
	}
	if d.ReplicaURL != "" && d.ReplicaURL == d.URL {
		bad("[db].replica_url", "is [db].url: name a streaming standby of it, or leave it empty")
	}
	// Below a second the once-a-second check could not keep the replica in
	// use; past an hour the reports it serves are another day's.
	if d.ReplicaMaxLag < time.Second || d.ReplicaMaxLag > time.Hour {
		bad("[db].replica_max_lag", "must be between 1s and 1h, got %s", d.ReplicaMaxLag)
	}
	if d.MaxConnections < 1 {
		bad("[db].max_connections", "must be at least 1, got %d", d.MaxConnections)
	}
	if d.MinConnections < 0 || d.MinConnections > d.MaxConnections {
		bad("[db].min_connections", "must be between 0 and [db].max_connections, got %d", d.MinConnections)
	}
	for key, v := range map[string]int{
		"[db].idle_timeout_secs":    d.IdleTimeoutSecs,
		"[db].max_lifetime_secs":    d.MaxLifetimeSecs,
		"[db].acquire_timeout_secs": d.AcquireTimeoutSecs,
	} {
		if v < 1 {
			bad(key, "must be at least 1, got %d", v)
		}
	}
}

// validate reports problems of the token signing through bad.
func (j JWT) validate(bad badFunc) {
	switch {
	case j.Secret == "":
		bad("[jwt].secret", "is required (at least 32 characters)")
	case j.Secret == PlaceholderJWTSecret:
		bad("[jwt].secret", "is the placeholder of koanf.example.toml: set a random secret of at least 32 characters")
	case utf8.RuneCountInString(j.Secret) < 32:
		bad("[jwt].secret", "must be at least 32 characters, got %d", utf8.RuneCountInString(j.Secret))
	}
	if j.ExpiryHours < 1 {
		bad("[jwt].expiry_hours", "must be at least 1, got %d", j.ExpiryHours)
	}
}

// validate reports problems of the admin session cookie through bad.
func (s Session) validate(bad badFunc) {
	if s.CookieName == "" || strings.ContainsAny(s.CookieName, " ;,=\t\r\n\"") {
		bad("[session].cookie_name", "must be a non-empty cookie token, got %q", s.CookieName)
	}
	if s.IdleTimeoutMinutes < 1 {
		bad("[session].idle_timeout_minutes", "must be at least 1, got %d", s.IdleTimeoutMinutes)
	}
	if s.AbsoluteTimeoutHours < 1 {
		bad("[session].absolute_timeout_hours", "must be at least 1, got %d", s.AbsoluteTimeoutHours)
	}
	switch s.CookieSameSite {
	case "Strict", "Lax":
	case "None":
		if !s.CookieSecure {
			bad("[session].cookie_same_site", "None requires [session].cookie_secure = true (browsers drop the cookie otherwise)")
		}
	default:
		bad("[session].cookie_same_site", "must be Strict, Lax or None, got %q", s.CookieSameSite)
	}
}

// validate reports problems of the first admin through bad.
func (b Bootstrap) validate(bad badFunc) {
	if b.AdminUsername == "" {
		bad("[bootstrap].admin_username", "must not be empty")
	}
	if b.AdminPassword != "" && len(b.AdminPassword) < 8 {
		bad("[bootstrap].admin_password", "must be at least 8 characters")
	}
}

// validate reports problems of the per-IP limits through bad.
func (r RateLimit) validate(bad badFunc) {
	if r.Enabled {
		if r.LoginPerSec < 1 {
			bad("[rate_limit].login_per_sec", "must be at least 1, got %d", r.LoginPerSec)
		}
		if r.RegisterPerSec < 1 {
			bad("[rate_limit].register_per_sec", "must be at least 1, got %d", r.RegisterPerSec)
		}
		if r.PasswordPerSec < 1 {
			bad("[rate_limit].password_per_sec", "must be at least 1, got %d", r.PasswordPerSec)
		}
		if r.PasswordPerAccountPerMin < 1 {
			bad("[rate_limit].password_per_account_per_min", "must be at least 1, got %d", r.PasswordPerAccountPerMin)
		}
	}
}

// validate reports problems of the shared cache through bad.
func (r Redis) validate(bad badFunc) {
	if r.Enabled {
		if u, err := url.Parse(r.URL); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") {
			bad("[redis].url", "must be a redis:// or rediss:// URL")
		}
	}
	if r.MaxConnections < 1 {
		bad("[redis].max_connections", "must be at least 1, got %d", r.MaxConnections)
	}
	if r.KeyPrefix == "" {
		bad("[redis].key_prefix", "must not be empty")
	}
}

// validate reports problems of the event worker through bad.
func (e Events) validate(bad badFunc) {
	if e.PollInterval <= 0 {
		bad("[events].poll_interval", "must be positive")
	}
	if e.BatchSize < 1 {
		bad("[events].batch_size", "must be at least 1, got %d", e.BatchSize)
	}
	if e.MaxAttempts < 1 {
		bad("[events].max_attempts", "must be at least 1, got %d", e.MaxAttempts)
	}
	if e.Concurrency < 1 {
		bad("[events].concurrency", "must be at least 1, got %d", e.Concurrency)
	}
	for key, d := range map[string]time.Duration{
		"[events].handler_timeout": e.HandlerTimeout, "[events].lock_grace": e.LockGrace,
		"[events].retry_base": e.RetryBase, "[events].retry_max": e.RetryMax,
		"[events].drain_timeout": e.DrainTimeout, "[events].timeout_scan_interval": e.TimeoutScanInterval,
	} {
		if d <= 0 {
			bad(key, "must be positive")
		}
	}
}

// validate reports problems of the notification sender (internal/notify checks the rest at start) through bad.
func (n Notify) validate(bad badFunc) {
	for key, d := range map[string]time.Duration{
		"[notify].poll_interval": n.PollInterval, "[notify].retry_base": n.RetryBase,
		"[notify].retry_max": n.RetryMax, "[notify].send_timeout": n.SendTimeout,
	} {
		if d <= 0 {
			bad(key, "must be positive")
		}
	}
}

// validate reports problems of the plugin scanner through bad.
func (p Plugins) validate(bad badFunc) {
	if p.Dir == "" {
		bad("[plugins].dir", "must not be empty")
	}
	if p.ScanInterval <= 0 {
		bad("[plugins].scan_interval", "must be positive")
	}
}

// validate reports problems of the money rules through bad.
func (b Billing) validate(bad badFunc) {
	if len(b.Currencies) == 0 {
		bad("[billing].currencies", "must list at least one currency")
	}
	for _, cur := range b.Currencies {
		if !currencyRE.MatchString(cur) {
			bad("[billing].currencies", "must hold ISO 4217 codes of three capital letters, got %q", cur)
		}
	}
	if b.PaymentTimeout <= 0 {
		bad("[billing].payment_timeout", "must be positive")
	}
	if b.ReconcileAfter <= 0 {
		bad("[billing].reconcile_after", "must be positive")
	}
	// "Local" is the host's zone: instances on different hosts would end
	// the same period at different instants.
	if _, err := time.LoadLocation(b.TimeZone); err != nil || b.TimeZone == "" || b.TimeZone == "Local" {
		bad("[billing].time_zone", "must be an IANA time zone name such as UTC or Europe/Berlin, got %q", b.TimeZone)
	}
	if b.RunInterval < time.Second || b.RunInterval > 24*time.Hour {
		bad("[billing].run_interval", "must be from 1s to 24h, got %s", b.RunInterval)
	}
	if b.RenewalInvoiceDays < 0 || b.RenewalInvoiceDays > maxRenewalInvoiceDays {
		bad("[billing].renewal_invoice_days", "must be from 0 to %d, less than the shortest cycle (a monthly period may last 28 days), got %d",
			maxRenewalInvoiceDays, b.RenewalInvoiceDays)
	}
	// The bound keeps days × 24 h far from overflowing a time.Duration.
	if b.SuspendAfterDays < 0 || b.SuspendAfterDays > 366 {
		bad("[billing].suspend_after_days", "must be from 0 (off) to 366, got %d", b.SuspendAfterDays)
	}
	if b.TerminateAfterDays < 0 || b.TerminateAfterDays > 366 {
		bad("[billing].terminate_after_days", "must be from 0 (off) to 366, got %d", b.TerminateAfterDays)
	}
	if b.ReminderDaysBefore < 0 || b.ReminderDaysBefore > 27 {
		bad("[billing].reminder_days_before", "must be from 0 (off) to 27, got %d", b.ReminderDaysBefore)
	}
	for i, d := range b.OverdueReminderDays {
		if d < 1 || d > 366 || (i > 0 && d <= b.OverdueReminderDays[i-1]) {
			bad("[billing].overdue_reminder_days", "must be ascending days from 1 to 366, got %v", b.OverdueReminderDays)
			break
		}
	}
	for i, d := range b.CardRetryDays {
		if d < 1 || d > 366 || (i > 0 && d <= b.CardRetryDays[i-1]) {
			bad("[billing].card_retry_days", "must be ascending days from 1 to 366, got %v", b.CardRetryDays)
			break
		}
	}
	if c := order.EndCredit(b.EndNowCredit); c != order.CreditBalance && c != order.CreditNone {
		bad("[billing].end_now_credit", "must be %q or %q (a customer never refunds to the gateway themselves), got %q",
			order.CreditBalance, order.CreditNone, b.EndNowCredit)
	}
	if c := order.EndCredit(b.DowngradeCredit); c != order.CreditBalance && c != order.CreditNone {
		bad("[billing].downgrade_credit", "must be %q or %q, got %q", order.CreditBalance, order.CreditNone, b.DowngradeCredit)
	}
	if b.PlanChangeDays < 1 || b.PlanChangeDays > 60 {
		bad("[billing].plan_change_days", "must be from 1 to 60, got %d", b.PlanChangeDays)
	}
	if b.SuspendAfterDays > 0 && b.TerminateAfterDays > 0 && b.TerminateAfterDays <= b.SuspendAfterDays {
		bad("[billing].terminate_after_days", "must be greater than [billing].suspend_after_days (%d) or 0 (off), got %d: termination before suspension",
			b.SuspendAfterDays, b.TerminateAfterDays)
	}
}

// maxRenewalInvoiceDays keeps a renewal invoice within the period before
// the one it is for: the shortest cycle is a month, and February has 28
// days.
const maxRenewalInvoiceDays = 27

// validate reports problems of the payment rules through bad.
func (p Payments) validate(bad badFunc) {
	if p.LateCaptureDays < 0 || p.LateCaptureDays > 366 {
		bad("[payments].late_capture_days", "must be from 0 (off) to 366, got %d", p.LateCaptureDays)
	}
}

// validate reports problems of the leases and heartbeats through bad.
func (c Cluster) validate(bad badFunc) {
	if c.LeaseTTL <= 0 || c.LeaseRenew <= 0 || c.LeaseRenew >= c.LeaseTTL {
		bad("[cluster].lease_renew", "must be positive and shorter than [cluster].lease_ttl")
	}
	if c.HeartbeatInterval <= 0 || c.NodeLostAfter <= c.HeartbeatInterval {
		bad("[cluster].node_lost_after", "must be longer than [cluster].heartbeat_interval")
	}
	if c.MigrationWait <= 0 {
		bad("[cluster].migration_wait", "must be positive")
	}
}

// validate reports problems of the outbound client through bad.
func (o Outbound) validate(bad badFunc) {
	if o.FailureThreshold < 1 {
		bad("[outbound].failure_threshold", "must be at least 1, got %d", o.FailureThreshold)
	}
	if o.Attempts < 1 {
		bad("[outbound].attempts", "must be at least 1, got %d", o.Attempts)
	}
	if o.Timeout <= 0 || o.Cooldown <= o.Timeout {
		bad("[outbound].cooldown", "must be longer than [outbound].timeout (an attempt begun before the breaker opened must be over before its probe)")
	}
}

// validate reports problems of the CSV exports through bad.
func (e Export) validate(bad badFunc) {
	if e.MaxConcurrent < 1 || e.MaxConcurrent > 100 {
		bad("[export].max_concurrent", "must be between 1 and 100, got %d", e.MaxConcurrent)
	}
	if e.WriteTimeout < time.Second || e.WriteTimeout > 10*time.Minute {
		bad("[export].write_timeout", "must be between 1s and 10m, got %s", e.WriteTimeout)
	}
}

// validate reports problems of the retention through bad.
func (r Retention) validate(bad badFunc) {
	if r.EventDays < 0 || r.EventDays > 36600 {
		bad("[retention].event_days", "must be from 0 (keep for good) to 36600, got %d", r.EventDays)
	}
	if r.NotificationDays < 0 || r.NotificationDays > 36600 {
		bad("[retention].notification_days", "must be from 0 (keep for good) to 36600, got %d", r.NotificationDays)
	}
	if r.AuditMonths != 0 && (r.AuditMonths < retention.MinAuditMonths || r.AuditMonths > 1200) {
		bad("[retention].audit_months", "must be 0 (keep for good) or from %d (a year of audit trail, PCI DSS 10.5.1) to 1200, got %d",
			retention.MinAuditMonths, r.AuditMonths)
	}
	if r.Interval < time.Minute || r.Interval > 7*24*time.Hour {
		bad("[retention].interval", "must be from 1m to 168h, got %s", r.Interval)
	}
	if r.BatchSize < 100 || r.BatchSize > 100_000 {
		bad("[retention].batch_size", "must be from 100 to 100000, got %d", r.BatchSize)
	}
}

// validate reports problems of the log output through bad.
func (l Log) validate(bad badFunc) {
	if !logging.ValidLevel(l.Level) {
		bad("[log].level", "must be debug, info, warn or error, got %q", l.Level)
	}
	if !logging.ValidFormat(l.Format) {
		bad("[log].format", "must be auto, json or text, got %q", l.Format)
	}
}

// validate reports problems of the metrics listener through bad.
func (m Metrics) validate(server Server, bad badFunc) {
	if m.Enabled {
		if m.Host == "" {
			bad("[metrics].host", "must not be empty")
		}
		if m.Port < 0 || m.Port > 65535 {
			bad("[metrics].port", "must be between 0 and 65535, got %d", m.Port)
		}
		if m.Port != 0 && m.Port == server.Port && (m.Host == server.Host || server.Host == "0.0.0.0" || server.Host == "::") {
			bad("[metrics].port", "must differ from [server].port: metrics stay off the public listener")
		}
	} else if m.Pprof {
		bad("[metrics].pprof", "needs [metrics].enabled = true (pprof is served on the metrics listener only)")
	}
}

// validate reports problems of the trace export through bad.
func (t Tracing) validate(bad badFunc) {
	if t.Enabled {
		if host, port, err := net.SplitHostPort(t.Endpoint); err != nil || host == "" || port == "" {
			bad("[tracing].endpoint", "must be host:port of an OTLP collector, got %q", t.Endpoint)
		}
		if t.ServiceName == "" {
			bad("[tracing].service_name", "must not be empty")
		}
	}
	switch t.Protocol {
	case "grpc", "http":
	default:
		bad("[tracing].protocol", "must be grpc or http, got %q", t.Protocol)
	}
	if t.SampleRatio < 0 || t.SampleRatio > 1 || math.IsNaN(t.SampleRatio) {
		bad("[tracing].sample_ratio", "must be between 0 and 1, got %v", t.SampleRatio)
	}
}

// validate reports [secrets] problems through bad; a key's value is never
// quoted.
func (s Secrets) validate(bad badFunc) {
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
