package plugin

import (
	"github.com/rustbill/paymentd/internal/text"

	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"weak"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
)

// Type is a plugin type; its contract is the list Functions returns.
type Type string

const (
	Gateway            Type = "gateway"
	Notifier           Type = "notifier"
	FirstPartyProvider Type = "first_party_provider"
	UpstreamProvider   Type = "upstream_provider"
)

var (
	gatewayFunctions  = []string{"info", "config_schema", "create_payment", "query_payment", "parse_callback", "refund", "test_config"}
	notifierFunctions = []string{"info", "config_schema", "validate_config", "render", "send", "test_config"}
	providerFunctions = []string{"info", "config_schema", "test_config", "provision", "status", "start", "stop", "reboot", "suspend", "unsuspend", "terminate", "usage"}
	upstreamFunctions = append(append([]string(nil), providerFunctions...), "list_plans", "get_balance", "renew")
)

// Functions returns the contract of t (docs/plugins.md): gateway 7, notifier
// 6, first_party_provider 12, upstream_provider 15; nil for an unknown type.
// The slice is the caller's to keep.
func Functions(t Type) []string {
	var fns []string
	switch t {
	case Gateway:
		fns = gatewayFunctions
	case Notifier:
		fns = notifierFunctions
	case FirstPartyProvider:
		fns = providerFunctions
	case UpstreamProvider:
		fns = upstreamFunctions
	default:
		return nil
	}
	return append([]string(nil), fns...)
}

// Optional gateway functions (docs/plugins.md, "Saved payment methods"):
// a gateway that declares info().saves_payment_methods defines both.
const (
	ChargeSaved = "charge_saved"
	RemoveSaved = "remove_saved"
)

// OptionalFunctions returns the functions a script of type t may declare
// beside its contract, with the contract's two parameters: charge_saved
// and remove_saved for a gateway, change_plan for a provider, none for the
// others.
func OptionalFunctions(t Type) []string {
	switch t {
	case Gateway:
		return []string{ChargeSaved, RemoveSaved}
	case FirstPartyProvider, UpstreamProvider:
		return []string{ChangePlan}
	}
	return nil
}

// Valid reports whether t is one of the four plugin types.
func (t Type) Valid() bool { return Functions(t) != nil }

// AdminPage is the optional function a script may declare beside its contract.
const AdminPage = "admin_page"

// ChangePlan is the provider contract's optional function (docs/plugins.md):
// change_plan(config_json, {"instance_id", "external_id", "product"}) moves
// an instance to another plan (a plan change, internal/order). A provider
// that does not declare it is not asked: the plan change is billed, and the
// instance stays as it is.
const ChangePlan = "change_plan"

// MaxSourceBytes bounds a script's source. A plugin is a few hundred lines;
// the bound keeps a stray file from costing the parser gigabytes.
const MaxSourceBytes = 1 << 20

// concatName is the hidden local holding the guarded concatenation function.
// Parentheses cannot appear in a Lua identifier, so no script can name it —
// the same trick gopher-lua uses for "(for index)".
const concatName = "(concat)"

// Script is a compiled plugin: parsed, checked against its contract, ready to
// be loaded into any number of states. It is immutable and safe to share.
type Script struct {
	name         string
	typ          Type
	version      string
	sha256       string
	hasAdminPage bool
	params       map[string]bool // contract functions (and admin_page)

	// source is the script's text, kept to compile it again. The compiled
	// prototype lives only as long as a Plugin holds it (Plugin.proto, from
	// its first call until Close): a plugin no call uses (a gateway without
	// interfaces, most of the shipped ones on a given shop) holds its source
	// and not its compiled code, which is several times larger
	// (docs/performance.md, "Idle RSS, round three"). The first call after
	// that compiles it again (prototype).
	source  string
	protoMu sync.Mutex
	proto   weak.Pointer[lua.FunctionProto]
}

func (s *Script) Name() string       { return s.name }
func (s *Script) Type() Type         { return s.typ }
func (s *Script) Version() string    { return s.version }
func (s *Script) SHA256() string     { return s.sha256 }
func (s *Script) HasAdminPage() bool { return s.hasAdminPage }

// Has reports whether the script defines fn, a contract function or an
// optional one (admin_page, charge_saved, …) it declared.
func (s *Script) Has(fn string) bool { return s.params[fn] }

// CompileError is why a script was refused. Line is 0 when the problem is not
// tied to a line (a missing function, a bad version).
type CompileError struct {
	Plugin  string
	Line    int
	Message string
}

func (e *CompileError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("plugin %s: line %d: %s", e.Plugin, e.Line, e.Message)
	}
	return fmt.Sprintf("plugin %s: %s", e.Plugin, e.Message)
}

