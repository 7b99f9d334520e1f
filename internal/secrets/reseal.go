package secrets

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Mode is what a pass over stored configs does with each secret.
type Mode int

const (
	// Count counts, and checks that sealed values open.
	Count Mode = iota
	// SealClear seals the values stored in clear.
	SealClear
	// Rotate seals the clear ones and re-seals those under a key other
	// than the current one.
	Rotate
	// SealClearOnly is SealClear without opening the sealed values: they
	// are counted by key id, not checked (for copies nothing else reads).
	SealClearOnly
)

// Report is what a pass found and did.
type Report struct {
	// Owners is the number of configs holding at least one secret.
	Owners int
	// Sealed counts clear values encrypted, Resealed values re-encrypted
	// under the current key.
	Sealed, Resealed int
	// ByKey counts the stored secrets by the id of their key after the
	// pass; "" counts those in clear.
	ByKey map[string]int
	// Unreadable names each sealed value that does not decrypt ("product
	// <id> (<name>): provider_config.token: key "k1": …"); it is left as it
	// is.
	Unreadable []string
	// Opened and NotOpened count the sealed values the pass tried to open,
	// by key id: opened, and refused by a key the keyring holds
	// (ErrNotAuthentic) or lacks (ErrUnknownKey, in Missing).
	Opened, NotOpened, Missing map[string]int
}

// NewReport is an empty report.
func NewReport() Report {
	return Report{ByKey: map[string]int{}, Opened: map[string]int{}, NotOpened: map[string]int{}, Missing: map[string]int{}}
}

// WrongKeys are the ids of keys the keyring holds that opened none of the
// values stored under their id while some were tried: the key configured
// under that id is not the one they were sealed with. (A value altered or
// moved fails too, but beside values of its key that open.) Sorted.
func (r Report) WrongKeys() []string {
	var out []string
	for id, n := range r.NotOpened {
		if n > 0 && r.Opened[id] == 0 {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Total is the number of stored secrets, clear or sealed.
func (r Report) Total() int {
	n := 0
	for _, c := range r.ByKey {
		n += c
	}
	return n
}

// Clear is the number of secrets stored in clear.
func (r Report) Clear() int { return r.ByKey[""] }

// Changed is the number of values the pass wrote.
func (r Report) Changed() int { return r.Sealed + r.Resealed }

// Add adds o's counts to r.
func (r *Report) Add(o Report) {
	r.Owners += o.Owners
	r.Sealed += o.Sealed
	r.Resealed += o.Resealed
	if r.ByKey == nil {
		r.ByKey = map[string]int{}
	}
	for id, n := range o.ByKey {
		r.ByKey[id] += n
	}
	for _, m := range []struct {
		to   *map[string]int
		from map[string]int
	}{{&r.Opened, o.Opened}, {&r.NotOpened, o.NotOpened}, {&r.Missing, o.Missing}} {
		if *m.to == nil {
			*m.to = map[string]int{}
		}
		for id, n := range m.from {
			(*m.to)[id] += n
		}
	}
	r.Unreadable = append(r.Unreadable, o.Unreadable...)
}

// Reseal adds the secrets of cfg (o's config; name describes o in
// rep.Unreadable) to rep and, in modes SealClear(Only) and Rotate, rewrites cfg
// in place: clear secrets sealed, and (Rotate) sealed ones under another
// key sealed again under the current one. changed reports whether cfg was
// written (never for Count, nor without a keyring). The secrets are the
// sealed values wherever they are and the non-empty strings at
// secretPaths.
func (k *Keyring) Reseal(o Owner, name string, secretPaths [][]string, cfg map[string]any, mode Mode, rep *Report) (changed bool, err error) {
	found := 0
	VisitStrings(cfg, func(path []string, v string) (string, bool) {
		if err != nil {
			return "", false
		}
		aad := o.AAD(path)
		var plain string
		wasClear := false
		switch {
		case IsSealed(v):
			found++
			id, ok := KeyID(v)
			if !ok {
				id = "malformed"
			}
			if k == nil || mode == SealClearOnly {
				rep.ByKey[id]++
				return "", false
			}
			p, oerr := k.Open(v, aad)
			switch {
			case oerr == nil:
				count(&rep.Opened, id)
			case errors.Is(oerr, ErrUnknownKey):
				count(&rep.Missing, id)
			case errors.Is(oerr, ErrNotAuthentic):
				count(&rep.NotOpened, id)
			}
			if oerr != nil {
				rep.Unreadable = append(rep.Unreadable, fmt.Sprintf("%s: %s: %v", name, o.Path(path), oerr))
			}
			if oerr != nil || mode != Rotate || id == k.Current() {
				rep.ByKey[id]++
				return "", false
			}
			plain = p
		case v != "" && isSecretPath(secretPaths, path):
			found++
			if k == nil || mode == Count {
				rep.ByKey[""]++
				return "", false
			}
			plain, wasClear = v, true
		default:
			return "", false
		}
		sealed, serr := k.Seal(plain, aad)
		if serr != nil {
			err = fmt.Errorf("%s: %s: %w", o, o.Path(path), serr)
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
	if err != nil {
		return false, err
	}
	if found > 0 {
		rep.Owners++
	}
	return changed, nil
}

// KeysOf is each secret of cfg by path ("config.key") and the id of the key
// it is under ("clear" for none): what an audit row of a pass says. Never
// a value.
func KeysOf(o Owner, secretPaths [][]string, cfg map[string]any) map[string]string {
	out := map[string]string{}
	VisitStrings(cfg, func(path []string, v string) (string, bool) {
		switch {
		case IsSealed(v):
			id, _ := KeyID(v)
			out[o.Path(path)] = id
		case v != "" && isSecretPath(secretPaths, path):
			out[o.Path(path)] = "clear"
		}
		return "", false
	})
	return out
}

// count adds one to (*m)[id], making the map of a Report built without
// NewReport.
func count(m *map[string]int, id string) {
	if *m == nil {
		*m = map[string]int{}
	}
	(*m)[id]++
}

// WrongKeyError refuses a start whose keyring holds a key that opens none
// of the values stored under its id (WrongKeys): with the right id and the
// wrong bytes, the service would start and answer ready while every
// gateway interface and product holding such a value fails. Nil when there
// is none.
func (r Report) WrongKeyError() error {
	wrong := r.WrongKeys()
	if len(wrong) == 0 {
		return nil
	}
	parts := make([]string, len(wrong))
	for i, id := range wrong {
		parts[i] = fmt.Sprintf("[secrets].keys.%s (PAYMENTD_SECRETS__KEYS__%s) decrypts none of the %d stored secrets sealed under key id %q",
			id, strings.ToUpper(id), r.NotOpened[id], id)
	}
	return fmt.Errorf("%w: %s: it is not the key they were encrypted with; configure the right key under that id", ErrWrongKey, strings.Join(parts, "; "))
}

// ErrWrongKey: a configured key opens none of the values sealed under its
// id.
var ErrWrongKey = errors.New("wrong [secrets] key")
