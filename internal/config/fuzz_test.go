package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzLoadTOML feeds arbitrary bytes to the loader as a configuration file:
// Load answers a configuration or an error and never panics, Validate and
// Masked never panic either, and a configuration that validates has the
// invariants the service relies on.
func FuzzLoadTOML(f *testing.F) {
	example, err := os.ReadFile("../../koanf.example.toml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example)
	f.Add([]byte(""))
	f.Add([]byte("[server]\nport = 0\n"))
	f.Add([]byte("[server]\nport = \"fifty\"\n"))
	f.Add([]byte("[jwt]\nsecret = \"0123456789abcdef0123456789abcdef\"\n[server]\nmax_request_bytes = -1\n"))
	f.Add([]byte("[events]\npoll_interval = \"-5s\"\nbatch_size = 99999999999999999999\n"))
	f.Add([]byte("[billing]\ncurrencies = [\"usd\", 1, true]\n"))
	f.Add([]byte("[billing]\ntime_zone = \"Local\"\nsuspend_after_days = 9\nterminate_after_days = 2\n"))
	f.Add([]byte("[[notify.webhooks]]\nname = \"x\"\nheaders = { a = 1 }\n"))
	f.Add([]byte("unknown = 1\n[unknown]\nx = 2\n"))
	f.Add([]byte("[server\nport = 1"))
	f.Add([]byte("[db]\nurl = \"postgres://u:p@h/db?sslmode=disable\"\n[redis]\nenabled = true\nurl = \"redis://:secret@h:6379/0\"\n"))
	f.Add([]byte("[cluster]\nlease_ttl = \"1ns\"\nlease_renew = \"1h\"\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "paymentd.toml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Skip(err)
		}
		c, err := Load(path, nil)
		if err != nil {
			if strings.Contains(err.Error(), "secret") && strings.Contains(string(data), "secret =") {
				// An error may name the key, never echo a secret's value.
				for _, line := range strings.Split(string(data), "\n") {
					if v, ok := strings.CutPrefix(strings.TrimSpace(line), "secret = "); ok && len(v) > 10 && strings.Contains(err.Error(), strings.Trim(v, `"`)) {
						t.Fatalf("the error quotes a secret: %v", err)
					}
				}
			}
			return
		}
		verr := c.Validate()
		m := c.Masked()
		if c.JWT.Secret != "" && strings.Contains(m.JWT.Secret, c.JWT.Secret) {
			t.Fatal("Masked kept the JWT secret")
		}
		if verr != nil {
			if c.JWT.Secret != "" && len(c.JWT.Secret) >= 8 && strings.Contains(verr.Error(), c.JWT.Secret) {
				t.Fatalf("a validation error quotes the JWT secret: %v", verr)
			}
			return
		}
		// What the service relies on once a configuration is valid.
		switch {
		case c.Server.Port < 1 || c.Server.Port > 65535:
			t.Fatalf("valid with port %d", c.Server.Port)
		case len(c.JWT.Secret) < 32:
			t.Fatal("valid with a short JWT secret")
		case c.Server.MaxRequestBytes < 1024, c.Server.MaxConcurrency < 1:
			t.Fatal("valid with a request limit below 1 KiB or no concurrency")
		case c.Cluster.LeaseRenew >= c.Cluster.LeaseTTL || c.Cluster.LeaseRenew <= 0:
			t.Fatal("valid with a lease renewed no faster than it expires")
		case c.Events.PollInterval <= 0 || c.Events.BatchSize < 1 || c.Events.MaxAttempts < 1:
			t.Fatal("valid with a worker that cannot run")
		case c.Outbound.Cooldown <= c.Outbound.Timeout || c.Outbound.FailureThreshold < 1:
			t.Fatal("valid with a breaker that cannot work")
		case len(c.Billing.Currencies) == 0:
			t.Fatal("valid without currencies")
		case c.Billing.SuspendAfterDays > 0 && c.Billing.TerminateAfterDays > 0 && c.Billing.TerminateAfterDays <= c.Billing.SuspendAfterDays:
			t.Fatal("valid with termination before suspension")
		}
		if _, err := time.LoadLocation(c.Billing.TimeZone); err != nil {
			t.Fatalf("valid with a billing time zone that does not load: %v", err)
		}
	})
}

// FuzzLoadEnvironment sets one arbitrary PAYMENTD_ variable: the loader
// answers or refuses, never panics.
func FuzzLoadEnvironment(f *testing.F) {
	f.Add("SERVER__PORT", "8080")
	f.Add("SERVER__PORT", "-1")
	f.Add("DB__URL", "postgres://u:secret@h/db")
	f.Add("BILLING__CURRENCIES", "CNY,,USD,")
	f.Add("EVENTS__POLL_INTERVAL", "1e400h")
	f.Add("NOTIFY__WEBHOOKS", "x")
	f.Add("NOTIFY__SMTP__PORT", "99999999999999999999999")
	f.Add("__", "")
	f.Add("SERVER____PORT", "1")
	f.Fuzz(func(t *testing.T, key, value string) {
		c, err := Load("", []string{EnvPrefix + key + "=" + value})
		if err != nil {
			return
		}
		_ = c.Validate()
		_ = c.Masked()
	})
}
