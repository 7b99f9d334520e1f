package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/configschema"
	"github.com/rustbill/paymentd/internal/gateway"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/secretpass"
	"github.com/rustbill/paymentd/internal/secrets"
)

// setStored writes an interface's config behind the service's back, as
// someone with write access to the database would.
func (b *bundle) setStored(t *testing.T, id uuid.UUID, cfg map[string]any) {
	t.Helper()
	raw, err := json.Marshal(cfg)
	require.NoError(t, err)
	_, err = b.pool.Exec(context.Background(), `UPDATE gateway_interfaces SET config = $2 WHERE id = $1`, id, raw)
	require.NoError(t, err)
	b.reg.Invalidate()
}

// registryWith is another registry over the bundle's database and plugin
// directory, with keys: another instance's configuration.
func (b *bundle) registryWith(t *testing.T, keys *secrets.Keyring) *gateway.Registry {
	t.Helper()
	reg := gateway.NewRegistry(gateway.RegistryOptions{
		DB: b.pool, Dir: b.dir, ScanInterval: time.Hour,
		Runtime: plugin.NewRuntime(plugin.Options{}), Secrets: keys,
	})
	_, err := reg.Scan(context.Background())
	require.NoError(t, err)
	return reg
}

func TestSecretsAreStoredEncryptedAndReachOnlyThePlugin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.write(t, "gateway/demo.lua", gatewayScript("1.0.0", "Demo", schemaPidKey))
	b.scan(t)
	id := b.create(t, "demo", map[string]any{"pid": "1001", "key": "s3cret-merchant-key"})

	stored := b.storedConfig(t, id)
	require.Equal(t, "1001", stored["pid"], "only secrets are encrypted")
	key, _ := stored["key"].(string)
	require.True(t, strings.HasPrefix(key, "enc:v1:k1:"), key)
	require.NotContains(t, key, "s3cret")

	require.Equal(t, map[string]any{"pid": "1001", "key": "s3cret-merchant-key"}, b.pluginConfig(t, b.reg, id))
	res, err := b.svc.TestInterface(b.asAdmin, id)
	require.NoError(t, err)
	require.Equal(t, gateway.TestResult{OK: true, Message: "pid 1001"}, res)
	v, err := b.svc.GetInterface(b.asAdmin, id)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"pid": "1001", "key": configschema.Mask}, v.Config)

	// An update that keeps the secret (mask) stores it sealed again, under
	// the current key, still opening to the same value.
	_, err = b.svc.UpdateInterface(b.asAdmin, id, gateway.InterfaceUpdate{Config: map[string]any{"pid": "1002", "key": configschema.Mask}})
	require.NoError(t, err)
	again, _ := b.storedConfig(t, id)["key"].(string)
	require.True(t, strings.HasPrefix(again, "enc:v1:k1:"))
	require.Equal(t, map[string]any{"pid": "1002", "key": "s3cret-merchant-key"}, b.pluginConfig(t, b.reg, id))

	var audits string
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT string_agg(coalesce(before::text, '') || coalesce(after::text, ''), ' ') FROM audit_log WHERE entity_id = $1`, id.String()).Scan(&audits))
	require.NotContains(t, audits, "s3cret")
	require.NotContains(t, audits, "enc:v1", "the audit trail holds the masked config, not even the ciphertext")
	require.NotContains(t, b.logs.String(), "s3cret")
}

func TestMovedOrAlteredCiphertextMakesItsInterfaceUnusableUntilTheSecretIsSentAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.write(t, "gateway/demo.lua", gatewayScript("1.0.0", "Demo", schemaPidKey))
	b.scan(t)
	a := b.create(t, "demo", map[string]any{"pid": "1001", "key": "key-of-a"})
	victim := b.create(t, "demo", map[string]any{"pid": "2002", "key": "key-of-b"})
	sealedA := b.storedConfig(t, a)["key"].(string)

	unusable := func(t *testing.T) {
		t.Helper()
		_, err := b.reg.Get(context.Background(), victim)
		requireKind(t, err, apperr.FailedPrecondition)
		require.ErrorContains(t, err, "cannot be used: its secrets do not decrypt")
		_, err = b.svc.TestInterface(b.asAdmin, victim)
		requireKind(t, err, apperr.FailedPrecondition)
		_, err = b.svc.SetInterfaceEnabled(b.asAdmin, victim, true)
		requireKind(t, err, apperr.FailedPrecondition)
		_, err = b.svc.UpdateInterface(b.asAdmin, victim, gateway.InterfaceUpdate{Config: map[string]any{"pid": "2002"}})
		requireKind(t, err, apperr.FailedPrecondition)
		require.ErrorContains(t, err, "config.key: the stored secret does not decrypt")
		// Reads still answer, masked.
		v, err := b.svc.GetInterface(b.asAdmin, victim)
		require.NoError(t, err)
		require.Equal(t, configschema.Mask, v.Config["key"])
		// The other interface is not affected.
		require.Equal(t, "key-of-a", b.pluginConfig(t, b.reg, a)["key"])
	}

	// A's ciphertext copied into B's key, and into B's (non-secret) pid.
	b.setStored(t, victim, map[string]any{"pid": sealedA, "key": sealedA})
	unusable(t)
	v, err := b.svc.GetInterface(b.asAdmin, victim)
	require.NoError(t, err)
	require.Equal(t, configschema.Mask, v.Config["pid"], "a sealed value shows masked wherever it is")
	// A's ciphertext moved within A, to another property.
	b.setStored(t, a, map[string]any{"pid": sealedA, "key": sealedA})
	_, err = b.reg.Get(context.Background(), a)
	requireKind(t, err, apperr.FailedPrecondition)
	b.setStored(t, a, map[string]any{"pid": "1001", "key": sealedA})

	// One byte of the ciphertext changed.
	body := []byte(sealedA)
	if body[len(body)-3] == 'A' {
		body[len(body)-3] = 'B'
	} else {
		body[len(body)-3] = 'A'
	}
	b.setStored(t, victim, map[string]any{"pid": "2002", "key": string(body)})
	unusable(t)
	// Sealed under a key this instance does not hold.
	other := testKeyring(t, "k9", 9)
	foreign, err := other.Seal("key-of-b", []byte("anything"))
	require.NoError(t, err)
	b.setStored(t, victim, map[string]any{"pid": "2002", "key": foreign})
	unusable(t)
	logs := b.logs.String()
	require.Equal(t, 2, lines(logs, "gateway interface unusable: its secrets do not decrypt"), "once a minute per interface (the victim, and a), not at every use:\n%s", logs)
	require.NotContains(t, logs, "key-of-a")
	require.NotContains(t, logs, "key-of-b")

	// The admin sends the secret again: the interface works.
	_, err = b.svc.UpdateInterface(b.asAdmin, victim, gateway.InterfaceUpdate{Config: map[string]any{"pid": "2002", "key": "key-of-b-again"}})
	require.NoError(t, err)
	require.Equal(t, "key-of-b-again", b.pluginConfig(t, b.reg, victim)["key"])
}

func TestTheAPITakesNoSealedLookingValue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.write(t, "gateway/demo.lua", gatewayScript("1.0.0", "Demo", schemaPidKey))
	b.scan(t)
	a := b.create(t, "demo", map[string]any{"pid": "1001", "key": "key-of-a"})
	sealedA := b.storedConfig(t, a)["key"].(string)

	_, err := b.svc.CreateInterface(b.asAdmin, gateway.NewInterface{PluginName: "demo", DisplayName: "copy", Config: map[string]any{"pid": "1001", "key": sealedA}})
	requireKind(t, err, apperr.InvalidArgument)
	require.ErrorContains(t, err, `config.key: a value may not start with "enc:"`)
	_, err = b.svc.UpdateInterface(b.asAdmin, a, gateway.InterfaceUpdate{Config: map[string]any{"pid": "enc:v1:k1:AAAA", "key": configschema.Mask}})
	requireKind(t, err, apperr.InvalidArgument)
	require.ErrorContains(t, err, "config.pid")
	require.Equal(t, sealedA, b.storedConfig(t, a)["key"], "nothing changed")
}

func TestWithoutAKeyNoSecretIsStored(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.write(t, "gateway/demo.lua", gatewayScript("1.0.0", "Demo", schemaPidKey))
	b.scan(t)
	keyless := gateway.NewService(b.pool, b.registryWith(t, nil), nil, nil)
	_, err := keyless.CreateInterface(b.asAdmin, gateway.NewInterface{PluginName: "demo", DisplayName: "x", Config: map[string]any{"pid": "1", "key": "clear"}})
	requireKind(t, err, apperr.FailedPrecondition)
	require.ErrorContains(t, err, "config.key is a secret, and the service stores secrets only encrypted: configure [secrets].current and [secrets].keys")
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM gateway_interfaces`).Scan(&n))
	require.Zero(t, n)
}

