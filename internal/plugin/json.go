package plugin

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	lua "github.com/yuin/gopher-lua"
)

// maxJSONDepth bounds nesting in both directions, so neither a deep table
// nor "[[[[…" recurses the Go stack without limit.
const maxJSONDepth = 200

// jsonEncoder turns Lua values into JSON text. One lives in each state and
// keeps its buffers between calls (up to a size), so encoding a small result
// costs the final string and little else.
//
// Rules: nil → null; a table whose keys are exactly 1..n (n ≥ 1) → array; any
// other table → object with sorted keys (string keys, or numbers written as
// strings), the empty table included, which is {}; a table met again inside
// itself → error (cycle); functions → error; NaN and ±Inf → error; strings must
// be UTF-8 (binary goes through base64_encode).
type jsonEncoder struct {
	s       *state
	L       *lua.LState
	buf     []byte
	path    []*lua.LTable
	entries []jsonEntry
	charged int
}

type jsonEntry struct {
	key string
	val lua.LValue
}

func (e *jsonEncoder) encode(L *lua.LState, v lua.LValue) string {
	e.L = L
	e.buf = e.buf[:0]
	e.path = e.path[:0]
	e.entries = e.entries[:0]
	e.charged = 0
	e.value(v)
	e.s.budget.alloc(L, int64(len(e.buf)-e.charged))
	return string(e.buf)
}

// release drops buffers that grew large, so an idle state holds little.
func (e *jsonEncoder) release() {
	if cap(e.buf) > 64<<10 {
		e.buf = nil
	}
	if cap(e.entries) > 1024 {
		e.entries = nil
	}
	clear(e.entries[:cap(e.entries)])
	clear(e.path[:cap(e.path)])
	e.L = nil
}

func (e *jsonEncoder) fail(format string, args ...any) {
	e.L.RaiseError("json_encode: "+format, args...)
}

// grew charges the buffer's growth to the memory budget every 4 KiB.
func (e *jsonEncoder) grew() {
	if len(e.buf)-e.charged >= 4096 {
		e.s.budget.alloc(e.L, int64(len(e.buf)-e.charged))
		e.charged = len(e.buf)
	}
}

func (e *jsonEncoder) value(v lua.LValue) {
	switch x := v.(type) {
	case *lua.LNilType:
		e.buf = append(e.buf, "null"...)
	case lua.LBool:
		e.buf = strconv.AppendBool(e.buf, bool(x))
	case lua.LNumber:
		e.number(float64(x))
	case lua.LString:
		if !utf8.ValidString(string(x)) {
			e.fail("string is not valid UTF-8 (encode binary data with base64_encode)")
		}
		e.buf = appendJSONString(e.buf, string(x))
		e.grew()
	case *lua.LTable:
		e.table(x)
	default:
		e.fail("cannot encode a %s", v.Type())
	}
}

func (e *jsonEncoder) number(f float64) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		e.fail("cannot encode %v", f)
	}
	switch {
	case f == math.Trunc(f) && math.Abs(f) < 1e15:
		e.buf = strconv.AppendInt(e.buf, int64(f), 10)
	case f == math.Trunc(f) && math.Abs(f) < 1e21:
		e.buf = strconv.AppendFloat(e.buf, f, 'f', -1, 64) // digits, no exponent
	default:
		e.buf = strconv.AppendFloat(e.buf, f, 'g', -1, 64)
	}
}

