package secretpass

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/configschema"
	"github.com/rustbill/paymentd/internal/secrets"
	"github.com/rustbill/paymentd/internal/store"
)

// Table is one kind of stored config holding plugin secrets.
type Table struct {
	// Kind is the owner's kind, bound into each value's associated data,
	// and the audit entity ("gateway_interface").
	Kind string
	// Field names the config in messages ("provider_config").
	Field string
	// Plural names the rows in messages ("gateway interfaces").
	Plural string
	// unchecked: the pass at start seals clear values without opening the
	// sealed ones to check them (orders' copies: many rows, and nothing
	// but the passes reads them); rotation opens everything.
	unchecked bool
	rows      store.SecretConfigTable
}

// Owner is the owner of row id's config.
func (t Table) Owner(id uuid.UUID) secrets.Owner {
	return secrets.Owner{Kind: t.Kind, ID: id, Field: t.Field}
}

// SealAction and RotateAction are the audit actions of the passes.
func (t Table) SealAction() string   { return t.Kind + ".seal_secrets" }
func (t Table) RotateAction() string { return t.Kind + ".rotate_secrets" }

// The tables, in the order the passes take them.
var (
	GatewayInterfaces = Table{Kind: "gateway_interface", Field: "config", Plural: "gateway interfaces", rows: store.GatewayInterfaceConfigs}
	Products          = Table{Kind: "product", Field: "provider_config", Plural: "products", rows: store.ProductProviderConfigs}
	Orders            = Table{Kind: "order", Field: "item.provider_config", Plural: "orders", unchecked: true, rows: store.OrderProviderConfigs}
	Tables            = []Table{GatewayInterfaces, Products, Orders}
)

// Report is what a pass found and did: over every table, and by table
// kind.
type Report struct {
	secrets.Report
	Of map[string]secrets.Report
}

func newReport() Report {
	r := Report{Report: secrets.NewReport(), Of: map[string]secrets.Report{}}
	for _, t := range Tables {
		r.Of[t.Kind] = secrets.NewReport()
	}
	return r
}

func (r *Report) add(t Table, one secrets.Report) {
	r.Report.Add(one)
	of := r.Of[t.Kind]
	of.Add(one)
	r.Of[t.Kind] = of
}

// ErrSecretsWithoutKey: the database holds secrets and no key is
// configured to read (or seal) them.
var ErrSecretsWithoutKey = errors.New("secrets without a key")

// pageSize is how many rows a pass reads at a time.
const pageSize = 500

// Check counts the stored secrets without changing anything (and, with a
// keyring, names those that do not decrypt). With no keyring and any
// secret stored, it fails with ErrSecretsWithoutKey in one line that says
// what to do.
func Check(ctx context.Context, db store.DB, k *secrets.Keyring) (Report, error) {
	rep, err := pass(ctx, db, k, secrets.Count, audit.Actor{}, time.Time{})
	if err != nil {
		return rep, err
	}
	return rep, refuseWithoutKey(k, rep)
}

// refuseWithoutKey is ErrSecretsWithoutKey, saying what to do, when rep
// counts secrets and there is no keyring.
func refuseWithoutKey(k *secrets.Keyring, rep Report) error {
	if k != nil || rep.Total() == 0 {
		return nil
	}
	var by []string
	for _, t := range Tables {
		by = append(by, fmt.Sprintf("%s %d", t.Plural, rep.Of[t.Kind].Total()))
	}
	return fmt.Errorf("%w: the database holds %d secret(s) (%s; %d encrypted, %d in clear) and [secrets].keys is empty: configure [secrets].current and [secrets].keys (docs/operations.md, \"Secrets at rest\")",
		ErrSecretsWithoutKey, rep.Total(), strings.Join(by, ", "), rep.Total()-rep.Clear(), rep.Clear())
}

// ActionOrdersSealed marks a finished pass over the orders' copies
// (AtStart's orders): once one has run under a key, every order placed
// since holds its copy sealed (a secret cannot be stored without a key),
// so later starts need not read every order again.
const ActionOrdersSealed = "secrets.orders_sealed"

// AtStart is the pass of a serving instance's start. It covers at once
// what the service uses — the gateway interfaces' and products' configs —
// and leaves the orders' copies (the record of what was bought, never
// handed to a plugin) to later, because a pass over every order ever
// placed would make each start as slow as the orders table is long.
//
// With a keyring it seals the interfaces and products, and returns in
// orders the sealing of the orders, for the caller to run in the
// background (it is idempotent and safe beside other instances' passes),
// or nil when no order can hold a secret in clear: a pass has finished
// before (ActionOrdersSealed) and this start sealed nothing in clear.
// Without one it checks the interfaces and products and, only when they
// hold secrets (the start is then refused), counts the orders' too for the
// message; orders is nil.
func AtStart(ctx context.Context, db store.DB, k *secrets.Keyring, by audit.Actor, at time.Time) (rep Report, orders func(context.Context) (Report, error), err error) {
	used := []Table{GatewayInterfaces, Products}
	if k == nil {
		rep, err = pass(ctx, db, nil, secrets.Count, audit.Actor{}, time.Time{}, used...)
		if err != nil || rep.Total() == 0 {
			return rep, nil, err
		}
		rest, err := pass(ctx, db, nil, secrets.Count, audit.Actor{}, time.Time{}, Orders)
		if err != nil {
			return rep, nil, err
		}
		rep.add(Orders, rest.Of[Orders.Kind])
		return rep, nil, refuseWithoutKey(nil, rep)
	}
	rep, err = pass(ctx, db, k, secrets.SealClear, by, at, used...)
	if err != nil {
		return rep, nil, err
	}
	done, err := store.Q(db).AuditActionExists(ctx, ActionOrdersSealed)
	if err != nil {
		return rep, nil, err
	}
	if done && rep.Sealed == 0 {
		return rep, nil, nil
	}
	return rep, func(ctx context.Context) (Report, error) {
		rep, err := pass(ctx, db, k, secrets.SealClear, by, at, Orders)
		if err != nil || len(rep.Unreadable) > 0 {
			return rep, err
		}
		return rep, audit.Write(ctx, db, by, at, ActionOrdersSealed, "secrets", Orders.Kind, nil,
			map[string]any{"key_id": k.Current(), "sealed": rep.Sealed, "orders": rep.Owners})
	}, nil
}