func keyBytes(fill byte) []byte { return bytes.Repeat([]byte{fill}, secrets.KeySize) }

// insertClear writes an interface of plugin with cfg in clear, as a
// database from before encryption holds it, and returns its id.
func (b *bundle) insertClear(t *testing.T, plugin string, cfg map[string]any) uuid.UUID {
	t.Helper()
	raw, err := json.Marshal(cfg)
	require.NoError(t, err)
	var id uuid.UUID
	require.NoError(t, b.pool.QueryRow(context.Background(), `INSERT INTO gateway_interfaces (plugin_name, display_name, config, config_schema)
		SELECT name, 'clear ' || name, $2, config_schema FROM plugins WHERE name = $1 RETURNING id`, plugin, raw).Scan(&id))
	return id
}

func TestClearSecretsAreEncryptedOnceWhenSeveralInstancesStartTogether(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.write(t, "gateway/demo.lua", gatewayScript("1.0.0", "Demo", schemaPidKey))
	b.scan(t)
	ids := make([]uuid.UUID, 5)
	for i := range ids {
		ids[i] = b.insertClear(t, "demo", map[string]any{"pid": "1001", "key": "clear-key-" + string(rune('a'+i))})
	}
	empty := b.insertClear(t, "demo", map[string]any{"pid": "1001", "key": ""})

	// Without a key: nothing changes, and the answer says what to do.
	_, err := secretpass.Seal(context.Background(), b.pool, nil, audit.System("node-0"), time.Now())
	require.ErrorIs(t, err, secretpass.ErrSecretsWithoutKey)
	require.ErrorContains(t, err, "the database holds 5 secret(s) (gateway interfaces 5, products 0, orders 0; 0 encrypted, 5 in clear) and [secrets].keys is empty")
	require.NotContains(t, err.Error(), "\n", "one line")

	var wg sync.WaitGroup
	reports := make([]secretpass.Report, 4)
	errs := make([]error, 4)
	for i := range reports {
		wg.Go(func() {
			reports[i], errs[i] = secretpass.Seal(context.Background(), b.pool, b.keys, audit.System("node-"+string(rune('1'+i))), time.Now())
		})
	}
	wg.Wait()
	sealed := 0
	for i := range reports {
		require.NoError(t, errs[i])
		sealed += reports[i].Sealed
		require.Equal(t, map[string]int{"k1": 5}, reports[i].ByKey)
	}
	require.Equal(t, 5, sealed, "each clear value sealed exactly once")

	for i, id := range ids {
		key := b.storedConfig(t, id)["key"].(string)
		require.True(t, strings.HasPrefix(key, "enc:v1:k1:"), key)
		require.Equal(t, "clear-key-"+string(rune('a'+i)), b.pluginConfig(t, b.reg, id)["key"])
	}
	require.Equal(t, "", b.storedConfig(t, empty)["key"], "an empty secret stays empty")

	var rows int
	var trail string
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*), string_agg(before::text || after::text, ' ')
		FROM audit_log WHERE action = $1`, secretpass.GatewayInterfaces.SealAction()).Scan(&rows, &trail))
	require.Equal(t, 5, rows, "one audit row per interface")
	require.Contains(t, trail, `{"secrets": {"config.key": "clear"}}{"secrets": {"config.key": "k1"}}`)
	require.NotContains(t, trail, "clear-key")

	// A second pass finds nothing to do and writes nothing.
	rep, err := secretpass.Seal(context.Background(), b.pool, b.keys, audit.System("node-9"), time.Now())
	require.NoError(t, err)
	require.Zero(t, rep.Changed())
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE action = $1`, secretpass.GatewayInterfaces.SealAction()).Scan(&rows))
	require.Equal(t, 5, rows)
}