// trimProto gives p and the prototypes of its nested functions code and
// line tables of their own length. gopher-lua's compiler starts every
// function with room for 1,024 instructions and 1,024 lines (12 KiB) and
// the prototype keeps those slices: the six shipped plugins' 1.7 MB, held
// for as long as the plugin is loaded, shrink to a tenth.
//
// The same holds for its other tables, kept with the capacity the compiler
// started them at (room for 32 constants, 16 nested functions, 16 locals,
// 16 upvalues and 128 calls: 4.5 KiB a function, most of it the call table
// of a function that makes a few calls): 0.6 MB of the seven shipped
// plugins' idle heap (docs/performance.md, "Idle RSS, round three").
func trimProto(p *lua.FunctionProto) {
	p.Code = fit(p.Code)
	p.DbgSourcePositions = fit(p.DbgSourcePositions)
	p.Constants = fit(p.Constants)
	p.FunctionPrototypes = fit(p.FunctionPrototypes)
	p.DbgLocals = fit(p.DbgLocals)
	p.DbgCalls = fit(p.DbgCalls)
	p.DbgUpvalues = fit(p.DbgUpvalues)
	for _, c := range p.FunctionPrototypes {
		trimProto(c)
	}
}

// fit is s in an array of its own length (nil when empty): a slice of the
// old array, even of length 0, would keep all of it.
func fit[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return append(make([]T, 0, len(s)), s...)
}

// Compile parses and compiles source, runs it in a fresh sandboxed state to collect
// its globals and checks the contract of typ: every function exists and
// declares exactly two parameters, admin_page (optional) none or two, and version()
// (optional, "0.0.0" when missing) returns a semantic version. The error is a
// *CompileError naming the line or the function.
func Compile(name string, typ Type, source []byte) (*Script, error) {
	if !typ.Valid() {
		return nil, &CompileError{Plugin: name, Message: fmt.Sprintf("unknown plugin type %q", typ)}
	}
	if len(source) > MaxSourceBytes {
		return nil, &CompileError{Plugin: name, Message: fmt.Sprintf("source is %d bytes, the limit is %d", len(source), MaxSourceBytes)}
	}
	proto, err := compileSource(name, string(source))
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(source)
	sc := &Script{name: name, typ: typ, sha256: hex.EncodeToString(sum[:]), source: string(source), proto: weak.Make(proto)}

	// Loading runs the script's top level, which may loop or build strings:
	// it gets the same limits as a call.
	env := newEnv(Options{})
	st, err := newState(env, sc, proto)
	if err != nil {
		return nil, err
	}
	defer st.close()

	var problems []string
	sc.params = make(map[string]bool, len(Functions(typ))+1)
	for _, fn := range Functions(typ) {
		if p := checkFunction(st.globals.RawGetString(fn), fmt.Sprintf("%s function %q", typ, fn), 2); p != "" {
			problems = append(problems, p)
			continue
		}
		sc.params[fn] = true
	}
	for _, fn := range OptionalFunctions(typ) {
		if v := st.globals.RawGetString(fn); v != lua.LNil {
			if p := checkFunction(v, fmt.Sprintf("%s function %q", typ, fn), 2); p != "" {
				problems = append(problems, p)
				continue
			}
			sc.params[fn] = true
		}
	}
	if v := st.globals.RawGetString(AdminPage); v != lua.LNil {
		// The API contract writes admin_page(); the two-parameter form of the
		// contract functions is taken too. Either is called with both arguments
		// (Lua drops what a function does not declare).
		p := checkFunction(v, fmt.Sprintf("function %q", AdminPage), 0, 2)
		if p != "" {
			problems = append(problems, p)
		} else {
			sc.hasAdminPage = true
			sc.params[AdminPage] = true
		}
	}
	version, err := st.version()
	if err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		return nil, &CompileError{Plugin: name, Message: strings.Join(problems, "; ")}
	}
	sc.version = version
	return sc, nil
}

// compileSource parses, rewrites and compiles a script's text into a
// prototype of its own size (trimProto). The error is a *CompileError.
func compileSource(name, source string) (*lua.FunctionProto, error) {
	chunk, err := parse.Parse(strings.NewReader(source), name)
	if err != nil {
		return nil, parseError(name, err)
	}
	chunk = rewriteChunk(chunk)
	proto, err := lua.Compile(chunk, name)
	if err != nil {
		var ce *lua.CompileError
		if errors.As(err, &ce) {
			return nil, &CompileError{Plugin: name, Line: ce.Line, Message: ce.Message}
		}
		return nil, &CompileError{Plugin: name, Message: err.Error()}
	}
	trimProto(proto)
	return proto, nil
}

// prototype returns the script's compiled prototype: the one a Plugin
// holds, or, when none does any more, the source compiled again (the same
// text that compiled before, so the same code).
func (s *Script) prototype() (*lua.FunctionProto, error) {
	s.protoMu.Lock()
	defer s.protoMu.Unlock()
	if p := s.proto.Value(); p != nil {
		return p, nil
	}
	p, err := compileSource(s.name, s.source)
	if err != nil {
		return nil, err
	}
	s.proto = weak.Make(p)
	return p, nil
}

