package renewal

import (
	"context"
	"log/slog"
	"time"

	"github.com/rustbill/paymentd/internal/testsignal"
)

// The defaults of Options, and of the [billing] settings that map onto
// them (docs/operations.md, "Renewals").
const (
	DefaultInvoiceDays        = 7
	DefaultSuspendAfterDays   = 3
	DefaultTerminateAfterDays = 14
	DefaultAutoApplyBalance   = true
	DefaultReminderDaysBefore = 3
	DefaultInterval           = time.Minute
	DefaultBatchSize          = 100
)

// DefaultOverdueReminderDays are the days past due a customer is reminded
// of an unpaid renewal invoice: the day after, and a week after.
func DefaultOverdueReminderDays() []int { return []int{1, 7} }

// Options configure the billing run.
type Options struct {
	// Node is this instance's id (the audit actor of the run's moves).
	Node string
	// Location is the billing time zone ([billing].time_zone): period ends
	// are counted in its calendar months. nil is UTC.
	Location *time.Location
	// InvoiceDays is how many days before a period ends the next period's
	// invoice is issued ([billing].renewal_invoice_days).
	InvoiceDays int
	// AutoApplyBalance pays a renewal invoice from the customer's balance
	// when it is issued and the balance covers it
	// ([billing].auto_apply_balance).
	AutoApplyBalance bool
	// SuspendAfterDays and TerminateAfterDays are how many days past its
	// due date an unpaid renewal invoice suspends, then ends, the service
	// ([billing].suspend_after_days, terminate_after_days); 0 turns the
	// step off.
	SuspendAfterDays   int
	TerminateAfterDays int
	// ReminderDaysBefore is how many days before its due time the customer
	// is reminded of an unpaid renewal invoice ([billing].reminder_days_before;
	// 0: not); OverdueReminderDays the days past due they are reminded
	// again ([billing].overdue_reminder_days, ascending).
	ReminderDaysBefore  int
	OverdueReminderDays []int
	// Interval is how often the billing leader runs; BatchSize how many
	// orders one transaction of a scan takes at most.
	Interval  time.Duration
	BatchSize int
	// Clock is the billing clock (time.Now when nil); the test clock
	// ([billing].test_clock) moves it forward.
	Clock func() time.Time
	// Active reports whether this instance may run the billing run now
	// (it holds the billing role); nil: always.
	Active func() bool
	Logger *slog.Logger
	// ChargeSaved, when set, is the dunning step (payment.Service's
	// ChargeDue with [billing].card_retry_days): it charges the saved
	// payment methods of the renewal invoices whose attempt day has come,
	// after the balance has paid what it covers and before a suspension
	// is judged. It answers how many invoices it charged.
	ChargeSaved func(ctx context.Context) (charged int, err error)
	// Rounds, set by tests only, counts the loop's rounds: each look at
	// Active and the pass it then runs, if any (internal/testsignal). Nil
	// in the service: a nil check per round.
	Rounds *testsignal.Signal
}

// DefaultOptions are the Options of an unconfigured service.
func DefaultOptions() Options {
	return Options{
		Location: time.UTC, InvoiceDays: DefaultInvoiceDays, AutoApplyBalance: DefaultAutoApplyBalance,
		SuspendAfterDays: DefaultSuspendAfterDays, TerminateAfterDays: DefaultTerminateAfterDays,
		ReminderDaysBefore: DefaultReminderDaysBefore, OverdueReminderDays: DefaultOverdueReminderDays(),
		Interval: DefaultInterval, BatchSize: DefaultBatchSize,
	}
}
