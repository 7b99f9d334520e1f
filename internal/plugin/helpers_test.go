package plugin

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The plugins' own copies of str before the host offered it: epay's (alipay
// and http_provider wrote the same), stripe's, and bank_transfer's (webhook
// wrote the same). The host's str must answer what each answered.
const oldStrCopies = `
local function str_epay(v)
  if v == nil or type(v) == "table" or type(v) == "function" or type(v) == "userdata" then
    return ""
  end
  if type(v) == "number" then
    if v == math.floor(v) then
      return string.format("%d", v)
    end
    return tostring(v)
  end
  return tostring(v)
end
local function str_stripe(v)
  local t = type(v)
  if t == "string" then return v end
  if t == "number" then
    if v == math.floor(v) and v > -1e15 and v < 1e15 then
      return string.format("%d", v)
    end
    return tostring(v)
  end
  if t == "boolean" then return tostring(v) end
  return ""
end
local function str_bank(v)
  if v == nil or type(v) == "table" or type(v) == "function" or type(v) == "userdata" then
    return ""
  end
  return tostring(v)
end
`

// str answers what every plugin's own copy answered for each value a
// decoded JSON document or a script can hold; the one difference is a whole
// number beyond 2^63, which three copies wrote as -9223372036854775808
// (string.format's %d of an overflowed integer) and the host writes as
// tostring does, like the other three.
func TestStrAnswersWhatEveryPluginsCopyAnswered(t *testing.T) {
	t.Parallel()
	got := setup(t).runOK(t, oldStrCopies+`
		local doc = json_decode('{"n":1230,"f":12.5,"neg":-7,"big":1e15,"exp":2e3,"t":true,"f2":false,"s":"x","null":null,"o":{},"a":[1]}')
		local values = {
			{"nil", nil}, {"empty", ""}, {"string", "abc"}, {"bytes", "a\255b\0"},
			{"int", 12}, {"neg", -3}, {"zero", 0}, {"negzero", -0.0}, {"float", 12.5}, {"small", 1e-7},
			{"2^53", 2^53}, {"1e15", 1e15}, {"1e18", 1e18},
			{"true", true}, {"false", false}, {"table", {}}, {"nested", {a = {b = 1}}}, {"array", {1, 2}},
			{"function", print},
			{"json_int", doc.n}, {"json_float", doc.f}, {"json_neg", doc.neg}, {"json_big", doc.big},
			{"json_exp", doc.exp}, {"json_true", doc.t}, {"json_false", doc.f2}, {"json_string", doc.s},
			{"json_null", doc.null}, {"json_object", doc.o}, {"json_array", doc.a},
		}
		local out, differ = {}, {}
		for _, c in ipairs(values) do
			local name, v = c[1], c[2]
			local s = str(v)
			out[name] = (s == "a\255b\0") and "<bytes kept>" or s
			for copy, f in pairs({epay = str_epay, stripe = str_stripe, bank = str_bank}) do
				if f(v) ~= s then
					differ[#differ + 1] = copy .. ":" .. name
				end
			end
		end
		out.huge = str(1e20)
		out.huge_epay = str_epay(1e20)
		return json_encode({out = out, differ = differ})`)
	require.Equal(t, map[string]any{}, got["differ"], "json_encode writes an empty array as {}")
	require.Equal(t, map[string]any{
		"nil": "", "empty": "", "string": "abc", "bytes": "<bytes kept>",
		"int": "12", "neg": "-3", "zero": "0", "negzero": "0", "float": "12.5", "small": "1e-07",
		"2^53": "9007199254740992", "1e15": "1000000000000000", "1e18": "1000000000000000000",
		"true": "true", "false": "false", "table": "", "nested": "", "array": "", "function": "",
		"json_int": "1230", "json_float": "12.5", "json_neg": "-7", "json_big": "1000000000000000",
		"json_exp": "2000", "json_true": "true", "json_false": "false", "json_string": "x",
		"json_null": "", "json_object": "", "json_array": "",
		"huge": "1e+20", "huge_epay": "-9223372036854775808",
	}, got["out"])
}

func TestStrAndSnippetTakeOneArgument(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, f := range []string{"str", "snippet", "json_table", "form_encode"} {
		_, err := b.run(t, `return `+f+`({}, 1)`)
		requireKind(t, err, KindScriptError, f+": takes at most 1 argument, got 2", f)
	}
}

// snippet is clip(str(value), 200): any value, cut before a character,
// bytes json_encode would refuse cleaned, so a message built from a
// gateway's body can always be reported.
func TestSnippetCutsAnyValueForAMessage(t *testing.T) {
	t.Parallel()
	got := setup(t).runOK(t, `return json_encode({
		none = snippet(nil),
		empty = snippet(""),
		number = snippet(404),
		bool = snippet(false),
		tbl = snippet({body = "x"}),
		short = snippet("not found"),
		long = snippet(string.rep("a", 199) .. "\195\169" .. "tail"),
		exact = snippet(string.rep("b", 200)),
		bad = snippet("a\255b\0c"),
		same = snippet(string.rep("é", 150)) == clip(string.rep("é", 150), 200),
	})`)
	require.Equal(t, map[string]any{
		"none": "", "empty": "", "number": "404", "bool": "false", "tbl": "", "short": "not found",
		"long":  string(make200('a', 199)) + "…",
		"exact": string(make200('b', 200)),
		"bad":   "a?b?c",
		"same":  true,
	}, got)
}

func make200(c byte, n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = c
	}
	return out
}

