package identity

import (
	"context"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/store"
)

// Audit actions of the admins' ending of a customer's access.
const (
	ActionCustomerDisabled            = "customer.disabled"
	ActionCustomerEnabled             = "customer.enabled"
	ActionCustomerSignedOutEverywhere = "customer.signed_out_everywhere"
)

// accessSnapshot is the audit row's view of a customer's access.
type accessSnapshot struct {
	Disabled        bool   `json:"disabled"`
	TokenGeneration int64  `json:"token_generation"`
	Reason          string `json:"reason,omitempty"`
}

func snapshotOf(c store.Customer) accessSnapshot {
	return accessSnapshot{Disabled: c.DisabledAt != nil, TokenGeneration: c.TokenGeneration}
}

// DisableCustomer disables a customer (admin): their login is refused like a
// wrong password, their access tokens end (for good: enabling does not bring
// them back) and their API keys are refused while the account is disabled —
// every such call answers Unauthenticated, on this instance at once and on
// the others within the access cache's second. Disabling a disabled
// customer changes nothing.
func (s *Service) DisableCustomer(ctx context.Context, id uuid.UUID, reason string) (Customer, error) {
	return s.setDisabled(ctx, id, true, strings.TrimSpace(reason))
}

// EnableCustomer enables a disabled customer (admin): they can log in again
// and their API keys that are not revoked work again. Enabling an enabled
// customer changes nothing.
func (s *Service) EnableCustomer(ctx context.Context, id uuid.UUID) (Customer, error) {
	return s.setDisabled(ctx, id, false, "")
}

func (s *Service) setDisabled(ctx context.Context, id uuid.UUID, disable bool, reason string) (Customer, error) {
	p, err := auth.RequireAdmin(ctx)
	if err != nil {
		return Customer{}, err
	}
	now := s.now()
	var after store.Customer
	changed := false
	err = store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		before, err := store.GetCustomerForUpdate(ctx, tx, id)
		if err != nil {
			return store.NotFound(err, "customer not found")
		}
		if (before.DisabledAt != nil) == disable {
			after = before
			return nil
		}
		var at *time.Time
		action := ActionCustomerEnabled
		if disable {
			at, action = &now, ActionCustomerDisabled
		}
		if after, err = store.SetCustomerDisabled(ctx, tx, id, at, now); err != nil {
			return err
		}
		changed = true
		snap := snapshotOf(after)
		snap.Reason = reason
		return audit.Write(ctx, tx, audit.Of(p), now, action, "customer", id.String(), snapshotOf(before), snap)
	})
	if err != nil {
		return Customer{}, err
	}
	if changed {
		s.access.publish(ctx, id, AccessState{Generation: after.TokenGeneration, Disabled: after.DisabledAt != nil})
	}
	return customerOf(after), nil
}

// SignOutEverywhere ends every access token of the customer (admin), on
// this instance at once and on the others within the access cache's second;
// with revokeKeys every active API key of theirs is revoked as well. It
// returns the customer and how many keys it revoked. The customer can log
// in again.
func (s *Service) SignOutEverywhere(ctx context.Context, id uuid.UUID, revokeKeys bool) (Customer, int64, error) {
	p, err := auth.RequireAdmin(ctx)
	if err != nil {
		return Customer{}, 0, err
	}
	now := s.now()
	var after store.Customer
	var revoked int64
	err = store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		before, err := store.GetCustomerForUpdate(ctx, tx, id)
		if err != nil {
			return store.NotFound(err, "customer not found")
		}
		if after, err = store.EndCustomerTokens(ctx, tx, id, now); err != nil {
			return err
		}
		if revokeKeys {
			if revoked, err = store.Q(tx).RevokeCustomerApiKeys(ctx, store.RevokeCustomerApiKeysParams{
				CustomerID: id, RevokedAt: &now,
			}); err != nil {
				return err
			}
		}
		return audit.Write(ctx, tx, audit.Of(p), now, ActionCustomerSignedOutEverywhere, "customer", id.String(), snapshotOf(before),
			map[string]any{"disabled": after.DisabledAt != nil, "token_generation": after.TokenGeneration, "api_keys_revoked": revoked})
	})
	if err != nil {
		return Customer{}, 0, err
	}
	s.access.publish(ctx, id, AccessState{Generation: after.TokenGeneration, Disabled: after.DisabledAt != nil})
	return customerOf(after), revoked, nil
}
