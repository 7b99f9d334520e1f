package audit

// Audit actions on payment rows that two domain packages write: internal/payment
// (a gateway payment's creation, a failure reported by its gateway) and
// internal/order (a balance payment's creation, the pending payments an
// order's move fails). order sits below payment and cannot import it, so the
// names live here, once. Every other action is defined by the package that
// writes it.
const (
	ActionPaymentCreate = "payment.create"
	ActionPaymentFail   = "payment.fail"
)
