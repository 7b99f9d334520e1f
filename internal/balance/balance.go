package balance

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store"
)

// Kind is the type of a ledger entry (balance_transactions.type).
type Kind string

// The kinds of entry.
const (
	Recharge     Kind = store.BalanceRecharge
	Payment      Kind = store.BalancePayment
	Refund       Kind = store.BalanceRefund
	ManualAdjust Kind = store.BalanceManualAdjust
)

// Audit actions of the entries (audit_log.action; entity: the customer).
// Post writes them; this is their one definition.
const (
	ActionRecharge     = "balance.recharge"
	ActionCharge       = "balance.charge"
	ActionRefund       = "balance.refund"
	ActionManualAdjust = "customer.balance_adjusted"
)

// actions name each kind of entry in the audit log.
var actions = map[Kind]string{
	Recharge:     ActionRecharge,
	Payment:      ActionCharge,
	Refund:       ActionRefund,
	ManualAdjust: ActionManualAdjust,
}

// Entry is one change of a customer's balance.
type Entry struct {
	CustomerID uuid.UUID
	Kind       Kind
	// Amount is signed: positive credits the balance, negative debits it.
	// Payments debit; recharges and refunds credit; a manual adjustment
	// either.
	Amount money.Amount
	// Currency, when set, must be the balance's (InvalidArgument).
	Currency string
	// What the entry belongs to, as the ledger row names it.
	PaymentID *uuid.UUID
	RefundID  *uuid.UUID
	// CreatedBy is the admin who asked for it, when one did.
	CreatedBy   *uuid.UUID
	Description string
	By          audit.Actor
	At          time.Time
}

// Posted is an entry as written: the account after it, the balance before
// it, and its ledger row.
type Posted struct {
	Account store.BalanceAccount
	Before  money.Amount
	Ledger  store.BalanceTransaction
}

// InsufficientError is a debit the credit limit does not allow: the balance
// would have been After, below -CreditLimit.
type InsufficientError struct {
	After       money.Amount
	CreditLimit money.Amount
}

func (e *InsufficientError) Error() string {
	return fmt.Sprintf("the balance would be %s, below the credit limit of %s", e.After, e.CreditLimit)
}

// Post writes e in tx: it locks the customer (a caller that locked it
// already keeps its lock), checks the currency and, for a debit, the credit
// limit, moves the balance with its ledger row and writes the audit row. An
// unknown customer is NotFound; a debit below -credit_limit is
// InvalidArgument "insufficient balance" wrapping an *InsufficientError;
// nothing is written then.
func Post(ctx context.Context, tx pgx.Tx, e Entry) (Posted, error) {
	if _, ok := actions[e.Kind]; !ok {
		return Posted{}, apperr.New(apperr.Internal, "balance: unknown entry kind %q", e.Kind)
	}
	acct, err := store.LockBalanceAccount(ctx, tx, e.CustomerID)
	if err != nil {
		return Posted{}, store.NotFound(err, "customer %s not found", e.CustomerID)
	}
	p, err := PostLocked(ctx, tx, acct, e)
	if err != nil {
		return Posted{}, err
	}
	return p.Done(ctx)
}

// PostLocked is Post for a caller that holds the customer's lock already:
// acct is the customer as store.LockBalanceAccount read it, in tx (or as
// store.LockForBalancePayment did). It checks what Post checks and refuses
// as Post does, before anything is written; then the ledger statement is
// queued, and in a pipelined transaction (store.WithPipelinedTx) goes with
// the next statement that is sent. Done reads its answer and writes the
// audit row; a Posting whose Done is never called must not commit.
func PostLocked(ctx context.Context, tx pgx.Tx, acct store.BalanceAccount, e Entry) (*Posting, error) {
	if _, ok := actions[e.Kind]; !ok {
		return nil, apperr.New(apperr.Internal, "balance: unknown entry kind %q", e.Kind)
	}
	if acct.CustomerID != e.CustomerID {
		return nil, apperr.New(apperr.Internal, "balance: the locked customer %s is not the entry's %s", acct.CustomerID, e.CustomerID)
	}
	if e.Currency != "" && e.Currency != acct.Currency {
		return nil, apperr.New(apperr.InvalidArgument, "the customer's balance is in %s, not %s", acct.Currency, e.Currency)
	}
	after, err := acct.Balance.Add(e.Amount)
	if err != nil {
		return nil, apperr.New(apperr.InvalidArgument, "the balance would leave the range of amounts")
	}
	if e.Amount.Sign() < 0 && !withinCredit(after, acct.CreditLimit) {
		return nil, apperr.Wrap(apperr.InvalidArgument, &InsufficientError{After: after, CreditLimit: acct.CreditLimit}, "insufficient balance")
	}
	if e.At.IsZero() {
		e.At = store.Timestamp(time.Now())
	}
	row := store.PostBalanceLater(ctx, tx, store.BalanceTransaction{
		CustomerID: e.CustomerID, Type: string(e.Kind), Amount: e.Amount,
		BalanceBefore: acct.Balance, BalanceAfter: after,
		PaymentID: e.PaymentID, RefundID: e.RefundID, CreatedBy: e.CreatedBy,
		Description: e.Description, CreatedAt: e.At,
	})
	return &Posting{tx: tx, acct: acct, after: after, e: e, row: row}, nil
}

