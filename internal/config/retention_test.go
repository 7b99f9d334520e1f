package config

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/retention"
)

func TestRetentionKeysDefaultToTheJobsDefaults(t *testing.T) {
	t.Parallel()
	want := retention.DefaultOptions()
	require.Equal(t, want, Default().Retention.Options(), "an unconfigured [retention] is the job's defaults")
	require.Equal(t, 84, Default().Retention.AuditMonths, "seven years of audit")
}

func TestRetentionZeroKeepsForGood(t *testing.T) {
	t.Parallel()
	c := valid()
	c.Retention.EventDays, c.Retention.NotificationDays, c.Retention.AuditMonths = 0, 0, 0
	require.NoError(t, c.Validate())
	o := c.Retention.Options()
	require.Equal(t, retention.KeepForever, o.EventDays)
	require.Equal(t, retention.KeepForever, o.NotificationDays)
	require.Equal(t, retention.KeepForever, o.AuditMonths)
}

func TestRetentionKeysComeFromTheEnvironment(t *testing.T) {
	t.Parallel()
	c, err := Load(writeFile(t, "[retention]\nevent_days = 7\n"), []string{
		"PAYMENTD_RETENTION__NOTIFICATION_DAYS=30",
		"PAYMENTD_RETENTION__AUDIT_MONTHS=120",
		"PAYMENTD_RETENTION__INTERVAL=15m",
		"PAYMENTD_RETENTION__BATCH_SIZE=500",
	})
	require.NoError(t, err)
	require.NoError(t, withJWTSecret(c).Validate())
	o := c.Retention.Options()
	require.Equal(t, retention.Options{EventDays: 7, NotificationDays: 30, AuditMonths: 120, Interval: 15 * time.Minute, BatchSize: 500}, o)
}

func TestRetentionRefusalsAreOneLineNamingTheKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		edit func(*Retention)
		key  string
	}{
		{func(r *Retention) { r.AuditMonths = retention.MinAuditMonths - 1 }, "[retention].audit_months"},
		{func(r *Retention) { r.AuditMonths = -1 }, "[retention].audit_months"},
		{func(r *Retention) { r.EventDays = -1 }, "[retention].event_days"},
		{func(r *Retention) { r.NotificationDays = -5 }, "[retention].notification_days"},
		{func(r *Retention) { r.Interval = time.Second }, "[retention].interval"},
		{func(r *Retention) { r.BatchSize = 1_000_000 }, "[retention].batch_size"},
	} {
		c := valid()
		tc.edit(&c.Retention)
		err := c.Validate()
		require.Error(t, err, tc.key)
		require.True(t, strings.HasPrefix(err.Error(), tc.key+" "), "%v", err)
		require.NotContains(t, err.Error(), "\n")
	}
}
