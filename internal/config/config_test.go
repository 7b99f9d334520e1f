package config

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const goodSecret = "0123456789abcdef0123456789abcdef"

func valid() Config {
	c := Default()
	c.JWT.Secret = goodSecret
	return c
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "paymentd.toml")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

func TestExampleFileDocumentsEveryDefault(t *testing.T) {
	t.Parallel()
	c, err := Load("../../koanf.example.toml", nil)
	require.NoError(t, err)
	want := Default()
	want.JWT.Secret = PlaceholderJWTSecret
	// "./plugins" of the file is its own folder's, the repository's.
	want.Plugins.Dir, err = filepath.Abs("../../plugins")
	require.NoError(t, err)
	// Equal values say that each key the file sets is set to its default; a
	// key the file leaves out keeps its default too, so this alone cannot
	// tell that the file shows every key: toml_test.go's
	// TestTOMLOfTheDefaultsHasTheSectionsAndKeysOfTheExampleFile does.
	require.Equal(t, want, c, "koanf.example.toml must set every key it shows to its default")

}

func TestExampleFileIsRefusedBecauseOfThePlaceholderSecret(t *testing.T) {
	t.Parallel()
	c, err := Load("../../koanf.example.toml", nil)
	require.NoError(t, err)
	err = c.Validate()
	require.ErrorContains(t, err, "[jwt].secret is the placeholder")
}

func TestDefaultsWithASecretAreValid(t *testing.T) {
	t.Parallel()
	require.NoError(t, valid().Validate())
}

func TestEnvironmentOverridesFileAndDefaults(t *testing.T) {
	t.Parallel()
	p := writeFile(t, `
[server]
port = 6000
[db]
url = "postgres://from-file@127.0.0.1/x"
[jwt]
secret = "`+goodSecret+`"
`)
	c, err := Load(p, []string{
		"PAYMENTD_SERVER__PORT=7000",
		"PAYMENTD_SERVER__MAX_CONCURRENCY=3",
		"PAYMENTD_BILLING__CURRENCIES=EUR,USD",
		"PAYMENTD_SESSION__COOKIE_SECURE=true",
		"PAYMENTD_EVENTS__POLL_INTERVAL=250ms",
		"HOME=/root", // not ours: ignored
		// The tests' and tools' own PAYMENTD_ settings (no section) are
		// not configuration: a server started with them in its
		// environment must not refuse them as unknown keys.
		"PAYMENTD_TEST_DATABASE_URL=postgres://tests@127.0.0.1/test",
		"PAYMENTD_BENCH_DATABASE_URL=postgres://bench@127.0.0.1/bench",
		"PAYMENTD_E2E_DOCS_SCREENSHOT=1",
	})
	require.NoError(t, err)
	require.Equal(t, 7000, c.Server.Port)
	require.Equal(t, 3, c.Server.MaxConcurrency)
	require.Equal(t, "postgres://from-file@127.0.0.1/x", c.DB.URL)
	require.Equal(t, []string{"EUR", "USD"}, c.Billing.Currencies)
	require.True(t, c.Session.CookieSecure)
	require.Equal(t, 250*time.Millisecond, c.Events.PollInterval)
	require.Equal(t, "127.0.0.1", c.Server.Host, "untouched keys keep their default")
	require.NoError(t, c.Validate())
}

func TestUnknownKeysAreErrors(t *testing.T) {
	t.Parallel()
	p := writeFile(t, "[server]\nprot = 1\n")
	_, err := Load(p, nil)
	require.ErrorContains(t, err, "prot")

	_, err = Load("", []string{"PAYMENTD_DB__URLL=postgres://x"})
	require.ErrorContains(t, err, "url")

	_, err = Load("", []string{"PAYMENTD_NOSUCHSECTION__KEY=1"})
	require.ErrorContains(t, err, "nosuchsection", "a variable shaped as configuration is checked like a file's key")
}

func TestJWTSecretLengthCountsCharactersNotBytes(t *testing.T) {
	t.Parallel()
	c := valid()
	c.JWT.Secret = strings.Repeat("é", 31) // 62 bytes, 31 characters
	require.ErrorContains(t, c.Validate(), "[jwt].secret must be at least 32 characters, got 31")
	c.JWT.Secret = strings.Repeat("é", 32)
	require.NoError(t, c.Validate())
}

func TestMissingExplicitFileIsAnError(t *testing.T) {
	t.Parallel()
	_, err := Load(filepath.Join(t.TempDir(), "nope.toml"), nil)
	require.Error(t, err)
}