func (e *jsonEncoder) table(t *lua.LTable) {
	if slices.Contains(e.path, t) {
		e.fail("table contains itself (cycle)")
	}
	if len(e.path) >= maxJSONDepth {
		e.fail("nested deeper than %d", maxJSONDepth)
	}
	e.path = append(e.path, t)
	defer func() { e.path = e.path[:len(e.path)-1] }()
	e.s.budget.charge(e.L, 1)

	if n := t.Len(); n > 0 && isSequence(t, n) {
		e.buf = append(e.buf, '[')
		for i := 1; i <= n; i++ {
			if i > 1 {
				e.buf = append(e.buf, ',')
			}
			e.value(t.RawGetInt(i))
		}
		e.buf = append(e.buf, ']')
		e.s.budget.charge(e.L, int64(n))
		return
	}

	// An object. Its entries go on the shared stack above the caller's, are
	// sorted, written, and popped.
	base := len(e.entries)
	for k, v := t.Next(lua.LNil); k != lua.LNil; k, v = t.Next(k) {
		var key string
		switch kk := k.(type) {
		case lua.LString:
			key = string(kk)
			if !utf8.ValidString(key) {
				e.fail("key is not valid UTF-8")
			}
		case lua.LNumber:
			key = kk.String()
		default:
			e.fail("cannot use a %s as an object key", k.Type())
		}
		e.entries = append(e.entries, jsonEntry{key: key, val: v})
	}
	ents := e.entries[base:]
	slices.SortFunc(ents, func(a, b jsonEntry) int { return strings.Compare(a.key, b.key) })
	e.buf = append(e.buf, '{')
	for i := range ents {
		if i > 0 {
			if ents[i].key == ents[i-1].key {
				e.fail("key %q appears twice (as a number and a string)", ents[i].key)
			}
			e.buf = append(e.buf, ',')
		}
		e.buf = appendJSONString(e.buf, ents[i].key)
		e.buf = append(e.buf, ':')
		// e.entries may be reallocated by nested tables: index, don't hold.
		e.value(e.entries[base+i].val)
	}
	e.buf = append(e.buf, '}')
	e.s.budget.charge(e.L, int64(len(ents)))
	clear(e.entries[base:])
	e.entries = e.entries[:base]
}

const hexDigits = "0123456789abcdef"

// isSequence reports whether t holds exactly the keys 1..n: no hole (gopher-
// lua's border ignores holes: {[1] = "a", [3] = "c"} has length 3) and no
// other key (Next after n looks at the rest of the array part, then at the
// hash part).
func isSequence(t *lua.LTable, n int) bool {
	for i := 1; i <= n; i++ {
		if t.RawGetInt(i) == lua.LNil {
			return false
		}
	}
	k, _ := t.Next(lua.LNumber(n))
	return k == lua.LNil
}

// appendJSONString writes s as a JSON string, escaping only what JSON
// requires (quote, backslash, control characters): signatures are often
// computed over the exact text, so nothing else is rewritten.
func appendJSONString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		buf = append(buf, s[start:i]...)
		switch c {
		case '"', '\\':
			buf = append(buf, '\\', c)
		case '\n':
			buf = append(buf, '\\', 'n')
		case '\r':
			buf = append(buf, '\\', 'r')
		case '\t':
			buf = append(buf, '\\', 't')
		default:
			buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}

// jsonDecoder parses JSON text into Lua values (objects and arrays become
// tables, numbers Lua numbers, null nil). With L nil it only validates.
type jsonDecoder struct {
	s       *state
	L       *lua.LState
	in      string
	pos     int
	depth   int
	steps   int64
	pending int64 // bytes of Lua values built, not yet charged
	err     string
}

// Approximate costs of decoded values, charged to the memory budget.
const (
	jsonTableCost = 96
	jsonValueCost = 32
)

func validJSON(s string) bool {
	d := jsonDecoder{in: s}
	d.skipSpace()
	d.value()
	d.skipSpace()
	return d.err == "" && d.pos == len(d.in)
}

func (s *state) jsonDecode(L *lua.LState, in string) lua.LValue {
	v, err := s.tryJSONDecode(L, in)
	if err != "" {
		L.RaiseError("json_decode: %s", err)
	}
	return v
}

// tryJSONDecode is jsonDecode answering what is wrong with in instead of
// raising it (json_table's nil); a tripped limit still raises.
func (s *state) tryJSONDecode(L *lua.LState, in string) (lua.LValue, string) {
	d := jsonDecoder{s: s, L: L, in: in}
	d.skipSpace()
	v := d.value()
	d.skipSpace()
	if d.err == "" && d.pos != len(d.in) {
		d.errorf("unexpected data after the value")
	}
	if d.err != "" {
		return lua.LNil, d.err
	}
	d.flush()
	return v, ""
}

func (d *jsonDecoder) errorf(msg string) {
	if d.err == "" {
		d.err = msg + " at offset " + strconv.Itoa(d.pos)
	}
}

// cost records a decoded value for the budgets; it only charges in batches.
func (d *jsonDecoder) cost(bytes int64) {
	if d.L == nil {
		return
	}
	d.steps++
	d.pending += bytes
	if d.steps >= stepBatch || d.pending >= 64<<10 {
		d.flush()
	}
}

