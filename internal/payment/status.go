package payment

// Status is a payment's status (payments.status), as order.Status is an order's:
// the API contract's four (docs/api.md, "Statuses"), and no others.
//
//	pending ──callback / query / confirm──▶ success ──refunds reach the amount──▶ refunded
//	   │
//	   └──gateway failed / order cancelled, paid otherwise, 24 h timeout──▶ failed
//
// A final status (failed, refunded) is never left by a gateway's report: a
// late success for a failed payment is recorded as an anomaly.
type Status string

// The payment statuses.
const (
	StatusPending  Status = "pending"
	StatusSuccess  Status = "success"
	StatusFailed   Status = "failed"
	StatusRefunded Status = "refunded"
)
