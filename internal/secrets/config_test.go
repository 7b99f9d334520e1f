package secrets_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/configschema"
	"github.com/rustbill/paymentd/internal/secrets"
)

// The associated data is part of every stored value: a change of its
// spelling would make every value stored before unreadable. Gateway
// interfaces' values were sealed with exactly this form.
func TestAssociatedDataKeepsTheFormStoredValuesWereSealedWith(t *testing.T) {
	t.Parallel()
	id := uuid.MustParse("0b5c8a3e-3f2a-4f6e-9d0c-1a2b3c4d5e6f")
	require.Equal(t, `paymentd gateway_interface 0b5c8a3e-3f2a-4f6e-9d0c-1a2b3c4d5e6f config ["auth","token"]`,
		string(secrets.Owner{Kind: "gateway_interface", ID: id}.AAD([]string{"auth", "token"})))
	require.Equal(t, `paymentd order 0b5c8a3e-3f2a-4f6e-9d0c-1a2b3c4d5e6f config ["token"]`,
		string(secrets.Owner{Kind: "order", ID: id, Field: "item.provider_config"}.AAD([]string{"token"})), "the field names messages only")
	require.Equal(t, "provider_config.auth.token", secrets.Owner{Kind: "product", Field: "provider_config"}.Path([]string{"auth", "token"}))
}

// A config sealed for one owner opens for that owner only; sealing follows
// the secret paths, opening follows the values.
func TestConfigSealedForAnOwnerOpensForThatOwnerOnly(t *testing.T) {
	t.Parallel()
	k := ring(t, "k1", map[string][]byte{"k1": key(1)})
	product := secrets.Owner{Kind: "product", ID: uuid.New(), Field: "provider_config"}
	clear := map[string]any{"api_url": "https://p.example", "token": "t0ken", "plan": "vps", "auth": map[string]any{"pass": "p4ss"}, "empty": ""}
	sealed, err := k.SealConfig(product, [][]string{{"token"}, {"auth", "pass"}, {"empty"}}, clear)
	require.NoError(t, err)
	require.Equal(t, "https://p.example", sealed["api_url"])
	require.True(t, secrets.IsSealed(sealed["token"].(string)))
	require.True(t, secrets.IsSealed(sealed["auth"].(map[string]any)["pass"].(string)))
	require.Equal(t, "", sealed["empty"], "an empty secret stays empty")
	require.Equal(t, "t0ken", clear["token"], "the input is not written to")

	opened, err := k.OpenConfig(product, sealed)
	require.NoError(t, err)
	require.Equal(t, clear, opened)

	other := secrets.Owner{Kind: "order", ID: product.ID, Field: "item.provider_config"}
	_, err = k.OpenConfig(other, sealed)
	var unreadable *secrets.UnreadableError
	require.ErrorAs(t, err, &unreadable, "same id, another kind")
	require.Len(t, unreadable.Problems, 2)
	require.ErrorContains(t, err, "item.provider_config.token: key \"k1\"")
	require.NotContains(t, err.Error(), "t0ken")

	var none *secrets.Keyring
	_, err = none.SealConfig(product, [][]string{{"token"}}, clear)
	require.ErrorIs(t, err, secrets.ErrNoKey)
	require.ErrorContains(t, err, "provider_config.token is a secret")
	keep, err := none.SealConfig(product, [][]string{{"token"}}, map[string]any{"plan": "vps"})
	require.NoError(t, err, "without a key, a config without secrets is stored")
	require.Equal(t, map[string]any{"plan": "vps"}, keep)

	require.Equal(t, []string{`provider_config.a.0: a value may not start with "enc:" (the form of an encrypted secret; send the clear value)`},
		secrets.SealedLooking("provider_config", map[string]any{"a": []any{sealed["token"]}, "b": "clear"}))
}

// An update keeps the secrets it omits (merge decides) and refuses to keep
// one that does not open.
func TestMergeUpdateOpensTheStoredSecretsAndRefusesToKeepAnUnreadableOne(t *testing.T) {
	t.Parallel()
	k := ring(t, "k1", map[string][]byte{"k1": key(1)})
	a := secrets.Owner{Kind: "product", ID: uuid.New(), Field: "provider_config"}
	b := secrets.Owner{Kind: "product", ID: uuid.New(), Field: "provider_config"}
	storedA, err := k.SealConfig(a, [][]string{{"token"}}, map[string]any{"api_url": "https://a", "token": "t0ken-a"})
	require.NoError(t, err)
	keepToken := func(stored, incoming map[string]any) (map[string]any, error) {
		out := secrets.DeepCopy(incoming)
		out["token"] = stored["token"]
		return out, nil
	}
	merged, err := k.MergeUpdate(a, storedA, map[string]any{"api_url": "https://b"}, keepToken)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"api_url": "https://b", "token": "t0ken-a"}, merged)

	_, err = k.MergeUpdate(b, storedA, map[string]any{"api_url": "https://b"}, keepToken)
	require.ErrorContains(t, err, "provider_config.token: the stored secret does not decrypt with the keys of [secrets]; send its value again")
}

// BenchmarkSealAnOrdersCopy is what placing an order of a provisioned
// product adds: the product's settings (one sealed token) opened and the
// token sealed again for the order.
func BenchmarkSealAnOrdersCopy(b *testing.B) {
	k, err := secrets.New("k1", map[string][]byte{"k1": key(1)})
	require.NoError(b, err)
	product := secrets.Owner{Kind: "product", ID: uuid.New()}
	stored, err := k.SealConfig(product, [][]string{{"token"}}, map[string]any{"api_url": "https://p.example/", "token": "0123456789abcdef0123456789abcdef", "plan": "vps-1g"})
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		opened, err := k.OpenConfig(product, stored)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := k.SealConfig(secrets.Owner{Kind: "order", ID: uuid.New()}, [][]string{{"token"}}, opened); err != nil {
			b.Fatal(err)
		}
	}
}

// An update that moves an endpoint may not keep a secret: the refusal is
// InvalidArgument and names the properties in the owner's words.
func TestMergeUpdateRefusesToKeepASecretForAMovedEndpoint(t *testing.T) {
	t.Parallel()
	k := ring(t, "k1", map[string][]byte{"k1": key(1)})
	o := secrets.Owner{Kind: "product", ID: uuid.New(), Field: "provider_config"}
	schema, err := configschema.Parse([]byte(`{"properties": {"api_url": {"type": "string", "x-endpoint": true}, "token": {"type": "string", "x-secret": true}}}`))
	require.NoError(t, err)
	stored, err := k.SealConfig(o, schema.SecretPaths(), map[string]any{"api_url": "https://a.example/", "token": "t0ken-a"})
	require.NoError(t, err)

	_, err = k.MergeUpdate(o, stored, map[string]any{"api_url": "http://listener.example/", "token": configschema.Mask}, schema.Merge)
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)
	require.ErrorContains(t, err, "provider_config.api_url changed")
	require.ErrorContains(t, err, "send provider_config.token again")
	require.NotContains(t, err.Error(), "t0ken-a")

	merged, err := k.MergeUpdate(o, stored, map[string]any{"api_url": "http://listener.example/", "token": "t0ken-b"}, schema.Merge)
	require.NoError(t, err)
	require.Equal(t, "t0ken-b", merged["token"])
}