// json_table answers a table for a JSON object or array and nil for
// anything else, never raising: a gateway's answer is untrusted bytes.
func TestJSONTableAnswersATableOrNilAndNeverRaises(t *testing.T) {
	t.Parallel()
	b := setup(t)
	got := b.runOK(t, `
		local deep = string.rep("[", 300)
		local cases = {
			{"nil", nil}, {"empty", ""}, {"space", "  "}, {"open", "{"}, {"trailing", "{} {}"},
			{"null", "null"}, {"number", "12"}, {"string", '"s"'}, {"true", "true"},
			{"lua_number", 12}, {"lua_bool", true}, {"lua_table", {a = 1}}, {"lua_function", print},
			{"deep", deep}, {"bad_escape", '{"a":"\\x"}'}, {"bad_bytes", "\255{}"},
		}
		local out = {}
		for _, c in ipairs(cases) do
			local ok, v = pcall(json_table, c[2])
			out[c[1]] = ok and (v == nil and "nil" or type(v)) or ("raised: " .. tostring(v))
		end
		local obj = json_table('{"a":1,"b":{"c":[true,null,"x"]},"u":"v\255"}')
		local arr = json_table(' [1, 2] ')
		local empty = json_table("{}")
		return json_encode({out = out, a = obj.a, c = obj.b.c, u = obj.u, arr = arr, empty_type = type(empty)})`)
	require.Equal(t, map[string]any{
		"nil": "nil", "empty": "nil", "space": "nil", "open": "nil", "trailing": "nil",
		"null": "nil", "number": "nil", "string": "nil", "true": "nil",
		"lua_number": "nil", "lua_bool": "nil", "lua_table": "nil", "lua_function": "nil",
		"deep": "nil", "bad_escape": "nil", "bad_bytes": "nil",
	}, got["out"])
	require.Equal(t, float64(1), got["a"])
	require.Equal(t, map[string]any{"1": true, "3": "x"}, got["c"], "null leaves a hole, as json_decode's does")
	require.Equal(t, "v\uFFFD", got["u"], "bytes that are not UTF-8 read as json_decode reads them")
	require.Equal(t, []any{float64(1), float64(2)}, got["arr"])
	require.Equal(t, "table", got["empty_type"])
}

// form_encode writes the bodies epay, alipay and stripe wrote with their own
// form(): names sorted by bytes for a table, in order for pairs, empty
// values left out, reserved characters encoded as urlencode does.
func TestFormEncodeWritesNamesSortedOrInTheirOrder(t *testing.T) {
	t.Parallel()
	got := setup(t).runOK(t, `return json_encode({
		sorted = form_encode({b = "2", a = "1", c = "", B = "3", _ = "4", ["é"] = "5"}),
		reserved = form_encode({["a b"] = "x&y=z+%/é?#", ["k[0]"] = "1"}),
		bytes = form_encode({k = "\255\0"}),
		pairs = form_encode({{"z", "1"}, {"a", "2"}, {"m", nil}, {"k", ""}, {"z", "3"}, {"metadata[payment_id]", "p 1"}}),
		empty = form_encode({}),
		all_empty = form_encode({a = ""}),
		empty_name = form_encode({[""] = "v"}),
	})`)
	require.Equal(t, map[string]any{
		"sorted":     "B=3&_=4&a=1&b=2&%C3%A9=5",
		"reserved":   "a+b=x%26y%3Dz%2B%25%2F%C3%A9%3F%23&k%5B0%5D=1",
		"bytes":      "k=%FF%00",
		"pairs":      "z=1&a=2&z=3&metadata%5Bpayment_id%5D=p+1",
		"empty":      "",
		"all_empty":  "",
		"empty_name": "=v",
	}, got)
}

