package plugin

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// luaCase is an expression list whose values, joined with "|" by the probe,
// must read want (the answer of Lua 5.1).
type luaCase struct {
	expr, want string
}

func runCases(t *testing.T, cases []luaCase) {
	t.Helper()
	b := setup(t)
	for _, tc := range cases {
		got := b.runOK(t, `
			local r = table.pack and table.pack(`+tc.expr+`) or {n = select("#", `+tc.expr+`), `+tc.expr+`}
			local parts = {}
			for i = 1, r.n do parts[i] = tostring(r[i]) end
			return json_encode({out = table.concat(parts, "|")})`)
		require.Equal(t, tc.want, got["out"], tc.expr)
	}
}

func TestPatternsMatchLikeLua51(t *testing.T) {
	t.Parallel()
	runCases(t, []luaCase{
		{`string.find("hello world", "o w")`, "5|7"},
		{`string.find("hello", "l+")`, "3|4"},
		{`string.find("a.b", ".", 1, true)`, "2|2"},
		{`string.find("a+b", "+", 1, true)`, "2|2"},
		{`string.find("a.b", "%.")`, "2|2"},
		{`string.find("abc", "b", -1)`, "nil"},
		{`string.find("abc", "")`, "1|0"},
		{`string.find("abc", "", 10)`, "4|3"},
		{`string.find("hello", "()ll()")`, "3|4|3|5"},
		{`string.find("abc", "^b")`, "nil"},
		{`string.find("abc", "c$")`, "3|3"},
		{`string.find("a$c", "$c")`, "2|3"},
		{`string.match("key=value", "(%w+)=(%w+)")`, "key|value"},
		{`string.match("2024-01-02", "^(%d+)%-(%d+)%-(%d+)$")`, "2024|01|02"},
		{`string.match("<a><b>", "<(.-)>")`, "a"},
		{`string.match("<a><b>", "<(.*)>")`, "a><b"},
		{`string.match("x(a(b)c)y", "%b()")`, "(a(b)c)"},
		{`string.match('say "hi" ok', '(["\'])(.-)%1')`, `"|hi`},
		{`string.match("a]b", "[%]]")`, "]"},
		{`string.match("a]b", "[]]")`, "]"},
		{`string.match("abc123", "[^%a]+")`, "123"},
		{`string.match("xyz", "[a-y]+")`, "xy"},
		{`string.match("a-b", "[a%-]+")`, "a-"},
		{`string.match("  trim  ", "^%s*(.-)%s*$")`, "trim"},
		{`string.match("HeLLo", "%u+")`, "H"},
		{`string.match("HeLLo", "%l%u+")`, "eLL"},
		{`string.match("a1_b", "[%w_]+")`, "a1_b"},
		{`string.match("tab\there", "%c")`, "\t"},
		{`string.match("x,y", "%p")`, ","},
		{`string.match("0xFF", "%x+", 3)`, "FF"},
		{`string.match("abc", "%D+")`, "abc"},
		{`string.match("hello", "()")`, "1"},
		{`string.match("hello", ".-$")`, "hello"},
		{`string.match("aaa", "a?a?a?a")`, "aaa"},
		{`string.match("https://pay.example.com/x", "^https?://[^/%s]+")`, "https://pay.example.com"},
		{`string.gsub("hello world", "o", "0")`, "hell0 w0rld|2"},
		{`string.gsub("abc", "%w", "%0%0")`, "aabbcc|3"},
		{`string.gsub("hello world", "(%w+)", "<%1>")`, "<hello> <world>|2"},
		{`string.gsub("hello world", "%w+", "%1")`, "hello world|2"},
		{`string.gsub("abc", "", "-")`, "-a-b-c-|4"},
		{`string.gsub("abc", "x*", "-")`, "-a-b-c-|4"},
		{`string.gsub("hello", "l", {l = "L"})`, "heLLo|2"},
		{`string.gsub("hello", "l", {})`, "hello|2"},
		{`string.gsub("$name is $age", "%$(%w+)", function(k) return ({name = "bob", age = 3})[k] end)`, "bob is 3|2"},
		{`string.gsub("abc", "b", function() return false end)`, "abc|1"},
		{`string.gsub("aaa", "^a", "b")`, "baa|1"},
		{`string.gsub("aaa", "a", "b", 2)`, "bba|2"},
		{`string.gsub("a.b.c", "%.", "%%")`, "a%b%c|2"},
		{`string.gsub("abc", "()", "%1")`, "1a2b3c4|4"},
		{`string.gsub("api.example.com///", "/+$", "")`, "api.example.com|1"},
		{`string.gsub("THE (quick) fox", "%f[%a]%a+", "W")`, "W (W) W|3"},
		{`string.gsub("hello", "", "", 0)`, "hello|0"},
		{`select("#", string.gsub("x", "x", "y"))`, "2"},
	})
}

