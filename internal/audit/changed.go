package audit

import "bytes"

// Changed reduces two JSON objects, an entity before and after a change,
// to what changed: the members of before whose value after does not hold
// (changed or gone), and the members of after that before does not hold
// (changed or new), each in its object's order. Values are compared as
// their JSON text, which is exact for what one encoder wrote (the
// snapshots are encoding/json's). ok is false, and nothing is reduced,
// when either is not a JSON object.
func Changed(before, after []byte) (b, a []byte, ok bool) {
	bm, ok := members(before)
	if !ok {
		return nil, nil, false
	}
	am, ok := members(after)
	if !ok {
		return nil, nil, false
	}
	return keepUnmatched(bm, am, len(before)), keepUnmatched(am, bm, len(after)), true
}

// member is one name/value pair of a JSON object, as raw text (the name
// with its quotes).
type member struct{ name, value []byte }

// keepUnmatched writes the object of the members of ms that others does
// not hold with the same value.
func keepUnmatched(ms, others []member, size int) []byte {
	out := make([]byte, 0, size)
	out = append(out, '{')
	for _, m := range ms {
		if holds(others, m) {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, m.name...)
		out = append(out, ':')
		out = append(out, m.value...)
	}
	return append(out, '}')
}

func holds(ms []member, m member) bool {
	for _, o := range ms {
		if bytes.Equal(o.name, m.name) {
			return bytes.Equal(o.value, m.value)
		}
	}
	return false
}

// members splits a JSON object into its members; ok is false when s is
// not one object (with nothing after it). It checks the structure, not
// every token: the input is what encoding/json wrote.
func members(s []byte) (ms []member, ok bool) {
	i := skipSpace(s, 0)
	if i >= len(s) || s[i] != '{' {
		return nil, false
	}
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == '}' {
		return ms, skipSpace(s, i+1) == len(s)
	}
	for {
		end, ok := stringEnd(s, i)
		if !ok {
			return nil, false
		}
		name := s[i:end]
		i = skipSpace(s, end)
		if i >= len(s) || s[i] != ':' {
			return nil, false
		}
		i = skipSpace(s, i+1)
		end, ok = valueEnd(s, i)
		if !ok {
			return nil, false
		}
		ms = append(ms, member{name: name, value: s[i:end]})
		i = skipSpace(s, end)
		if i >= len(s) {
			return nil, false
		}
		switch s[i] {
		case ',':
			i = skipSpace(s, i+1)
		case '}':
			return ms, skipSpace(s, i+1) == len(s)
		default:
			return nil, false
		}
	}
}

func skipSpace(s []byte, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// stringEnd is the index just past the string that starts at s[i].
func stringEnd(s []byte, i int) (int, bool) {
	if i >= len(s) || s[i] != '"' {
		return 0, false
	}
	for i++; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i + 1, true
		}
	}
	return 0, false
}

// valueEnd is the index just past the value that starts at s[i].
func valueEnd(s []byte, i int) (int, bool) {
	if i >= len(s) {
		return 0, false
	}
	switch s[i] {
	case '"':
		return stringEnd(s, i)
	case '{', '[':
		depth := 0
		for i < len(s) {
			switch s[i] {
			case '"':
				end, ok := stringEnd(s, i)
				if !ok {
					return 0, false
				}
				i = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
			i++
		}
		return 0, false
	default: // a number, true, false, null
		start := i
		for i < len(s) && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r' {
			i++
		}
		return i, i > start
	}
}
