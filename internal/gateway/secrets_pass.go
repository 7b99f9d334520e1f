package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/configschema"
	"github.com/rustbill/paymentd/internal/secrets"
	"github.com/rustbill/paymentd/internal/store"
)

// Passes over the stored secrets of every gateway interface: the one at
// start (clear values encrypted: a database from before encryption, a
// value written directly, a property an upgraded schema made secret),
// `paymentd secrets rotate` (everything re-encrypted under the current
// key), and the check that a service without keys has nothing to decrypt.
//
// A pass that changes something takes each interface in a short
// transaction of its own, under the row's lock (FOR NO KEY UPDATE: payments
// referring to it are not held up), and decides again there: instances
// starting together take turns on each row, and the later ones find nothing
// left to do. A pass cut short leaves every interface either done or as it
// was, and the next pass finishes the rest. Each changed interface gets an
// audit row naming its secrets and the key each is under, before and after
// — never a value.

// SecretsReport is what a pass found and did.
type SecretsReport struct {
	// Interfaces is the number of interfaces holding at least one secret.
	Interfaces int
	// Sealed counts clear values encrypted, Resealed values re-encrypted
	// under the current key.
	Sealed, Resealed int
	// ByKey counts the stored secrets by the id of their key after the
	// pass; "" counts those in clear.
	ByKey map[string]int
	// Unreadable names each sealed value that does not decrypt ("gateway
	// interface <id> (<name>): config.key: key "k1": …"); it is left as it
	// is, and its interface fails every use until an admin sends the value
	// again or the key is configured.
	Unreadable []string
}

// Total is the number of stored secrets, clear or sealed.
func (r SecretsReport) Total() int {
	n := 0
	for _, c := range r.ByKey {
		n += c
	}
	return n
}

// Clear is the number of secrets stored in clear.
func (r SecretsReport) Clear() int { return r.ByKey[""] }

// Changed is the number of values the pass wrote.
func (r SecretsReport) Changed() int { return r.Sealed + r.Resealed }

// ErrSecretsWithoutKey: the database holds secrets and no key is
// configured to read (or seal) them.
var ErrSecretsWithoutKey = errors.New("secrets without a key")

// Audit actions of the passes.
const (
	ActionInterfaceSealSecrets   = "gateway_interface.seal_secrets"
	ActionInterfaceRotateSecrets = "gateway_interface.rotate_secrets"
)

// CheckSecretsReadable counts the stored secrets without changing
// anything. With no keyring and any secret stored, it fails with
// ErrSecretsWithoutKey in one line that says what to do.
func CheckSecretsReadable(ctx context.Context, db store.DB, k *secrets.Keyring) (SecretsReport, error) {
	rows, err := store.ListAllGatewayInterfaces(ctx, db)
	if err != nil {
		return SecretsReport{}, err
	}
	rep := SecretsReport{ByKey: map[string]int{}}
	for _, gi := range rows {
		if _, err := resealOne(gi, k, modeCount, &rep); err != nil {
			return SecretsReport{}, err
		}
	}
	if k == nil && rep.Total() > 0 {
		return rep, fmt.Errorf("%w: the database holds %d gateway interface secrets (%d encrypted, %d in clear) and [secrets].keys is empty: configure [secrets].current and [secrets].keys (docs/operations.md, \"Secrets at rest\")",
			ErrSecretsWithoutKey, rep.Total(), rep.Total()-rep.Clear(), rep.Clear())
	}
	return rep, nil
}

// SealSecrets encrypts every secret stored in clear under the current key
// (the pass at start), as by. Without a keyring it is CheckSecretsReadable.
func SealSecrets(ctx context.Context, db store.DB, k *secrets.Keyring, by audit.Actor, at time.Time) (SecretsReport, error) {
	return pass(ctx, db, k, modeSeal, by, at)
}

// RotateSecrets encrypts every stored secret under the current key: clear
// ones, and sealed ones under another key (those that do not decrypt are
// reported and left). Afterwards no secret needs a key other than the
// current one, unless rep.Unreadable says otherwise.
func RotateSecrets(ctx context.Context, db store.DB, k *secrets.Keyring, by audit.Actor, at time.Time) (SecretsReport, error) {
	if k == nil {
		return SecretsReport{}, fmt.Errorf("%w: rotation needs [secrets].current and [secrets].keys", secrets.ErrNoKey)
	}
	return pass(ctx, db, k, modeRotate, by, at)
}

// What a pass does with each secret.
type passMode int

const (
	modeCount  passMode = iota // count, and check that sealed ones open
	modeSeal                   // seal the clear ones
	modeRotate                 // seal the clear ones, re-seal those under another key
)

