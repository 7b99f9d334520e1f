package store

import (
	"context"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// LedgerViolation is one row found breaking a money rule by the ledger
// check (sql/queries/ledger.sql): the rule's name, the ids of the rows
// involved (the first usually the owner: order, customer, payment) and a
// short text.
type LedgerViolation struct {
	Rule   string
	IDs    []string
	Detail string
}

// LedgerTotals are the counts and money totals the ledger check reports.
type LedgerTotals = dbsqlc.LedgerTotalsRow

// LedgerCheck is one query of the ledger check.
type LedgerCheck struct {
	// Name is the query's name, for errors.
	Name string
	Run  func(ctx context.Context, db DB) ([]LedgerViolation, error)
}

// ledgerRow is the shape every ledger query answers; sqlc generates one
// identical struct per query.
type ledgerRow struct {
	Rule   string
	Ids    []string
	Detail string
}

func ledgerCheck[R ~struct {
	Rule   string
	Ids    []string
	Detail string
}](name string, query func(*dbsqlc.Queries, context.Context) ([]R, error)) LedgerCheck {
	return LedgerCheck{Name: name, Run: func(ctx context.Context, db DB) ([]LedgerViolation, error) {
		rows, err := query(dbsqlc.New(db), ctx)
		if err != nil {
			return nil, MapError(err)
		}
		out := make([]LedgerViolation, len(rows))
		for i, r := range rows {
			lr := ledgerRow(r)
			out[i] = LedgerViolation{Rule: lr.Rule, IDs: lr.Ids, Detail: lr.Detail}
		}
		return out, nil
	}}
}

// LedgerChecks are the ledger check's queries, each listing the rows that
// break its rules.
var LedgerChecks = []LedgerCheck{
	ledgerCheck("money scale", (*dbsqlc.Queries).LedgerMoneyScale),
	ledgerCheck("negative amounts", (*dbsqlc.Queries).LedgerNegativeAmounts),
	ledgerCheck("payment refunds", (*dbsqlc.Queries).LedgerPaymentRefunds),
	ledgerCheck("payment status", (*dbsqlc.Queries).LedgerPaymentStatus),
	ledgerCheck("order_paid events", (*dbsqlc.Queries).LedgerOrderPaidEvents),
	ledgerCheck("order payments", (*dbsqlc.Queries).LedgerOrderPayments),
	ledgerCheck("invoice payments", (*dbsqlc.Queries).LedgerInvoicePayments),
	ledgerCheck("balance chain", (*dbsqlc.Queries).LedgerBalanceChain),
	ledgerCheck("balance references", (*dbsqlc.Queries).LedgerBalanceReferences),
	ledgerCheck("events", (*dbsqlc.Queries).LedgerEvents),
}
