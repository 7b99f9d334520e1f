package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/order/renewal"
)

func TestBillingRenewalKeysDefaultToTheRunsDefaults(t *testing.T) {
	t.Parallel()
	b := Default().Billing
	require.Equal(t, "UTC", b.TimeZone)
	require.Equal(t, renewal.DefaultInvoiceDays, b.RenewalInvoiceDays)
	require.Equal(t, renewal.DefaultAutoApplyBalance, b.AutoApplyBalance)
	require.Equal(t, renewal.DefaultSuspendAfterDays, b.SuspendAfterDays)
	require.Equal(t, renewal.DefaultTerminateAfterDays, b.TerminateAfterDays)
	require.False(t, b.TestClock, "the test clock is off unless asked for")

	want := renewal.DefaultOptions()
	want.Node = "node-a"
	require.Equal(t, want, b.RenewalOptions("node-a"), "an unconfigured [billing] is the run's defaults")
}

func TestBillingRenewalOptionsMapEveryKey(t *testing.T) {
	t.Parallel()
	c := valid()
	c.Billing.TimeZone = "Asia/Shanghai"
	c.Billing.RenewalInvoiceDays = 10
	c.Billing.AutoApplyBalance = false
	c.Billing.SuspendAfterDays = 0
	c.Billing.TerminateAfterDays = 30
	c.Billing.TestClock = true
	require.NoError(t, c.Validate())
	o := c.Billing.RenewalOptions("node-b")
	require.Equal(t, "node-b", o.Node)
	require.Equal(t, "Asia/Shanghai", o.Location.String())
	require.Equal(t, 10, o.InvoiceDays)
	require.False(t, o.AutoApplyBalance)
	require.Equal(t, 0, o.SuspendAfterDays)
	require.Equal(t, 30, o.TerminateAfterDays)
	require.Equal(t, renewal.DefaultInterval, o.Interval)
	require.Equal(t, renewal.DefaultBatchSize, o.BatchSize)
	require.Nil(t, o.Clock, "the clock is internal/app's")
}

func TestBillingRenewalKeysComeFromTheEnvironment(t *testing.T) {
	t.Parallel()
	p := writeFile(t, "[billing]\ntime_zone = \"Europe/Berlin\"\nauto_apply_balance = true\ntest_clock = true\n")
	c, err := Load(p, []string{
		"PAYMENTD_BILLING__TIME_ZONE=America/New_York",
		"PAYMENTD_BILLING__RENEWAL_INVOICE_DAYS=5",
		"PAYMENTD_BILLING__AUTO_APPLY_BALANCE=false",
		"PAYMENTD_BILLING__SUSPEND_AFTER_DAYS=0",
		"PAYMENTD_BILLING__TERMINATE_AFTER_DAYS=21",
		"PAYMENTD_BILLING__TEST_CLOCK=false",
	})
	require.NoError(t, err)
	require.Equal(t, "America/New_York", c.Billing.TimeZone)
	require.Equal(t, 5, c.Billing.RenewalInvoiceDays)
	require.False(t, c.Billing.AutoApplyBalance)
	require.Equal(t, 0, c.Billing.SuspendAfterDays)
	require.Equal(t, 21, c.Billing.TerminateAfterDays)
	require.False(t, c.Billing.TestClock)
	require.Equal(t, []string{"CNY", "USD"}, c.Billing.Currencies, "untouched keys keep their default")
	require.NoError(t, withJWTSecret(c).Validate())

	c, err = Load(p, nil)
	require.NoError(t, err)
	require.Equal(t, "Europe/Berlin", c.Billing.TimeZone)
	require.True(t, c.Billing.TestClock, "the file's value without the environment")

	_, err = Load("", []string{"PAYMENTD_BILLING__RENEWAL_INVOICE_DAYS=week"})
	require.ErrorContains(t, err, "renewal_invoice_days")
}

