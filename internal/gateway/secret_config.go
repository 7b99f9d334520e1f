package gateway

import (
	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/configschema"
	"github.com/rustbill/paymentd/internal/secretpass"
	"github.com/rustbill/paymentd/internal/secrets"
)

// Secrets at rest (doc.go, "Gateway interfaces and secrets"): every
// non-empty secret of an interface's config is stored sealed (the config
// helpers of internal/secrets) and bound to the interface id and the
// property's path, so a sealed value moved to another interface or property
// does not open. The passes over stored secrets are internal/secretpass.

// owner is what interface id's secrets are bound to.
func owner(id uuid.UUID) secrets.Owner { return secretpass.GatewayInterfaces.Owner(id) }

func openConfig(k *secrets.Keyring, id uuid.UUID, cfg map[string]any) (map[string]any, error) {
	return k.OpenConfig(owner(id), cfg)
}

func openRaw(k *secrets.Keyring, id uuid.UUID, raw []byte) (string, error) {
	return k.OpenRaw(owner(id), raw)
}

func sealConfig(k *secrets.Keyring, id uuid.UUID, schema *configschema.Schema, cfg map[string]any) (map[string]any, error) {
	return k.SealConfig(owner(id), schema.SecretPaths(), cfg)
}

func sealedLooking(cfg map[string]any) []string { return secrets.SealedLooking("config", cfg) }

func maskSealed(cfg map[string]any) map[string]any { return secrets.MaskSealed(cfg, configschema.Mask) }

// decodeConfig decodes a JSON object (a config, a schema, info). Numbers
// stay json.Number, so a stored config is written back digit for digit.
func decodeConfig(raw []byte) (map[string]any, error) { return secrets.DecodeConfig(raw) }
