package payment

// Test hooks for payment_test.

// OrderMayMove exposes the mirrored order transitions.
var OrderMayMove = orderMayMove

// InvoiceMayBePaid exposes the mirrored invoice rule.
var InvoiceMayBePaid = invoiceMayBePaid

// OrderPaidPayload builds the order_paid payload this package writes.
func OrderPaidPayload(p OrderPaidFields) any {
	return orderPaidPayload(p)
}

// OrderPaidFields are the fields of the order_paid payload.
type OrderPaidFields = orderPaidPayload