func TestBillingRenewalRefusalsAreOneLineNamingTheKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(*Billing)
		key    string
		want   string
	}{
		{"unknown time zone", func(b *Billing) { b.TimeZone = "Mars/Olympus" }, "[billing].time_zone",
			`[billing].time_zone must be an IANA time zone name such as UTC or Europe/Berlin, got "Mars/Olympus"`},
		{"the host's zone", func(b *Billing) { b.TimeZone = "Local" }, "[billing].time_zone", `got "Local"`},
		{"empty time zone", func(b *Billing) { b.TimeZone = "" }, "[billing].time_zone", `got ""`},
		{"an offset", func(b *Billing) { b.TimeZone = "+08:00" }, "[billing].time_zone", `got "+08:00"`},
		{"negative invoice days", func(b *Billing) { b.RenewalInvoiceDays = -1 }, "[billing].renewal_invoice_days",
			"[billing].renewal_invoice_days must be from 0 to 27, less than the shortest cycle (a monthly period may last 28 days), got -1"},
		{"invoice days of a month", func(b *Billing) { b.RenewalInvoiceDays = 28 }, "[billing].renewal_invoice_days", "shortest cycle"},
		{"invoice days of two months", func(b *Billing) { b.RenewalInvoiceDays = 60 }, "[billing].renewal_invoice_days", "got 60"},
		{"negative suspend days", func(b *Billing) { b.SuspendAfterDays = -3 }, "[billing].suspend_after_days",
			"[billing].suspend_after_days must be from 0 (off) to 366, got -3"},
		{"negative terminate days", func(b *Billing) { b.TerminateAfterDays = -14 }, "[billing].terminate_after_days",
			"[billing].terminate_after_days must be from 0 (off) to 366, got -14"},
		{"terminate days past a year", func(b *Billing) { b.TerminateAfterDays = 1_000_000 }, "[billing].terminate_after_days", "got 1000000"},
		{"termination before suspension", func(b *Billing) { b.SuspendAfterDays = 10; b.TerminateAfterDays = 5 }, "[billing].terminate_after_days",
			"[billing].terminate_after_days must be greater than [billing].suspend_after_days (10) or 0 (off), got 5: termination before suspension"},
		{"termination with suspension", func(b *Billing) { b.SuspendAfterDays = 7; b.TerminateAfterDays = 7 }, "[billing].terminate_after_days",
			"termination before suspension"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := valid()
			tt.mutate(&c.Billing)
			err := c.Validate()
			require.Error(t, err)
			lines := strings.Split(err.Error(), "\n")
			require.Len(t, lines, 1, "one problem, one line: %v", err)
			require.True(t, strings.HasPrefix(lines[0], tt.key+" "), lines[0])
			require.Contains(t, lines[0], tt.want)
		})
	}
}

func TestBillingRenewalKeysAcceptTheirEdges(t *testing.T) {
	t.Parallel()
	for name, mutate := range map[string]func(*Billing){
		"invoice on the day":          func(b *Billing) { b.RenewalInvoiceDays = 0 },
		"invoice 27 days ahead":       func(b *Billing) { b.RenewalInvoiceDays = 27 },
		"no suspension":               func(b *Billing) { b.SuspendAfterDays = 0 },
		"no termination":              func(b *Billing) { b.TerminateAfterDays = 0 },
		"neither":                     func(b *Billing) { b.SuspendAfterDays, b.TerminateAfterDays = 0, 0 },
		"termination a day later":     func(b *Billing) { b.SuspendAfterDays, b.TerminateAfterDays = 3, 4 },
		"termination without suspend": func(b *Billing) { b.SuspendAfterDays, b.TerminateAfterDays = 0, 1 },
		"a zone with DST":             func(b *Billing) { b.TimeZone = "Europe/Berlin" },
		"test clock on":               func(b *Billing) { b.TestClock = true },
	} {
		c := valid()
		mutate(&c.Billing)
		require.NoError(t, c.Validate(), name)
	}
}
