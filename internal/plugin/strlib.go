package plugin

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// Every function here that returns a new string asks the budget for its size
// before building it (budget.alloc), so a string beyond the memory bound is
// refused, never allocated.

// toStr converts a string or number the way the concatenation operator does.
func toStr(v lua.LValue) (string, bool) {
	switch x := v.(type) {
	case lua.LString:
		return string(x), true
	case lua.LNumber:
		return x.String(), true
	}
	return "", false
}

// luaConcat is what `a .. b .. c` compiles to (see rewriteChunk). Strings and
// numbers are joined after the total size is checked; any other operand goes
// through its __concat metamethod, pair by pair from the right, like the VM.
func (s *state) luaConcat(L *lua.LState) int {
	n := L.GetTop()
	if n == 0 {
		L.Push(lua.LString(""))
		return 1
	}
	plain, total := true, int64(0)
	for i := 1; i <= n; i++ {
		switch x := L.Get(i).(type) {
		case lua.LString:
			total += int64(len(x))
		case lua.LNumber:
			total += 24
		default:
			plain = false
		}
	}
	if plain {
		if n == 2 { // the common case, without a builder
			a, _ := toStr(L.Get(1))
			b, _ := toStr(L.Get(2))
			s.budget.alloc(L, int64(len(a)+len(b)))
			L.Push(lua.LString(a + b))
			return 1
		}
		s.budget.alloc(L, total)
		var sb strings.Builder
		sb.Grow(int(total))
		for i := 1; i <= n; i++ {
			str, _ := toStr(L.Get(i))
			sb.WriteString(str)
		}
		L.Push(lua.LString(sb.String()))
		return 1
	}
	rhs := L.Get(n)
	for i := n - 1; i >= 1; i-- {
		lhs := L.Get(i)
		ls, lok := toStr(lhs)
		rs, rok := toStr(rhs)
		if lok && rok {
			s.budget.alloc(L, int64(len(ls)+len(rs)))
			rhs = lua.LString(ls + rs)
			continue
		}
		mm := L.GetMetaField(lhs, "__concat")
		if mm == lua.LNil {
			mm = L.GetMetaField(rhs, "__concat")
		}
		if mm == lua.LNil {
			bad := lhs
			if lok {
				bad = rhs
			}
			L.RaiseError("attempt to concatenate a %s value", bad.Type())
		}
		L.Push(mm)
		L.Push(lhs)
		L.Push(rhs)
		L.Call(2, 1)
		rhs = L.Get(-1)
		L.Pop(1)
	}
	L.Push(rhs)
	return 1
}

func (s *state) strRep(L *lua.LState) int {
	str := L.CheckString(1)
	n := L.CheckNumber(2)
	if !(n >= 1) || str == "" { // NaN included
		L.Push(lua.LString(""))
		return 1
	}
	if float64(n) > float64(s.budget.remaining())/float64(len(str)) {
		s.budget.alloc(L, math.MaxInt64) // trips the bound with its usual message
	}
	count := int(n)
	s.budget.alloc(L, int64(count)*int64(len(str)))
	L.Push(lua.LString(strings.Repeat(str, count)))
	return 1
}

func (s *state) strChar(L *lua.LState) int {
	n := L.GetTop()
	s.budget.alloc(L, int64(n))
	b := make([]byte, n)
	for i := 1; i <= n; i++ {
		c := L.CheckInt(i)
		if c < 0 || c > 255 {
			L.ArgError(i, "invalid value")
		}
		b[i-1] = byte(c)
	}
	L.Push(lua.LString(b))
	return 1
}

// strLower and strUpper map ASCII letters only, as Lua 5.1 does in the C
// locale; the result has the input's size.
func (s *state) strLower(L *lua.LState) int {
	str := L.CheckString(1)
	s.budget.alloc(L, int64(len(str)))
	L.Push(lua.LString(mapASCII(str, false)))
	return 1
}

func (s *state) strUpper(L *lua.LState) int {
	str := L.CheckString(1)
	s.budget.alloc(L, int64(len(str)))
	L.Push(lua.LString(mapASCII(str, true)))
	return 1
}

func mapASCII(str string, upper bool) string {
	lo, hi := byte('A'), byte('Z')
	if upper {
		lo, hi = 'a', 'z'
	}
	i := 0
	for i < len(str) && (str[i] < lo || str[i] > hi) {
		i++
	}
	if i == len(str) {
		return str // nothing to change: no copy
	}
	b := []byte(str)
	for ; i < len(b); i++ {
		if b[i] >= lo && b[i] <= hi {
			b[i] ^= 0x20 // ASCII case bit
		}
	}
	return string(b)
}

func (s *state) strReverse(L *lua.LState) int {
	str := L.CheckString(1)
	s.budget.alloc(L, int64(len(str)))
	b := make([]byte, len(str))
	for i := range len(str) {
		b[len(str)-1-i] = str[i]
	}
	L.Push(lua.LString(b))
	return 1
}

// tableConcat is table.concat(t [, sep [, i [, j]]]), sized before built.
func (s *state) tableConcat(L *lua.LState) int {
	t := L.CheckTable(1)
	sep := L.OptString(2, "")
	i := L.OptInt(3, 1)
	j := L.OptInt(4, t.Len())
	if i > j {
		L.Push(lua.LString(""))
		return 1
	}
	var total int64
	for k := i; k <= j; k++ {
		str, ok := toStr(t.RawGetInt(k))
		if !ok {
			L.RaiseError("invalid value (at index %d) in table for 'concat'", k)
		}
		total += int64(len(str))
		if k < j {
			total += int64(len(sep))
		}
		if total > s.budget.remaining() {
			s.budget.alloc(L, total)
		}
	}
	s.budget.charge(L, int64(j-i+1))
	s.budget.alloc(L, total)
	var sb strings.Builder
	sb.Grow(int(total))
	for k := i; k <= j; k++ {
		str, _ := toStr(t.RawGetInt(k))
		sb.WriteString(str)
		if k < j {
			sb.WriteString(sep)
		}
	}
	L.Push(lua.LString(sb.String()))
	return 1
}

