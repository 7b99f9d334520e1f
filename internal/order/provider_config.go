package order

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/configschema"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/secretpass"
	"github.com/rustbill/paymentd/internal/secrets"
	"github.com/rustbill/paymentd/internal/store"
)

// checkProvider checks product id's provider plugin and its
// provider_config and returns the config as stored: JSON, its secrets
// sealed (nil when there is no plugin). The plugin must exist and be a
// provider; the config must satisfy the plugin's config schema, keys of the
// product's own (plan) aside.
func (s *Service) checkProvider(ctx context.Context, id uuid.UUID, name *string, cfg map[string]any) ([]byte, error) {
	if name == nil {
		if len(cfg) > 0 {
			return nil, apperr.New(apperr.InvalidArgument, "provider_config needs a provider_plugin")
		}
		return nil, nil
	}
	schema, err := s.providerSchema(ctx, s.db, *name)
	if err != nil {
		return nil, err
	}
	if cfg == nil {
		cfg = map[string]any{}
	}
	return s.providerConfigJSON(id, schema, cfg, append(secrets.SealedLooking(providerConfigField, cfg), schema.MaskSent(cfg)...))
}

// providerSchema is the config schema of provider plugin name.
func (s *Service) providerSchema(ctx context.Context, db store.DB, name string) (*configschema.Schema, error) {
	pl, err := store.Q(db).GetPlugin(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, apperr.New(apperr.InvalidArgument, "provider plugin %q does not exist", name)
	}
	if err != nil {
		return nil, err
	}
	if pl.Type != string(plugin.FirstPartyProvider) && pl.Type != string(plugin.UpstreamProvider) {
		return nil, apperr.New(apperr.InvalidArgument, "plugin %q is a %s plugin, not a provider", name, pl.Type)
	}
	schema, err := configschema.Of(pl.ConfigSchema)
	if err != nil {
		return nil, apperr.Wrap(apperr.Internal, err, "plugin %q: stored config schema does not parse", pl.Name)
	}
	return schema, nil
}

// providerConfigField names a product's provider settings in messages.
const providerConfigField = "provider_config"

// productOwner is what product id's provider settings are bound to.
func productOwner(id uuid.UUID) secrets.Owner { return secretpass.Products.Owner(id) }

// providerConfigJSON checks cfg (clear) against schema (the product's own
// keys aside) and encodes it for product id, its secrets sealed; problems
// are found beforehand and already named (provider_config.token).
func (s *Service) providerConfigJSON(id uuid.UUID, schema *configschema.Schema, cfg map[string]any, problems []string) ([]byte, error) {
	for _, p := range schema.ProblemsBesideOwnKeys(cfg) {
		problems = append(problems, "provider_"+p) // config.token → provider_config.token
	}
	if len(problems) > 0 {
		return nil, apperr.New(apperr.InvalidArgument, "%s", strings.Join(problems, "; "))
	}
	sealed, err := s.keys.SealConfig(productOwner(id), schema.SecretPaths(), cfg)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(sealed)
	if err != nil {
		return nil, apperr.Wrap(apperr.InvalidArgument, err, "provider_config: not representable as JSON")
	}
	return raw, nil
}

// frozenProviderConfig is the copy of prod's provider settings order
// orderID keeps in its item: the secrets sealed for the product opened and
// sealed again bound to the order, so that the copy is the order's own — a
// later change of the product leaves it as it was placed, and it cannot be
// moved to another order or back into a product. Settings that do not
// decrypt are FailedPrecondition: the product cannot be ordered until an
// admin sends its secrets again.
func (s *Service) frozenProviderConfig(prod store.Product, orderID uuid.UUID) (json.RawMessage, error) {
	raw := prod.ProviderConfig
	if len(raw) == 0 {
		return json.RawMessage("{}"), nil
	}
	if !secrets.ContainsSealed(raw) {
		return json.RawMessage(raw), nil
	}
	cfg, err := secrets.DecodeConfig(raw)
	if err != nil {
		return nil, apperr.Wrap(apperr.Internal, err, "product %s: stored provider_config is not a JSON object", prod.ID)
	}
	var sealedPaths [][]string
	secrets.VisitStrings(cfg, func(path []string, v string) (string, bool) {
		if secrets.IsSealed(v) {
			sealedPaths = append(sealedPaths, path)
		}
		return "", false
	})
	opened, err := s.keys.OpenConfig(productOwner(prod.ID), cfg)
	if err != nil {
		return nil, apperr.Wrap(apperr.FailedPrecondition, err, "product %s cannot be ordered: its provider settings do not decrypt with the keys of [secrets]", prod.ID)
	}
	frozen, err := s.keys.SealConfig(secretpass.Orders.Owner(orderID), sealedPaths, opened)
	if err != nil {
		return nil, err
	}
	out, err := json.Marshal(frozen)
	if err != nil {
		return nil, err
	}
	return out, nil
}