func TestGmatchIteratesLikeLua51(t *testing.T) {
	t.Parallel()
	got := setup(t).runOK(t, `
		local words, pairs_, empties = {}, {}, {}
		for w in ("one two  three"):gmatch("%a+") do words[#words + 1] = w end
		for k, v in string.gmatch("a=1, b=2", "(%w+)=(%w+)") do pairs_[#pairs_ + 1] = k .. ":" .. v end
		for e in string.gmatch("ab", "x*") do empties[#empties + 1] = "[" .. e .. "]" end
		return json_encode({words = words, pairs = pairs_, empties = table.concat(empties)})`)
	require.Equal(t, map[string]any{
		"words":   []any{"one", "two", "three"},
		"pairs":   []any{"a:1", "b:2"},
		"empties": "[][][]",
	}, got)
}

func TestMalformedPatternsRaiseErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for code, want := range map[string]string{
		`string.find("a", "[a")`:                 "malformed pattern (missing ']')",
		`string.find("a", "%")`:                  "malformed pattern (ends with '%')",
		`string.find("a", "(a")`:                 "unfinished capture",
		`string.match("a", "a)")`:                "invalid pattern capture",
		`string.find("a", "%1")`:                 "invalid capture index",
		`string.gsub("a", "a", "%2")`:            "invalid capture index",
		`string.gsub("a", "a", "x%")`:            "invalid use of '%' in replacement string",
		`string.gsub("a", "a", {a = {}})`:        "invalid replacement value (a table)",
		`string.find("a", "%f")`:                 "missing '[' after '%f' in pattern",
		`string.find("a", "%b")`:                 "missing arguments to '%b'",
		`string.gsub("a", "a", true)`:            "string/function/table expected",
		`string.find("a", string.rep("()", 33))`: "too many captures",
	} {
		_, err := b.run(t, `return `+code)
		requireKind(t, err, KindScriptError, want, code)
	}
}

func TestStringFunctionsBehaveLikeLua51(t *testing.T) {
	t.Parallel()
	runCases(t, []luaCase{
		{`string.format("%5.2f|%-5d|%05d|%x|%X|%o|%e|%g|%g|%s|%c|%%", 3.14159, 42, 42, 255, 255, 8, 12345.678, 0.1, 1/3, "hi", 65)`,
			" 3.14|42   |00042|ff|FF|10|1.234568e+04|0.1|0.333333|hi|A|%"},
		{`string.format("%q", 'a"b\n\\c\0')`, "\"a\\\"b\\\n\\\\c\\000\""},
		{`string.format("%d|%i|%u", 3.0, -7, 12)`, "3|-7|12"},
		{`string.format("%d", "10")`, "10"},
		{`string.format("%.3s|%5s|%-5s|", "abcdef", "ab", "ab")`, "abc|   ab|ab   |"},
		{`string.format("%s %s", 1, true)`, "1 true"},
		{`string.format("%+d % d %#x", 5, 5, 255)`, "+5  5 0xff"},
		{`string.format("no directives")`, "no directives"},
		{`string.rep("ab", 3)`, "ababab"},
		{`string.rep("ab", 0)`, ""},
		{`string.rep("ab", -1)`, ""},
		{`string.upper("abc é Z")`, "ABC é Z"},
		{`string.lower("ABC É z")`, "abc É z"},
		{`string.reverse("abc")`, "cba"},
		{`string.char(72, 105)`, "Hi"},
		{`string.byte("A")`, "65"},
		{`string.sub("hello", 2, -2)`, "ell"},
		{`string.len("héllo")`, "6"},
		{`table.concat({1, "a", 2.5}, ",")`, "1,a,2.5"},
		{`table.concat({"a", "b", "c"}, "-", 2, 3)`, "b-c"},
		{`table.concat({})`, ""},
		{`"a" .. 1 .. 2.5 .. "b"`, "a12.5b"},
		{`1 .. ""`, "1"},
	})
}

func TestStringFunctionErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for code, want := range map[string]string{
		`string.format("%100d", 1)`:         "invalid format (width or precision too long)",
		`string.format("%.100f", 1)`:        "invalid format (width or precision too long)",
		`string.format("%999999999s", "x")`: "invalid format (width or precision too long)",
		`string.format("%d")`:               "no value",
		`string.format("%y", 1)`:            "invalid option '%y' to 'format'",
		`string.format("%------d", 1)`:      "invalid format (repeated flags)",
		`string.char(256)`:                  "invalid value",
		`table.concat({1, {}, 3})`:          "invalid value (at index 2) in table for 'concat'",
		`"a" .. {}`:                         "attempt to concatenate a table value",
		`nil .. "a"`:                        "attempt to concatenate a nil value",
	} {
		_, err := b.run(t, `return `+code)
		requireKind(t, err, KindScriptError, want, code)
	}
}

func TestConcatHonoursTheConcatMetamethod(t *testing.T) {
	t.Parallel()
	got := setup(t).runOK(t, `
		local mt = {__concat = function(a, b)
			local x = type(a) == "table" and a.v or a
			local y = type(b) == "table" and b.v or b
			return x .. "+" .. y
		end}
		local v = setmetatable({v = "V"}, mt)
		return json_encode({a = "x" .. v, b = v .. "y", c = "p" .. "q" .. v})`)
	require.Equal(t, map[string]any{"a": "x+V", "b": "V+y", "c": "pq+V"}, got)
}
