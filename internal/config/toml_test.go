package config

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTOMLReadsBackAsTheSameConfiguration(t *testing.T) {
	t.Parallel()
	c := valid()
	c.DB.URL = "postgres://paymentd@db.internal:5432/paymentd?sslmode=verify-full"
	c.Billing.Currencies = []string{"EUR"}
	c.Events.RetryMax = 90 * time.Minute
	c.Events.PollInterval = 250 * time.Millisecond
	c.Tracing.SampleRatio = 0.25
	c.Plugins.Dir = "/srv/paymentd/plugins" // Load makes a relative one absolute
	c.Notify.AdminEmails = []string{"ops@example.com"}
	c.Notify.SMTP.From = "billing \"desk\" <billing@example.com>\t"
	c.Notify.Webhooks = []NotifyWebhook{
		{Name: "ops", URL: "https://hooks.example.com/a", Secret: "0123456789abcdef", Headers: map[string]string{"X-Team": "billing", "A": "b"}},
		{Name: "audit", URL: "https://hooks.example.com/b", Secret: "fedcba9876543210", Headers: map[string]string{}},
	}
	out := c.TOML()
	p := writeFile(t, string(out))
	back, err := Load(p, nil)
	require.NoError(t, err, "%s", out)
	require.Equal(t, c, back, "%s", out)
	require.True(t, strings.HasPrefix(string(out), "[server]\nhost = \"127.0.0.1\"\n"), "%s", out)
	require.Contains(t, string(out), "retry_max = \"1h30m\"\n")
	require.Contains(t, string(out), "sample_ratio = 0.25\n")
	require.Contains(t, string(out), "\n[[notify.webhooks]]\nname = \"ops\"\n")
}

func TestTOMLOfTheDefaultsHasTheSectionsAndKeysOfTheExampleFile(t *testing.T) {
	t.Parallel()
	example, err := os.ReadFile("../../koanf.example.toml")
	require.NoError(t, err)
	// Every section and key the renderer writes appears in the example file,
	// so `paymentd config check` prints what an operator has read about
	// (values are compared by TestExampleFileDocumentsEveryDefault).
	for line := range strings.Lines(string(Default().TOML())) {
		k, _, ok := strings.Cut(line, " = ")
		if !ok {
			k = strings.TrimSuffix(line, "\n")
		}
		require.Contains(t, string(example), "\n"+k, line)
	}
}

func TestMaskedHidesEverySecret(t *testing.T) {
	t.Parallel()
	c := valid()
	c.DB.URL = "postgres://paymentd:db-password@db:5432/paymentd"
	c.Redis.URL = "redis://:redis-password@cache:6379/0"
	c.Bootstrap.AdminPassword = "bootstrap-password"
	c.Notify.SMTP.Password = "smtp-password"
	c.Notify.Webhooks = []NotifyWebhook{{Name: "ops", URL: "https://h.example.com", Secret: "webhook-secret-0123", Headers: map[string]string{"Authorization": "Bearer header-token"}}}
	out := string(c.Masked().TOML())
	for _, secret := range []string{goodSecret, "db-password", "redis-password", "bootstrap-password", "smtp-password", "webhook-secret-0123", "header-token"} {
		require.NotContains(t, out, secret)
	}
	require.Contains(t, out, `url = "postgres://paymentd:xxxxx@db:5432/paymentd"`)
	require.Contains(t, out, `secret = "********"`)
	require.Equal(t, "Bearer header-token", c.Notify.Webhooks[0].Headers["Authorization"], "the original is untouched")

	c.DB.URL = "postgres://user:p%zzassword@db/x" // does not parse
	require.Equal(t, "********", c.Masked().DB.URL)
}
