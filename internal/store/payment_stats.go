package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// PaymentStatsGroup is what the payments of one status and currency created
// in a window add up to. Sums are in cents: they may exceed NUMERIC(12,2).
type PaymentStatsGroup struct {
	Status        string
	Currency      string
	Payments      int64
	AmountCents   int64
	RefundedCents int64
}

// PaymentStatsSince groups the payments created at or after since by status
// and currency.
func PaymentStatsSince(ctx context.Context, db DB, since time.Time) ([]PaymentStatsGroup, error) {
	rows, err := dbsqlc.New(db).PaymentStatsSince(ctx, since)
	if err != nil {
		return nil, MapError(err)
	}
	out := make([]PaymentStatsGroup, len(rows))
	for i, r := range rows {
		out[i] = PaymentStatsGroup(r)
	}
	return out, nil
}

// PendingRefunds sums up the refunds pending now: how many, and when the
// oldest was requested (nil when none is).
type PendingRefunds struct {
	Count  int64
	Oldest *time.Time
}

// PendingRefundSummary counts the refunds pending now and finds the oldest.
func PendingRefundSummary(ctx context.Context, db DB) (PendingRefunds, error) {
	row, err := dbsqlc.New(db).OldestPendingRefund(ctx)
	if errors.Is(err, pgx.ErrNoRows) {
		return PendingRefunds{}, nil
	}
	if err != nil {
		return PendingRefunds{}, MapError(err)
	}
	return PendingRefunds{Count: row.Refunds, Oldest: &row.CreatedAt}, nil
}

// ToReturn is the captured money of one currency not returned yet: how many
// payments hold some, how much (in cents), and when the oldest was
// captured.
type ToReturn struct {
	Currency string
	Payments int64
	Cents    int64
	Oldest   time.Time
}

// MoneyToReturn sums up the captured money not returned yet, per currency
// (by code).
func MoneyToReturn(ctx context.Context, db DB) ([]ToReturn, error) {
	rows, err := dbsqlc.New(db).MoneyToReturn(ctx)
	if err != nil {
		return nil, MapError(err)
	}
	var out []ToReturn
	for _, r := range rows {
		out = append(out, ToReturn(r))
	}
	return out, nil
}
