package plugin

import (
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// Lua patterns, matched with a budget. gopher-lua's matcher (package pm)
// recurses once per character of the subject — a million Go frames for
// `.*` over a megabyte — never looks at the clock, and string.gmatch and
// string.gsub collect every match before the first is used. A pattern such as
// "(.-)(.-)(.-)x" over a long subject backtracks for hours inside a single
// VM instruction, out of reach of the instruction budget.
//
// This matcher follows Lua 5.1's (lstrlib.c): recursion only per pattern
// item and bounded by maxMatchDepth, one budget step per character tried,
// matches produced one at a time.

const (
	maxCaptures   = 32
	maxMatchDepth = 200
	capUnfinished = -1
	capPosition   = -2
	matchSpecials = "^$*+?.([%-"
	stepBatch     = 256 // steps counted locally before the budget is told
)

type capture struct {
	init, len int
}

type matcher struct {
	s     *state
	L     *lua.LState
	src   string
	pat   string
	level int
	depth int
	steps int64
	caps  [maxCaptures]capture
}

func (s *state) getMatcher(L *lua.LState, src, pat string) *matcher {
	var m *matcher
	if n := len(s.matchers); n > 0 {
		m = s.matchers[n-1]
		s.matchers = s.matchers[:n-1]
	} else {
		m = &matcher{s: s}
	}
	m.L, m.src, m.pat, m.level, m.depth, m.steps = L, src, pat, 0, 0, 0
	return m
}

func (s *state) putMatcher(m *matcher) {
	m.flush()
	m.src, m.pat, m.L = "", "", nil
	s.matchers = append(s.matchers, m)
}

func (m *matcher) tick() {
	m.steps++
	if m.steps >= stepBatch {
		m.flush()
	}
}

func (m *matcher) flush() {
	if m.steps > 0 {
		n := m.steps
		m.steps = 0
		m.s.budget.charge(m.L, n)
	}
}

func (m *matcher) raise(msg string) {
	m.L.RaiseError("%s", msg)
}

// match tries pattern position p at subject position s and returns the end
// of the match, or -1.
func (m *matcher) match(s, p int) int {
	m.depth++
	if m.depth > maxMatchDepth {
		m.raise("pattern too complex")
	}
	r := m.doMatch(s, p)
	m.depth--
	return r
}

func (m *matcher) doMatch(s, p int) int {
	src, pat := m.src, m.pat
	for {
		m.tick()
		if p == len(pat) {
			return s
		}
		switch pat[p] {
		case '(':
			if p+1 < len(pat) && pat[p+1] == ')' {
				return m.startCapture(s, p+2, capPosition)
			}
			return m.startCapture(s, p+1, capUnfinished)
		case ')':
			return m.endCapture(s, p+1)
		case '$':
			if p+1 == len(pat) {
				if s == len(src) {
					return s
				}
				return -1
			}
		case '%':
			if p+1 < len(pat) {
				switch c := pat[p+1]; {
				case c == 'b':
					s = m.matchBalance(s, p+2)
					if s == -1 {
						return -1
					}
					p += 4
					continue
				case c == 'f':
					p += 2
					if p >= len(pat) || pat[p] != '[' {
						m.raise("missing '[' after '%f' in pattern")
					}
					ep := m.classEnd(p)
					var prev, cur byte
					if s > 0 {
						prev = src[s-1]
					}
					if s < len(src) {
						cur = src[s]
					}
					if !m.matchBracket(prev, p, ep-1) && m.matchBracket(cur, p, ep-1) {
						p = ep
						continue
					}
					return -1
				case c >= '0' && c <= '9':
					s = m.matchCapture(s, c)
					if s == -1 {
						return -1
					}
					p += 2
					continue
				}
			}
		}
		ep := m.classEnd(p)
		ok := s < len(src) && m.singleMatch(src[s], p, ep)
		if ep < len(pat) {
			switch pat[ep] {
			case '?':
				if ok {
					if r := m.match(s+1, ep+1); r != -1 {
						return r
					}
				}
				p = ep + 1
				continue
			case '*':
				return m.maxExpand(s, p, ep)
			case '+':
				if !ok {
					return -1
				}
				return m.maxExpand(s+1, p, ep)
			case '-':
				return m.minExpand(s, p, ep)
			}
		}
		if !ok {
			return -1
		}
		s++
		p = ep
	}
}

func (m *matcher) maxExpand(s, p, ep int) int {
	i := 0
	for s+i < len(m.src) && m.singleMatch(m.src[s+i], p, ep) {
		m.tick()
		i++
	}
	for ; i >= 0; i-- {
		if r := m.match(s+i, ep+1); r != -1 {
			return r
		}
	}
	return -1
}

func (m *matcher) minExpand(s, p, ep int) int {
	for {
		if r := m.match(s, ep+1); r != -1 {
			return r
		}
		if s < len(m.src) && m.singleMatch(m.src[s], p, ep) {
			s++
			continue
		}
		return -1
	}
}

func (m *matcher) startCapture(s, p, what int) int {
	if m.level >= maxCaptures {
		m.raise("too many captures")
	}
	m.caps[m.level] = capture{init: s, len: what}
	m.level++
	r := m.match(s, p)
	if r == -1 {
		m.level--
	}
	return r
}

func (m *matcher) endCapture(s, p int) int {
	l := -1
	for i := m.level - 1; i >= 0; i-- {
		if m.caps[i].len == capUnfinished {
			l = i
			break
		}
	}
	if l < 0 {
		m.raise("invalid pattern capture")
	}
	m.caps[l].len = s - m.caps[l].init
	r := m.match(s, p)
	if r == -1 {
		m.caps[l].len = capUnfinished
	}
	return r
}

func (m *matcher) matchBalance(s, p int) int {
	if p+1 >= len(m.pat) {
		m.raise("missing arguments to '%b'")
	}
	if s >= len(m.src) || m.src[s] != m.pat[p] {
		return -1
	}
	open, closing := m.pat[p], m.pat[p+1]
	depth := 1
	for i := s + 1; i < len(m.src); i++ {
		m.tick()
		switch m.src[i] {
		case closing:
			depth--
			if depth == 0 {
				return i + 1
			}
		case open:
			depth++
		}
	}
	return -1
}

func (m *matcher) matchCapture(s int, c byte) int {
	l := int(c - '1')
	if l < 0 || l >= m.level || m.caps[l].len < 0 {
		m.raise("invalid capture index")
	}
	c0 := m.caps[l]
	if len(m.src)-s >= c0.len && m.src[c0.init:c0.init+c0.len] == m.src[s:s+c0.len] {
		m.steps += int64(c0.len)
		return s + c0.len
	}
	return -1
}

// classEnd returns the position after the single-character class at p.
func (m *matcher) classEnd(p int) int {
	pat := m.pat
	c := pat[p]
	p++
	switch c {
	case '%':
		if p >= len(pat) {
			m.raise("malformed pattern (ends with '%')")
		}
		return p + 1
	case '[':
		if p < len(pat) && pat[p] == '^' {
			p++
		}
		for { // the first character is part of the set, even a ']'
			if p >= len(pat) {
				m.raise("malformed pattern (missing ']')")
			}
			c := pat[p]
			p++
			if c == '%' && p < len(pat) {
				p++
			}
			if p >= len(pat) {
				m.raise("malformed pattern (missing ']')")
			}
			if pat[p] == ']' {
				return p + 1
			}
		}
	}
	return p
}

func (m *matcher) singleMatch(c byte, p, ep int) bool {
	switch m.pat[p] {
	case '.':
		return true
	case '%':
		return matchClass(c, m.pat[p+1])
	case '[':
		return m.matchBracket(c, p, ep-1)
	}
	return m.pat[p] == c
}

// matchBracket matches c against the set [ ... ] from p (the '[') to ec (the ']').
func (m *matcher) matchBracket(c byte, p, ec int) bool {
	pat := m.pat
	want := true
	p++
	if pat[p] == '^' {
		want = false
		p++
	}
	for ; p < ec; p++ {
		switch {
		case pat[p] == '%' && p+1 < ec+1:
			p++
			if matchClass(c, pat[p]) {
				return want
			}
		case p+2 < ec && pat[p+1] == '-':
			if pat[p] <= c && c <= pat[p+2] {
				return want
			}
			p += 2
		case pat[p] == c:
			return want
		}
	}
	return !want
}

// matchClass is %a, %d, … in the C locale (ASCII); an upper-case class
// letter is the complement; any other character stands for itself.
func matchClass(c, cl byte) bool {
	var res bool
	switch cl | 0x20 {
	case 'a':
		res = isAlpha(c)
	case 'c':
		res = c < 32 || c == 127
	case 'd':
		res = c >= '0' && c <= '9'
	case 'l':
		res = c >= 'a' && c <= 'z'
	case 'p':
		res = isPunct(c)
	case 's':
		res = c == ' ' || (c >= '\t' && c <= '\r')
	case 'u':
		res = c >= 'A' && c <= 'Z'
	case 'w':
		res = isAlpha(c) || (c >= '0' && c <= '9')
	case 'x':
		res = (c >= '0' && c <= '9') || (c|0x20 >= 'a' && c|0x20 <= 'f')
	case 'z':
		res = c == 0
	default:
		return cl == c
	}
	if cl >= 'A' && cl <= 'Z' {
		return !res
	}
	return res
}

func isAlpha(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

func isPunct(c byte) bool {
	return c > 32 && c < 127 && !isAlpha(c) && !(c >= '0' && c <= '9')
}

// capture i of the match src[s:e], as a Lua value; capture 0 stands for the
// whole match when the pattern has no captures.
func (m *matcher) capture(i, s, e int) lua.LValue {
	if i >= m.level {
		if i == 0 {
			return lua.LString(m.src[s:e])
		}
		m.raise("invalid capture index")
	}
	c := m.caps[i]
	switch c.len {
	case capUnfinished:
		m.raise("unfinished capture")
	case capPosition:
		return lua.LNumber(c.init + 1)
	}
	return lua.LString(m.src[c.init : c.init+c.len])
}

// pushCaptures pushes every capture (or the whole match) and returns how many.
func (m *matcher) pushCaptures(s, e int, wholeIfNone bool) int {
	n := m.level
	if n == 0 && wholeIfNone {
		n = 1
	}
	for i := range n {
		m.L.Push(m.capture(i, s, e))
	}
	return n
}

// startIndex converts Lua's 1-based, possibly negative init to an offset,
// clamped to the subject as Lua 5.1 does.
func startIndex(init, n int) int {
	if init < 0 {
		init = n + init + 1
	}
	init--
	if init < 0 {
		return 0
	}
	if init > n {
		return n
	}
	return init
}

func (s *state) strFind(L *lua.LState) int  { return s.findAux(L, true) }
func (s *state) strMatch(L *lua.LState) int { return s.findAux(L, false) }

func (s *state) findAux(L *lua.LState, find bool) int {
	src := L.CheckString(1)
	pat := L.CheckString(2)
	init := startIndex(L.OptInt(3, 1), len(src))
	if find && (lua.LVAsBool(L.Get(4)) || !strings.ContainsAny(pat, matchSpecials)) {
		s.budget.charge(L, int64(len(src)-init)/16+1)
		if i := strings.Index(src[init:], pat); i >= 0 {
			L.Push(lua.LNumber(init + i + 1))
			L.Push(lua.LNumber(init + i + len(pat)))
			return 2
		}
		L.Push(lua.LNil)
		return 1
	}
	m := s.getMatcher(L, src, pat)
	p := 0
	anchor := len(pat) > 0 && pat[0] == '^'
	if anchor {
		p = 1
	}
	for at := init; ; at++ {
		m.level = 0
		m.tick()
		if e := m.match(at, p); e != -1 {
			var n int
			if find {
				L.Push(lua.LNumber(at + 1))
				L.Push(lua.LNumber(e))
				n = 2 + m.pushCaptures(at, e, false)
			} else {
				n = m.pushCaptures(at, e, true)
			}
			s.putMatcher(m)
			return n
		}
		if anchor || at >= len(src) {
			break
		}
	}
	s.putMatcher(m)
	L.Push(lua.LNil)
	return 1
}

// strGmatch returns an iterator producing one match per call, as Lua 5.1
// does: nothing is collected ahead.
func (s *state) strGmatch(L *lua.LState) int {
	src := L.CheckString(1)
	pat := L.CheckString(2)
	pos := 0
	L.Push(L.NewFunction(func(L *lua.LState) int {
		m := s.getMatcher(L, src, pat)
		for ; pos <= len(src); pos++ {
			m.level = 0
			m.tick()
			if e := m.match(pos, 0); e != -1 {
				start := pos
				pos = e
				if e == start { // an empty match: move on by one
					pos++
				}
				n := m.pushCaptures(start, e, true)
				s.putMatcher(m)
				return n
			}
		}
		s.putMatcher(m)
		return 0
	}))
	return 1
}

// strGsub is string.gsub(s, pattern, repl [, n]); the result is sized as it
// is built and refused once it would pass the memory bound.
func (s *state) strGsub(L *lua.LState) int {
	src := L.CheckString(1)
	pat := L.CheckString(2)
	repl := L.Get(3)
	switch repl.Type() {
	case lua.LTString, lua.LTNumber, lua.LTTable, lua.LTFunction:
	default:
		L.ArgError(3, "string/function/table expected")
	}
	maxN := L.OptInt(4, len(src)+1)
	anchor := len(pat) > 0 && pat[0] == '^'
	p := 0
	if anchor {
		p = 1
	}
	m := s.getMatcher(L, src, pat)
	var out strings.Builder
	add := func(piece string) {
		if int64(out.Len()+len(piece)) > s.budget.remaining() {
			s.budget.alloc(L, int64(out.Len()+len(piece)))
		}
		out.WriteString(piece)
	}
	at, count := 0, 0
	for count < maxN {
		m.level = 0
		m.tick()
		e := m.match(at, p)
		if e != -1 {
			count++
			s.gsubValue(m, repl, at, e, add)
		}
		switch {
		case e != -1 && e > at:
			at = e
		case at < len(src):
			add(src[at : at+1])
			at++
		default:
			at = len(src) + 1
		}
		if at > len(src) || anchor {
			break
		}
	}
	if at < len(src) {
		add(src[at:])
	}
	s.putMatcher(m)
	s.budget.alloc(L, int64(out.Len()))
	L.Push(lua.LString(out.String()))
	L.Push(lua.LNumber(count))
	return 2
}

// gsubValue appends the replacement of the match src[s:e].
func (s *state) gsubValue(m *matcher, repl lua.LValue, st, e int, add func(string)) {
	L := m.L
	var v lua.LValue
	switch r := repl.(type) {
	case lua.LString, lua.LNumber:
		rs, _ := toStr(r)
		for i := 0; i < len(rs); i++ {
			c := rs[i]
			if c != '%' {
				j := strings.IndexByte(rs[i:], '%')
				if j < 0 {
					j = len(rs) - i
				}
				add(rs[i : i+j])
				i += j - 1
				continue
			}
			i++
			switch {
			case i >= len(rs):
				L.RaiseError("%s", "invalid use of '%' in replacement string")
			case rs[i] == '0':
				add(m.src[st:e])
			case rs[i] >= '1' && rs[i] <= '9':
				cv := m.capture(int(rs[i]-'1'), st, e)
				str, _ := toStr(cv)
				add(str)
			default:
				add(rs[i : i+1])
			}
		}
		return
	case *lua.LTable:
		v = L.GetTable(r, m.capture(0, st, e))
	case *lua.LFunction:
		L.Push(r)
		n := m.pushCaptures(st, e, true)
		L.Call(n, 1)
		v = L.Get(-1)
		L.Pop(1)
	}
	if !lua.LVAsBool(v) {
		add(m.src[st:e]) // false or nil: keep the original
		return
	}
	str, ok := toStr(v)
	if !ok {
		L.RaiseError("invalid replacement value (a %s)", v.Type())
	}
	add(str)
}
