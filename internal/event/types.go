package event

import (
	"slices"

	"github.com/rustbill/paymentd/internal/apperr"
)

// The event types the queue holds (events.event_type), named once: the
// producers use these constants (internal/order's Event* are they), the
// worker's handlers are registered under them, and ListEvents filters by
// them. The migration's events_event_type_check lists the same values,
// which TestTypesAreTheSchemasAndTheAPIs checks, so a new type cannot be
// added in one place and missed in another.
const (
	TypeOrderPaid        = "order_paid"
	TypeOrderProvisioned = "order_provisioned"
	TypeOrderCancelled   = "order_cancelled"
	TypeOrderRefunded    = "order_refunded"
	// The renewal cycle's: a period paid (the service extended), and the
	// service suspended, resumed or ended at its provider.
	TypeServiceRenewed    = "service_renewed"
	TypeServiceSuspended  = "service_suspended"
	TypeServiceResumed    = "service_resumed"
	TypeServiceTerminated = "service_terminated"
	// A notice about a renewal invoice: issued, due soon, or overdue.
	TypeRenewalReminder = "renewal_reminder"
	// A plan change took effect (the provider changes the plan), or its
	// proration invoice went unpaid and it lapsed.
	TypePlanChanged      = "plan_changed"
	TypePlanChangeLapsed = "plan_change_lapsed"
)

// Types lists every event type, in life-cycle order.
var Types = []string{
	TypeOrderPaid, TypeOrderProvisioned, TypeOrderCancelled, TypeOrderRefunded,
	TypeServiceRenewed, TypeServiceSuspended, TypeServiceResumed, TypeServiceTerminated,
	TypeRenewalReminder, TypePlanChanged, TypePlanChangeLapsed,
}

// CheckType answers InvalidArgument naming t when the queue holds no
// events of type t.
func CheckType(t string) error {
	if slices.Contains(Types, t) {
		return nil
	}
	return apperr.New(apperr.InvalidArgument, "event_type %q is not an event type (one of %v)", t, Types)
}
