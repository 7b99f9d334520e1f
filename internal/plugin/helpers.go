package plugin

import (
	"net/url"
	"slices"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/rustbill/paymentd/internal/text"
)

// The helpers below are the ones every shipped plugin wrote for itself
// (issue 37): read a value of a decoded JSON document as text, cut a body
// for a message, decode JSON without raising, encode a form. Unlike the
// other host functions they take any value, or a table: they exist to be
// called on whatever a decoded answer holds.

// snippetBytes is how much of a body snippet keeps: enough to recognise an
// answer in a log line or a plugin's last error.
const snippetBytes = 200

// luaStr is str's rule: a string as it is, a number as tostring writes it
// (whole numbers as digits: 12, not 12.0 or 1.2e+01), a boolean as "true" or
// "false", anything else (nil, JSON null, a table, a function) "".
func luaStr(v lua.LValue) string {
	switch x := v.(type) {
	case lua.LString:
		return string(x)
	case lua.LNumber:
		return x.String()
	case lua.LBool:
		if x {
			return "true"
		}
		return "false"
	}
	return ""
}

func hostStr(s *state, L *lua.LState, _ args) int {
	if v, ok := L.Get(1).(lua.LString); ok {
		L.Push(v) // already a Lua string: no copy, nothing to charge
		return 1
	}
	return s.pushString(L, luaStr(L.Get(1)))
}

// hostSnippet is clip(str(value), 200): what the plugins put of an answer's
// body into an error message.
func hostSnippet(s *state, L *lua.LState, _ args) int {
	return s.pushString(L, text.Clip(luaStr(L.Get(1)), snippetBytes))
}

// hostJSONTable decodes a JSON object or array into a table and answers nil
// for anything else: a value that is not a string, text that is not JSON,
// JSON that is a string, number, boolean or null. A tripped budget still
// raises (a limit is not bad input, and pcall could not catch it anyway).
func hostJSONTable(s *state, L *lua.LState, _ args) int {
	in, ok := L.Get(1).(lua.LString)
	if !ok {
		L.Push(lua.LNil)
		return 1
	}
	v, bad := s.tryJSONDecode(L, string(in))
	if _, isTable := v.(*lua.LTable); bad != "" || !isTable {
		L.Push(lua.LNil)
		return 1
	}
	L.Push(v)
	return 1
}

// hostFormEncode writes an application/x-www-form-urlencoded body (names
// and values encoded as urlencode does, space as "+"), leaving out every
// pair whose value is nil or "". A table of names to values is written in
// ascending byte order of the names, so the same table always makes the
// same body; an array of {name, value} pairs is written in its order (for
// APIs that read order or a repeated name). Names and values must be
// strings: a number would be formatted by a rule the script's signature
// over the same values might not share.
func hostFormEncode(s *state, L *lua.LState, _ args) int {
	t, ok := L.Get(1).(*lua.LTable)
	if !ok {
		L.RaiseError("form_encode: argument 1 (params) must be a table, got %s", L.Get(1).Type())
	}
	type pair struct{ k, v string }
	var pairs []pair
	add := func(k, v lua.LValue, what string) {
		name, ok := k.(lua.LString)
		if !ok {
			L.RaiseError("form_encode: %s has a name that is not a string (%s)", what, k.Type())
		}
		switch val := v.(type) {
		case *lua.LNilType:
		case lua.LString:
			if val != "" {
				pairs = append(pairs, pair{string(name), string(val)})
			}
		default:
			L.RaiseError("form_encode: the value of %q must be a string, got %s", text.Clip(string(name), 64), v.Type())
		}
	}
	entries := 0
	t.ForEach(func(lua.LValue, lua.LValue) { entries++ })
	s.budget.charge(L, int64(entries))
	if t.RawGetInt(1) != lua.LNil {
		n := 1
		for t.RawGetInt(n+1) != lua.LNil {
			n++
		}
		if n != entries {
			L.RaiseError("form_encode: argument 1 (params) must be a table of names to values or an array of {name, value} pairs, not both")
		}
		for i := 1; i <= n; i++ {
			p, ok := t.RawGetInt(i).(*lua.LTable)
			if !ok {
				L.RaiseError("form_encode: pair %d must be a table {name, value}, got %s", i, t.RawGetInt(i).Type())
			}
			add(p.RawGetInt(1), p.RawGetInt(2), "pair "+strconv.Itoa(i))
		}
	} else {
		t.ForEach(func(k, v lua.LValue) { add(k, v, "params") })
		slices.SortFunc(pairs, func(a, b pair) int { return strings.Compare(a.k, b.k) })
	}
	size := 0
	for _, p := range pairs {
		size += 3*(len(p.k)+len(p.v)) + 2 // the worst case, before building
	}
	s.budget.alloc(L, int64(size))
	var sb strings.Builder
	for i, p := range pairs {
		if i > 0 {
			sb.WriteByte('&')
		}
		sb.WriteString(url.QueryEscape(p.k))
		sb.WriteByte('=')
		sb.WriteString(url.QueryEscape(p.v))
	}
	L.Push(lua.LString(sb.String()))
	return 1
}

// hostSignString is the text a form-signing gateway signs (epay's MD5,
// Alipay's RSA2, and the next of the family): the names of params (a
// table of names to string values) in ascending byte order, each as
// name=value joined with "&", raw (no encoding), leaving out every pair
// whose value is nil or "" and the names exclude lists (comma-separated,
// e.g. "sign,sign_type"). What epay.lua and alipay.lua built in Lua, with
// table.sort and table.concat, done once in Go.
func hostSignString(s *state, L *lua.LState, a args) int {
	t, ok := L.Get(1).(*lua.LTable)
	if !ok {
		L.RaiseError("sign_string: argument 1 (params) must be a table, got %s", L.Get(1).Type())
	}
	exclude, _ := a.opt(2)
	skip := func(name string) bool {
		for rest := exclude; rest != ""; {
			var e string
			e, rest, _ = strings.Cut(rest, ",")
			if strings.TrimSpace(e) == name {
				return true
			}
		}
		return false
	}
	type pair struct{ k, v string }
	var pairs []pair
	size, entries := 0, 0
	t.ForEach(func(k, v lua.LValue) {
		entries++
		name, ok := k.(lua.LString)
		if !ok {
			L.RaiseError("sign_string: params has a name that is not a string (%s)", k.Type())
		}
		switch val := v.(type) {
		case lua.LString:
			if val != "" && !skip(string(name)) {
				pairs = append(pairs, pair{string(name), string(val)})
				size += len(name) + len(val) + 2
			}
		default:
			L.RaiseError("sign_string: the value of %q must be a string, got %s", text.Clip(string(name), 64), v.Type())
		}
	})
	s.budget.charge(L, int64(entries))
	slices.SortFunc(pairs, func(a, b pair) int { return strings.Compare(a.k, b.k) })
	s.budget.alloc(L, int64(size))
	var sb strings.Builder
	sb.Grow(size)
	for i, p := range pairs {
		if i > 0 {
			sb.WriteByte('&')
		}
		sb.WriteString(p.k)
		sb.WriteByte('=')
		sb.WriteString(p.v)
	}
	L.Push(lua.LString(sb.String()))
	return 1
}