// Posting is an entry whose ledger statement has been queued (PostLocked).
type Posting struct {
	tx    pgx.Tx
	acct  store.BalanceAccount
	after money.Amount
	e     Entry
	row   *store.Later[store.BalanceTransaction]
}

// Done reads the ledger row (sending the statement if nothing has carried
// it yet) and writes the entry's audit row; its answer is Post's.
func (p *Posting) Done(ctx context.Context) (Posted, error) {
	row, err := p.row.Get(ctx)
	if err != nil {
		// The row is locked at acct.Balance and the checks above hold: a
		// refusal here is a bug, never the caller's.
		return Posted{}, store.Bug(err, "balance: post %s of %s for customer %s", p.e.Kind, p.e.Amount, p.e.CustomerID)
	}
	acct, e := p.acct, p.e
	before := state{CustomerID: acct.CustomerID, Balance: acct.Balance, CreditLimit: acct.CreditLimit, Currency: acct.Currency}
	afterState := before
	afterState.Balance = p.after
	if err := audit.Write(ctx, p.tx, e.By, e.At, actions[e.Kind], "customer", acct.CustomerID.String(), before, posted{
		state: afterState, Amount: e.Amount, Kind: e.Kind, BalanceTransactionID: row.ID, Note: e.Description,
	}); err != nil {
		return Posted{}, err
	}
	acct.Balance = p.after
	return Posted{Account: acct, Before: before.Balance, Ledger: row}, nil
}

// Covers reports whether acct's balance covers a debit of amount (> 0):
// the balance after it stays at or above -credit_limit. It is the credit
// limit rule for one debit, which Post applies and the billing run's
// order.PayInvoiceFromBalance asks before it pays an invoice.
//
// Two other places state the rule in SQL and are held to this one by
// internal/order's credit_test.go, on the boundaries (exactly covered, a
// cent short, no credit limit, a negative balance, a partly paid
// invoice): the billing run's set-wise scan ListUnpaidPeriodsCoveredByBalance
// (sql/queries/service_periods.sql: balance + credit_limit >= amount due),
// and the schema's last word, customers_balance_check (balance >=
// -credit_limit).
func Covers(acct store.BalanceAccount, amount money.Amount) bool {
	after, err := acct.Balance.Sub(amount)
	return err == nil && withinCredit(after, acct.CreditLimit)
}

// withinCredit is the comparison itself, written once: a balance may go
// down to -creditLimit and no further.
func withinCredit(after, creditLimit money.Amount) bool {
	return after.Cmp(creditLimit.Neg()) >= 0
}

// state is the audit snapshot of a balance.
type state struct {
	CustomerID  uuid.UUID    `json:"customer_id"`
	Balance     money.Amount `json:"balance"`
	CreditLimit money.Amount `json:"credit_limit"`
	Currency    string       `json:"currency"`
}

// posted is the audit "after" of an entry: the balance and the entry.
type posted struct {
	state
	Amount               money.Amount `json:"amount"`
	Kind                 Kind         `json:"type"`
	BalanceTransactionID uuid.UUID    `json:"balance_transaction_id"`
	Note                 string       `json:"note,omitempty"`
}
