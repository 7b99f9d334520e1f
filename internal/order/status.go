package order

import "slices"

// Status is an order's status (orders.status).
type Status string

// The order statuses: the API contract's (docs/api.md, "Statuses"), the first
// eight of which it fixes, and terminated (docs/decisions.md, "order
// transitions").
const (
	StatusPending      Status = "pending"
	StatusPaid         Status = "paid"
	StatusProvisioning Status = "provisioning"
	StatusActive       Status = "active"
	StatusCancelled    Status = "cancelled"
	StatusSuspended    Status = "suspended"
	StatusRefunded     Status = "refunded"
	StatusCompleted    Status = "completed"
	StatusTerminated   Status = "terminated"
)

// Statuses lists every order status, in life-cycle order.
var Statuses = []Status{
	StatusPending, StatusPaid, StatusProvisioning, StatusActive, StatusSuspended,
	StatusCompleted, StatusTerminated, StatusCancelled, StatusRefunded,
}

// live are the statuses in which an order's service runs: paid for and
// provisioned, suspended or not. The billing run issues renewal invoices,
// reminds, pays from the balance, suspends, terminates and ends the
// services of these orders only, the renewal overview and its metric count
// them, and an admin extends only them. This is the set's one home: the
// queries that select live orders take it as a parameter (LiveStatuses,
// `o.status = ANY(@live_statuses)`), so no SQL spells it out, and
// live_test.go fails on a query that does.
var live = []Status{StatusActive, StatusSuspended}

// Live reports whether an order in status s has a running service (live).
func (s Status) Live() bool { return slices.Contains(live, s) }

// LiveStatuses is the live set as the queries take it (a text[]
// parameter); a new slice each call, so a caller cannot change the set.
func LiveStatuses() []string {
	out := make([]string, len(live))
	for i, s := range live {
		out[i] = string(s)
	}
	return out
}

// transitions is the order state machine of docs/decisions.md ("order
// transitions"); a pair not listed is refused. The trigger of each move is
// noted; the operations that make them check the rest.
var transitions = map[Status]map[Status]bool{
	StatusPending: {
		StatusPaid:         true, // gateway callback, bank transfer confirmation
		StatusProvisioning: true, // balance payment
		StatusCancelled:    true, // 24 h timeout, customer or admin cancel
	},
	StatusPaid: {
		StatusProvisioning: true, // the event worker takes order_paid
		StatusRefunded:     true, // admin full refund
	},
	StatusProvisioning: {
		StatusActive:    true, // provisioned
		StatusCancelled: true, // provisioning failed, automatic refund
		StatusRefunded:  true, // admin full refund while provisioning
	},
	StatusActive: {
		StatusSuspended:  true,
		StatusCompleted:  true,
		StatusTerminated: true,
		StatusRefunded:   true, // admin full refund
	},
	StatusSuspended: {
		StatusActive:     true,
		StatusTerminated: true,
		StatusRefunded:   true, // the money went back in full while suspended (a lost dispute, an admin's full refund)
	},
	// cancelled, refunded, completed and terminated are final.
}

// CanTransition reports whether an order may move from one status to
// another. Staying in the same status is not a transition.
func CanTransition(from, to Status) bool {
	return transitions[from][to]
}

// IsFinal reports whether no transition leaves s.
func (s Status) IsFinal() bool { return len(transitions[s]) == 0 }

// InvoiceStatus is an invoice's status (invoices.status).
type InvoiceStatus string

// The invoice statuses of the API contract (docs/api.md, "Statuses").
const (
	InvoiceDraft     InvoiceStatus = "draft"
	InvoiceIssued    InvoiceStatus = "issued"
	InvoicePaid      InvoiceStatus = "paid"
	InvoiceOverdue   InvoiceStatus = "overdue"
	InvoiceCancelled InvoiceStatus = "cancelled"
)

// InvoiceStatuses lists every invoice status.
var InvoiceStatuses = []InvoiceStatus{InvoiceDraft, InvoiceIssued, InvoicePaid, InvoiceOverdue, InvoiceCancelled}

// invoiceTransitions: the API contract says draft, issued, then paid, overdue or
// cancelled; an overdue invoice can still be paid or cancelled. paid and
// cancelled are final.
var invoiceTransitions = map[InvoiceStatus]map[InvoiceStatus]bool{
	InvoiceDraft:   {InvoiceIssued: true, InvoiceCancelled: true},
	InvoiceIssued:  {InvoicePaid: true, InvoiceOverdue: true, InvoiceCancelled: true},
	InvoiceOverdue: {InvoicePaid: true, InvoiceCancelled: true},
}

// CanTransitionInvoice reports whether an invoice may move from one status
// to another.
func CanTransitionInvoice(from, to InvoiceStatus) bool {
	return invoiceTransitions[from][to]
}