func TestMalformedValuesNameTheKey(t *testing.T) {
	t.Parallel()
	_, err := Load("", []string{"PAYMENTD_SERVER__PORT=eighty"})
	require.ErrorContains(t, err, "port")
	_, err = Load("", []string{"PAYMENTD_EVENTS__POLL_INTERVAL=often"})
	require.ErrorContains(t, err, "poll_interval")
}

func TestValidateNamesTheKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"empty jwt secret", func(c *Config) { c.JWT.Secret = "" }, "[jwt].secret is required"},
		{"five character jwt secret", func(c *Config) { c.JWT.Secret = "abcde" }, "[jwt].secret must be at least 32 characters, got 5"},
		{"31 character jwt secret", func(c *Config) { c.JWT.Secret = strings.Repeat("x", 31) }, "[jwt].secret must be at least 32"},
		{"placeholder jwt secret", func(c *Config) { c.JWT.Secret = PlaceholderJWTSecret }, "[jwt].secret is the placeholder"},
		{"zero jwt expiry", func(c *Config) { c.JWT.ExpiryHours = 0 }, "[jwt].expiry_hours"},
		{"port out of range", func(c *Config) { c.Server.Port = 70000 }, "[server].port"},
		{"no concurrency", func(c *Config) { c.Server.MaxConcurrency = 0 }, "[server].max_concurrency"},
		{"no exports at once", func(c *Config) { c.Export.MaxConcurrent = 0 }, "[export].max_concurrent must be between 1 and 100, got 0"},
		{"sub-second export write timeout", func(c *Config) { c.Export.WriteTimeout = 500 * time.Millisecond }, "[export].write_timeout must be between 1s and 10m"},
		{"any origin", func(c *Config) { c.Server.CORSAllowedOrigins = []string{"*"} }, "[server].cors_allowed_origins"},
		{"origin with a path", func(c *Config) { c.Server.CORSAllowedOrigins = []string{"https://shop.example/app"} }, "[server].cors_allowed_origins"},
		{"origin without scheme", func(c *Config) { c.Server.CORSAllowedOrigins = []string{"shop.example"} }, "[server].cors_allowed_origins"},
		{"negative queue timeout", func(c *Config) { c.Server.QueueTimeoutMS = -1 }, "[server].queue_timeout_ms"},
		{"admin path without slash", func(c *Config) { c.Server.AdminPath = "admin" }, "[server].admin_path"},
		{"admin path root", func(c *Config) { c.Server.AdminPath = "/" }, "[server].admin_path"},
		{"relative public url", func(c *Config) { c.Server.PublicURL = "example.com" }, "[server].public_url"},
		{"cert without key", func(c *Config) { c.Server.TLSCertFile = "c.pem" }, "[server].tls_cert_file"},
		{"mysql url", func(c *Config) { c.DB.URL = "mysql://x" }, "[db].url"},
		{"mysql replica url", func(c *Config) { c.DB.ReplicaURL = "mysql://x" }, "[db].replica_url must be a postgres:// URL"},
		{"replica url is the primary's", func(c *Config) { c.DB.URL, c.DB.ReplicaURL = "postgres://h/db", "postgres://h/db" }, "[db].replica_url is [db].url"},
		{"sub-second replica lag", func(c *Config) { c.DB.ReplicaMaxLag = 500 * time.Millisecond }, "[db].replica_max_lag must be between 1s and 1h, got 500ms"},
		{"no replica lag", func(c *Config) { c.DB.ReplicaMaxLag = 0 }, "[db].replica_max_lag must be between 1s and 1h, got 0s"},
		{"a day of replica lag", func(c *Config) { c.DB.ReplicaMaxLag = 24 * time.Hour }, "[db].replica_max_lag must be between 1s and 1h"},
		{"min above max connections", func(c *Config) { c.DB.MinConnections = 50 }, "[db].min_connections"},
		{"zero acquire timeout", func(c *Config) { c.DB.AcquireTimeoutSecs = 0 }, "[db].acquire_timeout_secs"},
		{"bad same site", func(c *Config) { c.Session.CookieSameSite = "lax" }, "[session].cookie_same_site"},
		{"same site none without secure", func(c *Config) { c.Session.CookieSameSite = "None" }, "[session].cookie_same_site None requires"},
		{"cookie name with space", func(c *Config) { c.Session.CookieName = "a b" }, "[session].cookie_name"},
		{"short bootstrap password", func(c *Config) { c.Bootstrap.AdminPassword = "short" }, "[bootstrap].admin_password"},
		{"zero login rate", func(c *Config) { c.RateLimit.LoginPerSec = 0 }, "[rate_limit].login_per_sec"},
		{"zero password budget", func(c *Config) { c.RateLimit.PasswordPerSec = 0 }, "[rate_limit].password_per_sec"},
		{"zero account password budget", func(c *Config) { c.RateLimit.PasswordPerAccountPerMin = 0 }, "[rate_limit].password_per_account_per_min"},
		{"redis http url", func(c *Config) { c.Redis.Enabled = true; c.Redis.URL = "http://x" }, "[redis].url"},
		{"lowercase currency", func(c *Config) { c.Billing.Currencies = []string{"usd"} }, "[billing].currencies"},
		{"no currencies", func(c *Config) { c.Billing.Currencies = nil }, "[billing].currencies"},
		{"renew not below ttl", func(c *Config) { c.Cluster.LeaseRenew = c.Cluster.LeaseTTL }, "[cluster].lease_renew"},
		{"bad log level", func(c *Config) { c.Log.Level = "loud" }, "[log].level"},
		{"trusted proxy not an address", func(c *Config) { c.Server.TrustedProxies = []string{"lb.internal"} }, "[server].trusted_proxies"},
		{"metrics on the public port", func(c *Config) { c.Metrics.Port = c.Server.Port }, "[metrics].port must differ from [server].port"},
		{"metrics port out of range", func(c *Config) { c.Metrics.Port = -1 }, "[metrics].port"},
		{"metrics without host", func(c *Config) { c.Metrics.Host = "" }, "[metrics].host"},
		{"pprof without metrics", func(c *Config) { c.Metrics.Enabled = false; c.Metrics.Pprof = true }, "[metrics].pprof"},
		{"tracing endpoint without port", func(c *Config) { c.Tracing.Enabled = true; c.Tracing.Endpoint = "collector" }, "[tracing].endpoint"},
		{"tracing endpoint as a URL", func(c *Config) { c.Tracing.Enabled = true; c.Tracing.Endpoint = "http://collector:4318/v1/traces" }, "[tracing].endpoint"},
		{"tracing protocol", func(c *Config) { c.Tracing.Protocol = "zipkin" }, "[tracing].protocol"},
		{"sample ratio above one", func(c *Config) { c.Tracing.SampleRatio = 1.5 }, "[tracing].sample_ratio"},
		{"tracing without service name", func(c *Config) { c.Tracing.Enabled = true; c.Tracing.ServiceName = "" }, "[tracing].service_name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := valid()
			tt.mutate(&c)
			require.ErrorContains(t, c.Validate(), tt.want)
		})
	}
}

func TestValidateReportsEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	c := valid()
	c.JWT.Secret = "abcde"
	c.Server.Port = 0
	err := c.Validate()
	require.ErrorContains(t, err, "[jwt].secret")
	require.ErrorContains(t, err, "[server].port")
}

func TestMaskedHidesSecrets(t *testing.T) {
	t.Parallel()
	c := valid()
	c.Bootstrap.AdminPassword = "hunter22hunter22"
	c.DB.URL = "postgres://app:s3cret@db:5432/pay"
	c.DB.ReplicaURL = "postgres://reader:r3plica@db-standby:5432/pay"
	m := c.Masked()
	require.NotContains(t, m.DB.ReplicaURL, "r3plica")
	require.Contains(t, m.DB.ReplicaURL, "reader:xxxxx@db-standby")
	require.NotContains(t, m.JWT.Secret, goodSecret)
	require.NotContains(t, m.Bootstrap.AdminPassword, "hunter")
	require.NotContains(t, m.DB.URL, "s3cret")
	require.Contains(t, m.DB.URL, "app:")
	require.Equal(t, goodSecret, c.JWT.Secret, "the original is untouched")
}

func TestServerAddr(t *testing.T) {
	t.Parallel()
	require.Equal(t, "127.0.0.1:50051", Default().Server.Addr())
	require.Equal(t, "[::1]:8080", Server{Host: "::1", Port: 8080}.Addr())
}

func TestTrustedProxiesTakeAddressesAndPrefixes(t *testing.T) {
	t.Parallel()
	c := valid()
	c.Server.TrustedProxies = []string{"10.0.0.0/8", "192.0.2.7", "2001:db8::/32"}
	require.NoError(t, c.Validate())
	got := c.Server.TrustedProxyPrefixes()
	require.Len(t, got, 3)
	require.Equal(t, "192.0.2.7/32", got[1].String())
	p, err := Load("", []string{"PAYMENTD_SERVER__TRUSTED_PROXIES=10.0.0.0/8,172.16.0.0/12"})
	require.NoError(t, err)
	require.Equal(t, []string{"10.0.0.0/8", "172.16.0.0/12"}, p.Server.TrustedProxies)
}