func (d *jsonDecoder) flush() {
	if d.L == nil {
		return
	}
	d.s.budget.charge(d.L, d.steps)
	d.s.budget.alloc(d.L, d.pending)
	d.steps, d.pending = 0, 0
}

func (d *jsonDecoder) skipSpace() {
	for d.pos < len(d.in) {
		switch d.in[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *jsonDecoder) value() lua.LValue {
	if d.err != "" {
		return lua.LNil
	}
	if d.pos >= len(d.in) {
		d.errorf("unexpected end of JSON")
		return lua.LNil
	}
	switch c := d.in[d.pos]; {
	case c == '{':
		return d.object()
	case c == '[':
		return d.array()
	case c == '"':
		str, ok := d.str()
		if !ok || d.L == nil {
			return lua.LNil
		}
		d.cost(jsonValueCost)
		return lua.LString(str)
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	case strings.HasPrefix(d.in[d.pos:], "true"):
		d.pos += 4
		return lua.LTrue
	case strings.HasPrefix(d.in[d.pos:], "false"):
		d.pos += 5
		return lua.LFalse
	case strings.HasPrefix(d.in[d.pos:], "null"):
		d.pos += 4
		return lua.LNil
	}
	d.errorf("invalid character " + strconv.QuoteRune(rune(d.in[d.pos])))
	return lua.LNil
}

func (d *jsonDecoder) enter() bool {
	d.depth++
	if d.depth > maxJSONDepth {
		d.errorf("nested deeper than " + strconv.Itoa(maxJSONDepth))
		return false
	}
	return true
}

func (d *jsonDecoder) object() lua.LValue {
	if !d.enter() {
		return lua.LNil
	}
	defer func() { d.depth-- }()
	d.pos++ // {
	var t *lua.LTable
	if d.L != nil {
		t = d.L.CreateTable(0, 0) // parts made on first use: NewTable's are 32 slots each
		d.cost(jsonTableCost)
	}
	d.skipSpace()
	if d.pos < len(d.in) && d.in[d.pos] == '}' {
		d.pos++
		return tableOrNil(t)
	}
	for d.err == "" {
		d.skipSpace()
		if d.pos >= len(d.in) || d.in[d.pos] != '"' {
			d.errorf("expected a string key")
			break
		}
		key, ok := d.str()
		if !ok {
			break
		}
		d.skipSpace()
		if d.pos >= len(d.in) || d.in[d.pos] != ':' {
			d.errorf("expected ':'")
			break
		}
		d.pos++
		d.skipSpace()
		v := d.value()
		if t != nil {
			t.RawSetString(key, v) // null leaves the key out
		}
		d.skipSpace()
		if d.pos < len(d.in) && d.in[d.pos] == ',' {
			d.pos++
			continue
		}
		if d.pos < len(d.in) && d.in[d.pos] == '}' {
			d.pos++
			break
		}
		d.errorf("expected ',' or '}'")
	}
	return tableOrNil(t)
}

func (d *jsonDecoder) array() lua.LValue {
	if !d.enter() {
		return lua.LNil
	}
	defer func() { d.depth-- }()
	d.pos++ // [
	var t *lua.LTable
	if d.L != nil {
		t = d.L.CreateTable(0, 0) // parts made on first use: NewTable's are 32 slots each
		d.cost(jsonTableCost)
	}
	d.skipSpace()
	if d.pos < len(d.in) && d.in[d.pos] == ']' {
		d.pos++
		return tableOrNil(t)
	}
	for i := 1; d.err == ""; i++ {
		d.skipSpace()
		v := d.value()
		if t != nil {
			if i >= maxArrayIndex {
				d.errorf("array longer than " + strconv.Itoa(maxArrayIndex-1) + " elements")
				break
			}
			if v != lua.LNil {
				t.RawSetInt(i, v) // null leaves a hole
			}
		}
		d.skipSpace()
		if d.pos < len(d.in) && d.in[d.pos] == ',' {
			d.pos++
			continue
		}
		if d.pos < len(d.in) && d.in[d.pos] == ']' {
			d.pos++
			break
		}
		d.errorf("expected ',' or ']'")
	}
	return tableOrNil(t)
}

func tableOrNil(t *lua.LTable) lua.LValue {
	if t == nil {
		return lua.LNil
	}
	return t
}

func (d *jsonDecoder) number() lua.LValue {
	start := d.pos
	in := d.in
	if d.pos < len(in) && in[d.pos] == '-' {
		d.pos++
	}
	switch {
	case d.pos < len(in) && in[d.pos] == '0':
		d.pos++
	case d.pos < len(in) && in[d.pos] >= '1' && in[d.pos] <= '9':
		for d.pos < len(in) && in[d.pos] >= '0' && in[d.pos] <= '9' {
			d.pos++
		}
	default:
		d.errorf("invalid number")
		return lua.LNil
	}
	if d.pos < len(in) && in[d.pos] == '.' {
		d.pos++
		if d.pos >= len(in) || in[d.pos] < '0' || in[d.pos] > '9' {
			d.errorf("invalid number")
			return lua.LNil
		}
		for d.pos < len(in) && in[d.pos] >= '0' && in[d.pos] <= '9' {
			d.pos++
		}
	}
	if d.pos < len(in) && (in[d.pos] == 'e' || in[d.pos] == 'E') {
		d.pos++
		if d.pos < len(in) && (in[d.pos] == '+' || in[d.pos] == '-') {
			d.pos++
		}
		if d.pos >= len(in) || in[d.pos] < '0' || in[d.pos] > '9' {
			d.errorf("invalid number")
			return lua.LNil
		}
		for d.pos < len(in) && in[d.pos] >= '0' && in[d.pos] <= '9' {
			d.pos++
		}
	}
	if d.L == nil {
		return lua.LNil
	}
	f, err := strconv.ParseFloat(in[start:d.pos], 64)
	if err != nil { // out of range
		d.pos = start
		d.errorf("number out of range")
		return lua.LNil
	}
	d.cost(jsonValueCost)
	return lua.LNumber(f)
}

// str reads a JSON string at d.pos (the opening quote). A string without
// escapes is returned as a slice of the input, without copying.
func (d *jsonDecoder) str() (string, bool) {
	in := d.in
	d.pos++
	start := d.pos
	for d.pos < len(in) {
		c := in[d.pos]
		if c == '"' {
			s := in[start:d.pos]
			d.pos++
			return s, true
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			d.errorf("control character in string")
			return "", false
		}
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(in[d.pos:])
			if r == utf8.RuneError && n == 1 {
				break // not UTF-8: the copying loop replaces it
			}
			d.pos += n
			continue
		}
		d.pos++
	}
	var b []byte
	if d.L != nil {
		b = append(b, in[start:d.pos]...)
	}
	for d.pos < len(in) {
		c := in[d.pos]
		switch {
		case c == '"':
			d.pos++
			if d.L != nil {
				d.cost(int64(len(b)))
			}
			return string(b), true
		case c < 0x20:
			d.errorf("control character in string")
			return "", false
		case c >= utf8.RuneSelf:
			// Bytes that are not UTF-8 become U+FFFD, as encoding/json
			// decodes them, so that every string json_decode answers can
			// go back out through json_encode.
			r, n := utf8.DecodeRuneInString(in[d.pos:])
			if r == utf8.RuneError && n == 1 {
				b = utf8.AppendRune(b, utf8.RuneError)
			} else {
				b = append(b, in[d.pos:d.pos+n]...)
			}
			d.pos += n
			continue
		case c != '\\':
			b = append(b, c)
			d.pos++
			continue
		}
		d.pos++
		if d.pos >= len(in) {
			break
		}
		e := in[d.pos]
		d.pos++
		switch e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, ok := d.hex4()
			if !ok {
				return "", false
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if strings.HasPrefix(in[d.pos:], `\u`) {
					save := d.pos
					d.pos += 2
					if r2, ok = d.hex4(); !ok {
						return "", false
					}
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						r = dec
					} else {
						d.pos = save
						r = utf8.RuneError
					}
				} else {
					r = utf8.RuneError
				}
			}
			b = utf8.AppendRune(b, r)
		default:
			d.pos--
			d.errorf("invalid escape")
			return "", false
		}
	}
	d.errorf("unterminated string")
	return "", false
}

func (d *jsonDecoder) hex4() (rune, bool) {
	if d.pos+4 > len(d.in) {
		d.errorf("invalid \\u escape")
		return 0, false
	}
	n, err := strconv.ParseUint(d.in[d.pos:d.pos+4], 16, 32)
	if err != nil {
		d.errorf("invalid \\u escape")
		return 0, false
	}
	d.pos += 4
	return rune(n), true
}