// The old copies of form (epay's and alipay's for tables, stripe's for
// pairs) and form_encode write the same bytes.
func TestFormEncodeWritesWhatThePluginsCopiesWrote(t *testing.T) {
	t.Parallel()
	got := setup(t).runOK(t, `
		local function form_epay(params)
		  local keys = {}
		  for k in pairs(params) do keys[#keys + 1] = k end
		  table.sort(keys)
		  local parts = {}
		  for _, k in ipairs(keys) do
		    if params[k] ~= nil and params[k] ~= "" then
		      parts[#parts + 1] = urlencode(k) .. "=" .. urlencode(params[k])
		    end
		  end
		  return table.concat(parts, "&")
		end
		local function form_stripe(pairs_)
		  local parts = {}
		  for _, p in ipairs(pairs_) do
		    if p[2] ~= nil and p[2] ~= "" then
		      parts[#parts + 1] = urlencode(p[1]) .. "=" .. urlencode(p[2])
		    end
		  end
		  return table.concat(parts, "&")
		end
		local t = {pid = "1001", type = "alipay", out_trade_no = "0b7c-41", notify_url = "https://x/cb?a=1&b=2",
			return_url = "", name = "VIP 会员 & co", money = "12.30", clientip = "", sign = "abc+/=", sign_type = "MD5",
			Zed = "\255", ["~"] = "~"}
		local p = {{"mode", "payment"}, {"line_items[0][price_data][unit_amount]", "1230"}, {"x", ""},
			{"metadata[payment_id]", "a b"}, {"success_url", "https://s/?q=1"}, {"mode", "again"}}
		return json_encode({table = form_encode(t) == form_epay(t), pairs = form_encode(p) == form_stripe(p)})`)
	require.Equal(t, map[string]any{"table": true, "pairs": true}, got)
}

func TestFormEncodeRefusesWhatItCannotWriteFaithfully(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for code, want := range map[string]string{
		`return form_encode("a=1")`:                   "form_encode: argument 1 (params) must be a table, got string",
		`return form_encode(nil)`:                     "form_encode: argument 1 (params) must be a table, got nil",
		`return form_encode({a = 1})`:                 `the value of "a" must be a string, got number`,
		`return form_encode({a = true})`:              `the value of "a" must be a string, got boolean`,
		`return form_encode({a = {b = "c"}})`:         `the value of "a" must be a string, got table`,
		`return form_encode({[2] = "x"})`:             "has a name that is not a string (number)",
		`return form_encode({[true] = "x"})`:          "has a name that is not a string (boolean)",
		`return form_encode({{"a", "1"}, b = "2"})`:   "not both",
		`return form_encode({"a", "b"})`:              "pair 1 must be a table {name, value}, got string",
		`return form_encode({{1, "v"}})`:              "pair 1 has a name that is not a string (number)",
		`return form_encode({{"a", 1}})`:              `the value of "a" must be a string, got number`,
		`return form_encode({{"a", "1"}, {"b", {}}})`: `the value of "b" must be a string, got table`,
	} {
		_, err := b.run(t, code)
		requireKind(t, err, KindScriptError, want, code)
	}
}

// sign_string writes the text epay's sign and alipay's signing_string built
// in Lua: names sorted by bytes, raw k=v joined with &, empty values and
// the excluded names left out.
func TestSignStringWritesWhatThePluginsCopiesWrote(t *testing.T) {
	t.Parallel()
	got := setup(t).runOK(t, `
		local function old(params, without_sign_type)
		  local keys = {}
		  for k, v in pairs(params) do
		    if k ~= "sign" and not (without_sign_type and k == "sign_type") and v ~= nil and v ~= "" then
		      keys[#keys + 1] = k
		    end
		  end
		  table.sort(keys)
		  local parts = {}
		  for i, k in ipairs(keys) do
		    parts[i] = k .. "=" .. params[k]
		  end
		  return table.concat(parts, "&")
		end
		local t = {pid = "1001", type = "alipay", out_trade_no = "0b7c-41", notify_url = "https://x/cb?a=1&b=2",
			return_url = "", name = "VIP 会员 & co", money = "12.30", clientip = "", sign = "abc+/=", sign_type = "MD5",
			Zed = "\255", ["~"] = "~", ["a b"] = "x=y", [""] = "v"}
		return json_encode({
			epay = sign_string(t, "sign,sign_type") == old(t, true),
			alipay = sign_string(t, "sign") == old(t, false),
			spaces = sign_string(t, " sign , sign_type ") == old(t, true),
			text = sign_string({b = "2", a = "1", c = "", sign = "s", sign_type = "MD5", B = "3"}, "sign,sign_type"),
			all = sign_string({b = "2", a = "1", sign = "s"}),
			empty = sign_string({}, "sign"),
		})`)
	require.Equal(t, map[string]any{
		"epay": true, "alipay": true, "spaces": true,
		"text": "B=3&a=1&b=2", "all": "a=1&b=2&sign=s", "empty": "",
	}, got)
}

func TestSignStringRefusesWhatItCannotSignFaithfully(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for code, want := range map[string]string{
		`return sign_string("a=1")`:            "sign_string: argument 1 (params) must be a table, got string",
		`return sign_string(nil, "sign")`:      "sign_string: argument 1 (params) must be a table, got nil",
		`return sign_string({a = 1})`:          `the value of "a" must be a string, got number`,
		`return sign_string({a = {}})`:         `the value of "a" must be a string, got table`,
		`return sign_string({[1] = "x"})`:      "has a name that is not a string (number)",
		`return sign_string({a = "1"}, {"x"})`: "sign_string: argument 2 (exclude) must be a string, got table",
		`return sign_string({}, "a", "b")`:     "sign_string: takes at most 2 arguments, got 3",
	} {
		_, err := b.run(t, code)
		requireKind(t, err, KindScriptError, want, code)
	}
}