// strFormat is string.format with Lua 5.1's rules: flags "-+ #0", a width and
// a precision of at most two digits each, conversions c d i o u x X e E f g G
// q s. (gopher-lua hands the format to Go's fmt, which accepts widths up to a
// million and prints Go's idea of %q and %g.) Each piece is sized before it
// is appended.
func (s *state) strFormat(L *lua.LState) int {
	f := L.CheckString(1)
	arg := 1
	var out []byte
	grow := func(n int) {
		s.budget.alloc(L, int64(n))
		if cap(out)-len(out) < n {
			nb := make([]byte, len(out), 2*cap(out)+n)
			copy(nb, out)
			out = nb
		}
	}
	for i := 0; i < len(f); {
		c := f[i]
		if c != '%' {
			j := strings.IndexByte(f[i:], '%')
			if j < 0 {
				j = len(f) - i
			}
			grow(j)
			out = append(out, f[i:i+j]...)
			i += j
			continue
		}
		i++
		if i < len(f) && f[i] == '%' {
			grow(1)
			out = append(out, '%')
			i++
			continue
		}
		// %[flags][width][.precision]conv
		start := i
		for i < len(f) && strings.IndexByte("-+ #0", f[i]) >= 0 {
			i++
		}
		if i-start > 5 {
			L.RaiseError("invalid format (repeated flags)")
		}
		flags := f[start:i]
		width, prec := -1, -1
		if n, k := digits(f, i); k > 0 {
			if k > 2 {
				L.RaiseError("invalid format (width or precision too long)")
			}
			width, i = n, i+k
		}
		if i < len(f) && f[i] == '.' {
			i++
			n, k := digits(f, i)
			if k > 2 {
				L.RaiseError("invalid format (width or precision too long)")
			}
			prec, i = n, i+k
		}
		if i >= len(f) {
			L.RaiseError("%s", "invalid option '%' to 'format'")
		}
		conv := f[i]
		i++
		arg++
		if arg > L.GetTop() {
			L.ArgError(arg, "no value")
		}
		var piece string
		switch conv {
		case 'd', 'i', 'u', 'c', 'o', 'x', 'X':
			v := int64(L.CheckNumber(arg))
			if conv == 'c' {
				piece = pad(string([]byte{byte(v)}), width, strings.IndexByte(flags, '-') >= 0)
				break
			}
			verb := conv
			if verb == 'i' || verb == 'u' {
				verb = 'd'
			}
			piece = goFormat(flags, width, prec, verb, v)
		case 'e', 'E', 'f', 'g', 'G':
			v := float64(L.CheckNumber(arg))
			if prec < 0 {
				prec = 6 // C's default; Go's %g would print the shortest form
			}
			piece = goFormat(flags, width, prec, conv, v)
		case 's':
			str := L.ToStringMeta(L.Get(arg)).String()
			if prec >= 0 && prec < len(str) {
				str = str[:prec]
			}
			piece = pad(str, width, strings.IndexByte(flags, '-') >= 0)
		case 'q':
			str := L.CheckString(arg)
			grow(quotedLen(str))
			out = appendQuoted(out, str)
			continue
		default:
			L.RaiseError("invalid option '%%%c' to 'format'", conv)
		}
		grow(len(piece))
		out = append(out, piece...)
	}
	L.Push(lua.LString(out))
	return 1
}

func digits(f string, i int) (n, k int) {
	for i+k < len(f) && f[i+k] >= '0' && f[i+k] <= '9' {
		if k < 3 {
			n = n*10 + int(f[i+k]-'0')
		}
		k++
	}
	return n, k
}

// goFormat prints one number with Go's fmt, whose integer and float verbs
// agree with C's for these flags once the precision is explicit. Widths and
// precisions are below 100, so the result is a few hundred bytes at most
// (a %f of 1e308 included).
func goFormat(flags string, width, prec int, verb byte, v any) string {
	spec := make([]byte, 0, 12)
	spec = append(spec, '%')
	spec = append(spec, flags...)
	if width >= 0 {
		spec = strconv.AppendInt(spec, int64(width), 10)
	}
	if prec >= 0 {
		spec = append(spec, '.')
		spec = strconv.AppendInt(spec, int64(prec), 10)
	}
	spec = append(spec, verb)
	return fmt.Sprintf(string(spec), v)
}

func pad(str string, width int, left bool) string {
	if width <= len(str) {
		return str
	}
	fill := strings.Repeat(" ", width-len(str))
	if left {
		return str + fill
	}
	return fill + str
}

func quotedLen(str string) int {
	n := 2
	for i := 0; i < len(str); i++ {
		switch str[i] {
		case '"', '\\', '\n', '\r':
			n += 2
		case 0:
			n += 4
		default:
			n++
		}
	}
	return n
}

// appendQuoted is Lua 5.1's %q: quotes, backslash-escaped `"`, `\` and
// newline, \r and \0 spelled out, every other byte as is.
func appendQuoted(out []byte, str string) []byte {
	out = append(out, '"')
	for i := 0; i < len(str); i++ {
		switch c := str[i]; c {
		case '"', '\\', '\n':
			out = append(out, '\\', c)
		case '\r':
			out = append(out, '\\', 'r')
		case 0:
			out = append(out, '\\', '0', '0', '0')
		default:
			out = append(out, c)
		}
	}
	return append(out, '"')
}