func TestRotationPutsEverySecretUnderTheCurrentKeySoTheOldOneCanGo(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.write(t, "gateway/demo.lua", gatewayScript("1.0.0", "Demo", schemaPidKey))
	b.scan(t)
	x := b.create(t, "demo", map[string]any{"pid": "1", "key": "key-x"})
	y := b.create(t, "demo", map[string]any{"pid": "2", "key": "key-y"})
	clear := b.insertClear(t, "demo", map[string]any{"pid": "3", "key": "key-clear"})
	broken := b.create(t, "demo", map[string]any{"pid": "4", "key": "key-broken"})
	b.setStored(t, broken, map[string]any{"pid": "4", "key": b.storedConfig(t, x)["key"]}) // x's, moved

	// Step one of a rotation: every instance knows k2, k1 still encrypts.
	// Step two: k2 encrypts. Then the pass.
	both, err := secrets.New("k2", map[string][]byte{"k2": keyBytes(2), "k1": keyBytes(1)})
	require.NoError(t, err)
	rep, err := secretpass.Rotate(context.Background(), b.pool, both, audit.System("cli:ops@host"), time.Now())
	require.NoError(t, err)
	require.Equal(t, 4, rep.Owners)
	require.Equal(t, 1, rep.Sealed)
	require.Equal(t, 2, rep.Resealed)
	require.Equal(t, map[string]int{"k2": 3, "k1": 1}, rep.ByKey, "the moved one stays as it was")
	require.Len(t, rep.Unreadable, 1)
	require.Contains(t, rep.Unreadable[0], broken.String())
	require.Contains(t, rep.Unreadable[0], "config.key: key \"k1\": does not decrypt")

	// The old key removed: every readable interface still works.
	onlyNew := b.registryWith(t, testKeyring(t, "k2", 2))
	require.Equal(t, "key-x", b.pluginConfig(t, onlyNew, x)["key"])
	require.Equal(t, "key-y", b.pluginConfig(t, onlyNew, y)["key"])
	require.Equal(t, "key-clear", b.pluginConfig(t, onlyNew, clear)["key"])
	_, err = onlyNew.Get(context.Background(), broken)
	requireKind(t, err, apperr.FailedPrecondition)

	var rows int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE action = $1 AND actor_id = 'cli:ops@host'`,
		secretpass.GatewayInterfaces.RotateAction()).Scan(&rows))
	require.Equal(t, 3, rows)

	// Rotating again changes nothing.
	rep, err = secretpass.Rotate(context.Background(), b.pool, both, audit.System("cli:ops@host"), time.Now())
	require.NoError(t, err)
	require.Zero(t, rep.Changed())
}