// checkFunction returns what is wrong with v as a contract function, or "":
// it must be a function of the script declaring one of the parameter
// counts allowed (the last one is the contract's, named in the message).
func checkFunction(v lua.LValue, what string, allowed ...int) string {
	want := allowed[len(allowed)-1]
	if v == lua.LNil {
		return what + " is missing"
	}
	fn, ok := v.(*lua.LFunction)
	if !ok {
		return fmt.Sprintf("%s is a %s, not a function", what, v.Type())
	}
	if fn.IsG || fn.Proto == nil {
		return what + " is not defined by the script"
	}
	if fn.Proto.IsVarArg != 0 {
		return fmt.Sprintf("%s takes a variable number of parameters, the contract says %d", what, want)
	}
	if n := int(fn.Proto.NumParameters); !slices.Contains(allowed, n) {
		return fmt.Sprintf("%s takes %d parameters, the contract says %d", what, n, want)
	}
	return ""
}

// version calls the script's version() and validates the answer.
func (s *state) version() (string, error) {
	v := s.globals.RawGetString("version")
	if v == lua.LNil {
		return "0.0.0", nil
	}
	fn, ok := v.(*lua.LFunction)
	if !ok {
		return "", fmt.Errorf("version is a %s, not a function", v.Type())
	}
	s.budget.begin(context.Background(), time.Now().Add(s.env.limits.CallTimeout), s.env.limits.Instructions, s.env.limits.MemoryBytes, s.env.limits.HeapGrowthBytes)
	defer s.budget.end()
	s.L.Push(fn)
	if err := s.L.PCall(0, 1, nil); err != nil {
		return "", fmt.Errorf("version() failed: %s", luaErrorMessage(err))
	}
	ret := s.L.Get(-1)
	s.L.Pop(1)
	str, ok := ret.(lua.LString)
	if !ok {
		return "", fmt.Errorf("version() returned a %s, want a semantic version string", ret.Type())
	}
	if !ValidVersion(string(str)) {
		return "", fmt.Errorf("version() returned %q, which is not a semantic version (like 1.2.0)", text.Clip(string(str), 64))
	}
	return string(str), nil
}

func parseError(name string, err error) *CompileError {
	var pe *parse.Error
	if errors.As(err, &pe) {
		msg := strings.TrimSpace(pe.Message)
		if pe.Token != "" {
			msg = fmt.Sprintf("%s near '%s'", msg, pe.Token)
		}
		if pe.Pos.Line > 0 {
			return &CompileError{Plugin: name, Line: pe.Pos.Line, Message: msg}
		}
		return &CompileError{Plugin: name, Message: msg + " at end of file"}
	}
	return &CompileError{Plugin: name, Message: strings.TrimSpace(err.Error())}
}

// runtimeLine extracts N from a Lua error message "name:N: ...".
func runtimeLine(name, msg string) int {
	rest, ok := strings.CutPrefix(msg, name+":")
	if !ok {
		return 0
	}
	digits, _, ok := strings.Cut(rest, ":")
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(digits)
	if err != nil {
		return 0
	}
	return n
}

// luaErrorMessage is the error value of a failed PCall without gopher-lua's
// stack traceback.
func luaErrorMessage(err error) string {
	var ae *lua.ApiError
	if errors.As(err, &ae) && ae.Object != nil {
		return ae.Object.String()
	}
	return err.Error()
}

// semver is the grammar of semver.org 2.0.0.
var semver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
	`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// ValidVersion reports whether v is a semantic version (semver.org 2.0.0,
// without a leading "v").
func ValidVersion(v string) bool { return semver.MatchString(v) }

// CompareVersions orders two semantic versions by semver precedence: -1 when
// a < b, 0 when equal (build metadata is ignored), +1 when a > b. The plugin
// scanner uses it to decide whether a file updates the plugin's definition.
func CompareVersions(a, b string) (int, error) {
	ma, mb := semver.FindStringSubmatch(a), semver.FindStringSubmatch(b)
	if ma == nil {
		return 0, fmt.Errorf("%q is not a semantic version", a)
	}
	if mb == nil {
		return 0, fmt.Errorf("%q is not a semantic version", b)
	}
	for i := 1; i <= 3; i++ {
		if c := compareNumeric(ma[i], mb[i]); c != 0 {
			return c, nil
		}
	}
	pa, pb := ma[4], mb[4]
	switch {
	case pa == pb:
		return 0, nil
	case pa == "":
		return 1, nil // a release ranks above its pre-releases
	case pb == "":
		return -1, nil
	}
	ia, ib := strings.Split(pa, "."), strings.Split(pb, ".")
	for i := 0; i < len(ia) && i < len(ib); i++ {
		na, nb := isNumeric(ia[i]), isNumeric(ib[i])
		var c int
		switch {
		case na && nb:
			c = compareNumeric(ia[i], ib[i])
		case na:
			c = -1
		case nb:
			c = 1
		default:
			c = strings.Compare(ia[i], ib[i])
		}
		if c != 0 {
			return c, nil
		}
	}
	switch {
	case len(ia) < len(ib):
		return -1, nil
	case len(ia) > len(ib):
		return 1, nil
	}
	return 0, nil
}

// compareNumeric compares decimal strings without leading zeros, of any length.
func compareNumeric(a, b string) int {
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

func isNumeric(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// discardLogger is used where no logger was given (Compile).
var discardLogger = slog.New(slog.DiscardHandler)
