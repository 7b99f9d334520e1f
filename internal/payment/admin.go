package payment

import (
	"context"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/store"
)

// Refunds returns a payment's refunds, newest first (admin). NotFound when
// the payment does not exist, so an empty list always means "no refunds".
func (s *Service) Refunds(ctx context.Context, paymentID uuid.UUID) ([]store.Refund, error) {
	if _, err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	if _, err := s.Get(ctx, paymentID); err != nil {
		return nil, err
	}
	return store.ListRefundsNewestFirst(ctx, s.db, paymentID)
}

// AuditTrail returns one page of an entity's audit log, newest first
// (admin). An entity without entries is an empty page, not NotFound: the
// log outlives nothing it names, and some entities (plugins) have no row.
func (s *Service) AuditTrail(ctx context.Context, entityType, entityID string, page, size uint32) ([]store.AuditLogRow, Page, error) {
	if _, err := requireAdmin(ctx); err != nil {
		return nil, Page{}, err
	}
	page, size, err := NormalizePage(page, size)
	if err != nil {
		return nil, Page{}, err
	}
	rows, total, err := store.ListAuditEntries(ctx, s.db, entityType, entityID,
		store.Page{Limit: int64(size), Offset: int64(page-1) * int64(size)})
	if err != nil {
		return nil, Page{}, err
	}
	return rows, Page{Number: page, Size: size, Total: uint64(total)}, nil
}
