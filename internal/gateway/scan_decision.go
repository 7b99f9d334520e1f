package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/configschema"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/text"
)

// decision applies the version rule to one plugin inside the transaction
// that holds its row lock, so that two instances scanning the same file at
// once decide one after the other on the row the first one left.
type decision struct {
	r    *Registry
	ctx  context.Context
	tx   pgx.Tx
	by   audit.Actor
	at   time.Time
	name string
	file *pluginFile // nil: the file is gone
	// cand is the compiled file (nil when it has none or failed: candErr).
	cand    *loaded
	candErr error
}

// apply returns the outcome and, for an upgrade, the new config schema the
// interfaces were given.
func (d *decision) apply() (outcome, *configschema.Schema, error) {
	row, err := store.Q(d.tx).LockPlugin(d.ctx, d.name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		if d.file == nil {
			return outcome{}, nil, nil // the row went away meanwhile
		}
		out, inserted, err := d.insert()
		if err != nil || inserted {
			return out, nil, err
		}
		// Another instance inserted it first: decide on its row.
		if row, err = store.Q(d.tx).LockPlugin(d.ctx, d.name); err != nil {
			return outcome{}, nil, err
		}
	case err != nil:
		return outcome{}, nil, err
	}
	return d.update(row)
}

// insert records a plugin seen for the first time. A file that does not
// load is recorded too (status error), so that admins see why; it has no
// definition yet, which an empty version says.
func (d *decision) insert() (outcome, bool, error) {
	f := d.file
	p := store.NewPlugin{Name: d.name, Path: f.rel, Source: storableSource(f.source), SHA256: f.sha256, At: d.at}
	ch := Change{Name: d.name}
	if d.cand != nil {
		c := d.cand
		p.Type, p.Version, p.Status = string(c.typ), c.script.Version(), store.PluginLoaded
		p.Info, p.ConfigSchema = c.info, c.schemaJSON
		ch.Kind, ch.FileVersion = ChangeAdded, c.script.Version()
	} else {
		t, _ := FolderType(f.folder)
		p.Type, p.Version, p.Status, p.LastError = string(t), "", store.PluginError, errorText(d.candErr)
		ch.Kind, ch.Error = ChangeError, p.LastError
	}
	row, err := store.InsertPlugin(d.ctx, d.tx, p)
	if errors.Is(err, store.ErrNotFound) {
		return outcome{}, false, nil
	}
	if err != nil {
		return outcome{}, false, err
	}
	if err := d.audit(actionOf(ch.Kind), nil, row); err != nil {
		return outcome{}, false, err
	}
	out := outcome{change: &ch}
	if d.cand != nil {
		out.load = d.cand
	}
	return out, true, nil
}