func pass(ctx context.Context, db store.DB, k *secrets.Keyring, mode passMode, by audit.Actor, at time.Time) (SecretsReport, error) {
	rep, err := CheckSecretsReadable(ctx, db, k)
	if err != nil || k == nil || !needsPass(rep, k, mode) {
		return rep, err
	}
	action := ActionInterfaceSealSecrets
	if mode == modeRotate {
		action = ActionInterfaceRotateSecrets
	}
	rows, err := store.ListAllGatewayInterfaces(ctx, db)
	if err != nil {
		return rep, err
	}
	rep = SecretsReport{ByKey: map[string]int{}}
	for _, row := range rows {
		// Each interface in a transaction of its own, decided again under
		// its row lock: another instance may have sealed it meanwhile, and
		// holding one row at a time cannot deadlock with a plugin upgrade
		// updating several.
		var one SecretsReport
		err := store.WithTx(ctx, db, func(tx pgx.Tx) error {
			one = SecretsReport{ByKey: map[string]int{}}
			gi, err := store.LockGatewayInterface(ctx, tx, row.ID)
			if errors.Is(err, store.ErrNotFound) {
				return nil // deleted meanwhile
			}
			if err != nil {
				return err
			}
			before := secretKeys(gi)
			out, err := resealOne(gi, k, mode, &one)
			if err != nil || out == nil {
				return err
			}
			raw, err := json.Marshal(out)
			if err != nil {
				return err
			}
			if err := store.SetGatewayInterfaceConfig(ctx, tx, gi.ID, raw); err != nil {
				return err
			}
			gi.Config = raw
			return audit.Write(ctx, tx, by, at, action, entityInterface, gi.ID.String(), before, secretKeys(gi))
		})
		if err != nil {
			return rep, fmt.Errorf("gateway interface %s: %w", row.ID, err)
		}
		rep.add(one)
	}
	return rep, nil
}

func (r *SecretsReport) add(o SecretsReport) {
	r.Interfaces += o.Interfaces
	r.Sealed += o.Sealed
	r.Resealed += o.Resealed
	for id, n := range o.ByKey {
		r.ByKey[id] += n
	}
	r.Unreadable = append(r.Unreadable, o.Unreadable...)
}

// needsPass reports whether what CheckSecretsReadable found calls for a
// write: a clear secret, or (rotating) one under a key not the current.
func needsPass(rep SecretsReport, k *secrets.Keyring, mode passMode) bool {
	for id, n := range rep.ByKey {
		if n > 0 && (id == "" || (mode == modeRotate && id != k.Current())) {
			return true
		}
	}
	return false
}

// resealOne adds gi's secrets to rep and returns its config with clear
// secrets sealed (modeSeal, modeRotate) and sealed ones under another key
// sealed again under the current one (modeRotate) — nil when nothing
// changes (always for modeCount, or without a keyring).
// The secrets are the sealed values wherever they are and the non-empty
// strings at the paths the interface's schema calls secret.
func resealOne(gi store.GatewayInterface, k *secrets.Keyring, mode passMode, rep *SecretsReport) (map[string]any, error) {
	cfg, err := decodeConfig(gi.Config)
	if err != nil {
		return nil, fmt.Errorf("gateway interface %s: stored config is not a JSON object: %w", gi.ID, err)
	}
	var secretPaths [][]string
	if schema, err := configschema.Of(gi.ConfigSchema); err == nil {
		secretPaths = schema.SecretPaths()
	}
	found, changed := 0, false
	var sealErr error
	visitStrings(cfg, func(path []string, v string) (string, bool) {
		aad := secretAAD(gi.ID, path)
		var plain string
		wasClear := false
		switch {
		case secrets.IsSealed(v):
			found++
			id, ok := secrets.KeyID(v)
			if !ok {
				id = "malformed"
			}
			if k == nil {
				rep.ByKey[id]++
				return "", false
			}
			p, err := k.Open(v, aad)
			if err != nil {
				rep.Unreadable = append(rep.Unreadable, fmt.Sprintf("gateway interface %s (%s): %s: %v", gi.ID, gi.DisplayName, configPath(path), err))
			}
			if err != nil || mode != modeRotate || id == k.Current() {
				rep.ByKey[id]++
				return "", false
			}
			plain = p
		case v != "" && slices.ContainsFunc(secretPaths, func(p []string) bool { return slices.Equal(p, path) }):
			found++
			if k == nil || mode == modeCount {
				rep.ByKey[""]++
				return "", false
			}
			plain, wasClear = v, true
		default:
			return "", false
		}
		sealed, err := k.Seal(plain, aad)
		if err != nil {
			sealErr = fmt.Errorf("gateway interface %s: %s: %w", gi.ID, configPath(path), err)
			return "", false
		}
		if wasClear {
			rep.Sealed++
		} else {
			rep.Resealed++
		}
		rep.ByKey[k.Current()]++
		changed = true
		return sealed, true
	})
	if sealErr != nil {
		return nil, sealErr
	}
	if found > 0 {
		rep.Interfaces++
	}
	if !changed {
		return nil, nil
	}
	return cfg, nil
}

// secretsState is the audit before/after of a pass: each secret's path and
// the key it is under ("clear" for none). Never a value.
type secretsState struct {
	Secrets map[string]string `json:"secrets"`
}

func secretKeys(gi store.GatewayInterface) secretsState {
	st := secretsState{Secrets: map[string]string{}}
	cfg, err := decodeConfig(gi.Config)
	if err != nil {
		return st
	}
	var secretPaths [][]string
	if schema, err := configschema.Of(gi.ConfigSchema); err == nil {
		secretPaths = schema.SecretPaths()
	}
	visitStrings(cfg, func(path []string, v string) (string, bool) {
		switch {
		case secrets.IsSealed(v):
			id, _ := secrets.KeyID(v)
			st.Secrets[configPath(path)] = id
		case v != "" && slices.ContainsFunc(secretPaths, func(p []string) bool { return slices.Equal(p, path) }):
			st.Secrets[configPath(path)] = "clear"
		}
		return "", false
	})
	return st
}