func TestCORSOriginsAreSchemeHostAndPort(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"https://shop.example", "http://localhost:5173", "https://*.shop.example", "https://shop.example:8443"} {
		require.True(t, validOrigin(ok), ok)
	}
	for _, bad := range []string{"*", "https://*", "https://shop.example/", "https://shop.example?x=1", "ftp://shop.example",
		"https://user@shop.example", "https://Shop.example", "https://a.*.example", "null", ""} {
		require.False(t, validOrigin(bad), bad)
	}
}

// Two keys of 32 bytes in base64, for the [secrets] tests.
var (
	keyA = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xa}, 32))
	keyB = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xb}, 32))
)

func withJWTSecret(c Config) Config {
	c.JWT.Secret = goodSecret
	return c
}

func TestSecretsKeysComeFromTheFileOrOneEnvironmentVariableEach(t *testing.T) {
	t.Parallel()
	p := writeFile(t, `
[secrets]
current = "k2026"
[secrets.keys]
k2025 = "`+keyA+`"
k2026 = "`+keyB+`"
`)
	c, err := Load(p, nil)
	require.NoError(t, err)
	require.Equal(t, "k2026", c.Secrets.Current)
	require.Equal(t, map[string]string{"k2025": keyA, "k2026": keyB}, c.Secrets.Keys)
	require.NoError(t, withJWTSecret(c).Validate())
	k, err := c.Secrets.Keyring()
	require.NoError(t, err)
	require.Equal(t, "k2026", k.Current())
	require.Equal(t, []string{"k2025", "k2026"}, k.IDs())

	// The environment adds a key and moves current, as a rotation does
	// with the file left as it is.
	c, err = Load(p, []string{"PAYMENTD_SECRETS__CURRENT=k2027", "PAYMENTD_SECRETS__KEYS__K2027=" + keyA})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"k2025": keyA, "k2026": keyB, "k2027": keyA}, c.Secrets.Keys)
	require.Equal(t, "k2027", c.Secrets.Current)
	require.NoError(t, withJWTSecret(c).Validate())

	// No file at all: environment variables alone.
	c, err = Load("", []string{"PAYMENTD_SECRETS__CURRENT=prod_1", "PAYMENTD_SECRETS__KEYS__PROD_1=" + keyB})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"prod_1": keyB}, c.Secrets.Keys)
	require.NoError(t, withJWTSecret(c).Validate())

	// None: no keyring, which is valid.
	k, err = valid().Secrets.Keyring()
	require.NoError(t, err)
	require.Nil(t, k)
}

func TestSecretsValidationNamesTheKeyAndNeverQuotesOne(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		s    Secrets
		want string
	}{
		{"current without keys", Secrets{Current: "k1"}, `[secrets].current names key "k1", but [secrets].keys is empty`},
		{"keys without current", Secrets{Keys: map[string]string{"k1": keyA}}, "[secrets].current is required when [secrets].keys is set"},
		{"current not a key", Secrets{Current: "k2", Keys: map[string]string{"k1": keyA}}, `[secrets].current names key "k2", which [secrets].keys does not hold`},
		{"short key", Secrets{Current: "k1", Keys: map[string]string{"k1": base64.StdEncoding.EncodeToString([]byte("sixteen bytes!!!"))}}, "[secrets].keys.k1 must be 32 bytes, got 16"},
		{"not base64", Secrets{Current: "k1", Keys: map[string]string{"k1": "not-base64-secret-material"}}, "[secrets].keys.k1 is not standard base64"},
		{"upper case id", Secrets{Current: "K1", Keys: map[string]string{"K1": keyA}}, `[secrets].keys key ids are lowercase`},
		{"id with a colon", Secrets{Current: "a:b", Keys: map[string]string{"a:b": keyA}}, `got "a:b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := valid()
			c.Secrets = tt.s
			err := c.Validate()
			require.ErrorContains(t, err, tt.want)
			require.NotContains(t, err.Error(), "not-base64-secret-material")
			require.NotContains(t, err.Error(), keyA)
		})
	}
}

func TestMaskedHidesTheSecretsKeys(t *testing.T) {
	t.Parallel()
	c := valid()
	c.Secrets = Secrets{Current: "k1", Keys: map[string]string{"k1": keyA}}
	out := string(c.Masked().TOML())
	require.NotContains(t, out, keyA)
	require.Contains(t, out, "\n[secrets]\ncurrent = \"k1\"\nkeys = {\"k1\" = \"********\"}\n")
	require.Equal(t, keyA, c.Secrets.Keys["k1"], "the original is untouched")
}