func (d *decision) update(row store.Plugin) (outcome, *configschema.Schema, error) {
	f, c := d.file, d.cand
	if f == nil {
		if row.Status == store.PluginMissing {
			return outcome{}, nil, nil
		}
		msg := fmt.Sprintf("%s is no longer in the plugin directory", row.Path)
		after, err := store.Q(d.tx).SetPluginStatus(d.ctx, store.SetPluginStatusParams{
			Status: store.PluginMissing, LastError: msg, Now: d.at, Name: d.name,
		})
		if err != nil {
			return outcome{}, nil, err
		}
		ch := Change{Name: d.name, Kind: ChangeMissing, PreviousVersion: row.Version, Error: msg}
		return outcome{change: &ch}, nil, d.audit(actionOf(ch.Kind), &row, after)
	}
	if c == nil {
		return d.fail(row, "", errorText(d.candErr))
	}

	version := c.script.Version()
	cmp := 1 // no definition yet: the first file that loads defines it
	if row.Version != "" {
		var err error
		if cmp, err = plugin.CompareVersions(version, row.Version); err != nil {
			d.r.log.WarnContext(d.ctx, "stored plugin version is not a semantic version; the file redefines the plugin", "plugin", d.name, "stored_version", row.Version)
			cmp = 1
		}
		if stored := plugin.Type(row.Type); stored != c.typ {
			switch {
			case family(stored) != family(c.typ):
				return d.fail(row, version, fmt.Sprintf("%s would make this %s plugin a %s plugin; a plugin's kind cannot change (give the file another name)", f.rel, stored, c.typ))
			case cmp <= 0:
				return d.fail(row, version, fmt.Sprintf("the type changes from %s to %s, which needs a version greater than the stored %s (the file says %s)", stored, c.typ, row.Version, version))
			}
		}
	}

	if cmp > 0 {
		after, err := store.UpdatePluginDefinition(d.ctx, d.tx, store.PluginDefinition{
			Name: d.name, Type: string(c.typ), Version: version, Path: f.rel,
			Source: string(f.source), SHA256: f.sha256, Info: c.info, ConfigSchema: c.schemaJSON, At: d.at,
		})
		if err != nil {
			return outcome{}, nil, err
		}
		n, err := store.SetPluginInterfaceSchemas(d.ctx, d.tx, d.name, c.schemaJSON, d.at)
		if err != nil {
			return outcome{}, nil, err
		}
		ch := Change{Name: d.name, Kind: ChangeUpgraded, PreviousVersion: row.Version, FileVersion: version, InterfacesUpdated: n}
		if err := d.audit(actionOf(ch.Kind), &row, after); err != nil {
			return outcome{}, nil, err
		}
		return outcome{change: &ch, load: c}, c.schema, nil
	}

	// Equal or lower version: the stored definition (version, info, config
	// schema, and so every interface's schema) stays; the stored source
	// and hash become the file's, and memory runs the file's code — see
	// doc.go for why.
	if row.Sha256 == f.sha256 && row.Status == store.PluginLoaded && row.Path == f.rel {
		return outcome{load: c}, nil, nil
	}
	after, err := store.Q(d.tx).UpdatePluginSource(d.ctx, store.UpdatePluginSourceParams{
		Path: f.rel, Source: string(f.source), Sha256: f.sha256, Now: d.at, Name: d.name,
	})
	if err != nil {
		return outcome{}, nil, err
	}
	kind := ChangeSourceUpdated
	if row.Sha256 == f.sha256 {
		kind = ChangeRecovered
	}
	ch := Change{Name: d.name, Kind: kind, PreviousVersion: row.Version, FileVersion: version}
	if err := d.audit(actionOf(kind), &row, after); err != nil {
		return outcome{}, nil, err
	}
	return outcome{change: &ch, load: c}, nil, nil
}

// fail disables the plugin: status error with msg, the stored definition and
// source left as they were (they describe the last code that loaded).
func (d *decision) fail(row store.Plugin, fileVersion, msg string) (outcome, *configschema.Schema, error) {
	if row.Status == store.PluginError && row.LastError == msg {
		return outcome{}, nil, nil
	}
	after, err := store.Q(d.tx).SetPluginStatus(d.ctx, store.SetPluginStatusParams{
		Status: store.PluginError, LastError: msg, Now: d.at, Name: d.name,
	})
	if err != nil {
		return outcome{}, nil, err
	}
	ch := Change{Name: d.name, Kind: ChangeError, PreviousVersion: row.Version, FileVersion: fileVersion, Error: msg}
	return outcome{change: &ch}, nil, d.audit(actionOf(ch.Kind), &row, after)
}

func (d *decision) audit(action string, before *store.Plugin, after store.Plugin) error {
	var b any
	if before != nil {
		b = pluginSnapshot(*before)
	}
	return audit.Write(d.ctx, d.tx, d.by, d.at, action, entityPlugin, d.name, b, pluginSnapshot(after))
}

// errorText is the message stored as a plugin's last error.
func errorText(err error) string {
	if err == nil {
		return "unknown error"
	}
	return text.Clip(err.Error(), 2000)
}

// storableSource is the source as the text column can hold it; a file
// that is not UTF-8 (it fails to load anyway) is stored as "".
func storableSource(b []byte) string {
	if !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0 {
		return ""
	}
	return string(b)
}
