// Package balance owns the customer balance: every change of
// customers.balance is one Post of a typed entry, which locks the customer,
// checks the credit limit, moves the balance and appends the ledger row
// (balance_transactions) in one statement, and writes the audit row — all in
// the caller's transaction, so the entry commits with what caused it (a
// balance payment with its payment row, a refund with its refund row).
//
//	recharge            +   money paid in (or captured money credited back to the customer)
//	payment             −   an order paid from the balance
//	refund              +   a balance payment refunded to the balance
//	manual_adjust       ±   an admin's correction, with a note
//
// A debit may take the balance down to -credit_limit and no further; a credit
// is always taken. internal/ledger.Verify checks independently that the
// ledger chains and matches the balances.
package balance