// Seal encrypts every secret stored in clear under the current key (the
// pass at start), as by. Without a keyring it is Check.
func Seal(ctx context.Context, db store.DB, k *secrets.Keyring, by audit.Actor, at time.Time) (Report, error) {
	if k == nil {
		return Check(ctx, db, nil)
	}
	return pass(ctx, db, k, secrets.SealClear, by, at)
}

// Rotate encrypts every stored secret under the current key: clear ones,
// and sealed ones under another key (those that do not decrypt are
// reported and left). Afterwards no secret needs a key other than the
// current one, unless rep.Unreadable says otherwise.
func Rotate(ctx context.Context, db store.DB, k *secrets.Keyring, by audit.Actor, at time.Time) (Report, error) {
	if k == nil {
		return Report{}, fmt.Errorf("%w: rotation needs [secrets].current and [secrets].keys", secrets.ErrNoKey)
	}
	return pass(ctx, db, k, secrets.Rotate, by, at)
}

func pass(ctx context.Context, db store.DB, k *secrets.Keyring, mode secrets.Mode, by audit.Actor, at time.Time, tables ...Table) (Report, error) {
	if len(tables) == 0 {
		tables = Tables
	}
	rep := newReport()
	for _, t := range tables {
		after := uuid.Nil
		for {
			page, err := t.rows.Page(ctx, db, after, pageSize)
			if err != nil {
				return rep, fmt.Errorf("%s: %w", t.Plural, err)
			}
			tmode := mode
			if mode == secrets.SealClear && t.unchecked {
				tmode = secrets.SealClearOnly
			}
			for _, row := range page {
				one, err := t.one(ctx, db, k, tmode, row, by, at)
				if err != nil {
					return rep, fmt.Errorf("%s: %w", t.Owner(row.ID), err)
				}
				rep.add(t, one)
			}
			if len(page) < pageSize {
				break
			}
			after = page[len(page)-1].ID
		}
	}
	return rep, nil
}

// one decides on row as read; when something is to be written, it does so
// in a transaction of its own, deciding again under the row's lock:
// another instance may have sealed it meanwhile.
func (t Table) one(ctx context.Context, db store.DB, k *secrets.Keyring, mode secrets.Mode, row store.SecretConfig, by audit.Actor, at time.Time) (secrets.Report, error) {
	one := secrets.NewReport()
	changed, _, err := t.reseal(k, mode, row, &one)
	if err != nil || !changed {
		return one, err
	}
	action := t.SealAction()
	if mode == secrets.Rotate {
		action = t.RotateAction()
	}
	err = store.WithTx(ctx, db, func(tx pgx.Tx) error {
		one = secrets.NewReport()
		locked, err := t.rows.Lock(ctx, tx, row.ID)
		if errors.Is(err, store.ErrNotFound) {
			return nil // deleted meanwhile
		}
		if err != nil {
			return err
		}
		before, err := t.keysOf(locked)
		if err != nil {
			return err
		}
		changed, cfg, err := t.reseal(k, mode, locked, &one)
		if err != nil || !changed {
			return err
		}
		raw, err := json.Marshal(cfg)
		if err != nil {
			return err
		}
		if err := t.rows.Write(ctx, tx, locked.ID, raw); err != nil {
			return err
		}
		locked.Config = raw
		after, err := t.keysOf(locked)
		if err != nil {
			return err
		}
		return audit.Write(ctx, tx, by, at, action, t.Kind, locked.ID.String(), before, after)
	})
	return one, err
}

// reseal is secrets.Keyring.Reseal of row's config, with the secret paths
// of its schema; cfg is the config as rewritten.
func (t Table) reseal(k *secrets.Keyring, mode secrets.Mode, row store.SecretConfig, rep *secrets.Report) (bool, map[string]any, error) {
	cfg, err := secrets.DecodeConfig(row.Config)
	if err != nil {
		return false, nil, fmt.Errorf("stored %s is not a JSON object: %w", t.Field, err)
	}
	name := fmt.Sprintf("%s (%s)", t.Owner(row.ID), row.Name)
	changed, err := k.Reseal(t.Owner(row.ID), name, secretPaths(row.ConfigSchema), cfg, mode, rep)
	return changed, cfg, err
}

// secretsState is the audit before/after of a pass: each secret's path and
// the key it is under ("clear" for none). Never a value.
type secretsState struct {
	Secrets map[string]string `json:"secrets"`
}

func (t Table) keysOf(row store.SecretConfig) (secretsState, error) {
	cfg, err := secrets.DecodeConfig(row.Config)
	if err != nil {
		return secretsState{}, fmt.Errorf("stored %s is not a JSON object: %w", t.Field, err)
	}
	return secretsState{Secrets: secrets.KeysOf(t.Owner(row.ID), secretPaths(row.ConfigSchema), cfg)}, nil
}

// secretPaths are the paths schema marks secret: none when there is no
// schema (a product whose plugin is gone) or it does not parse (the
// sealed values are still found).
func secretPaths(schema []byte) [][]string {
	if len(schema) == 0 {
		return nil
	}
	s, err := configschema.Of(schema)
	if err != nil {
		return nil
	}
	return s.SecretPaths()
}
