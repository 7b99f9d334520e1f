package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	_ "github.com/rustbill/paymentd/gen/billing/event"
	gatewaypb "github.com/rustbill/paymentd/gen/billing/gateway"
	"github.com/rustbill/paymentd/gen/billing/gateway/gatewaypbconnect"
	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	_ "github.com/rustbill/paymentd/gen/billing/integration"
	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	"github.com/rustbill/paymentd/gen/billing/order/orderpbconnect"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/fakes/epay"
	"github.com/rustbill/paymentd/internal/notify/notifytest"
	"github.com/rustbill/paymentd/internal/testdb"
)

// docExample is one ```sh api-example block of docs/api.md and the
// ```json api-answer block after it.
type docExample struct {
	line      int    // of the opening fence, for messages
	procedure string // /package.Service/Method
	buf       string // the three commands as written
	grpcurl   string
	curl      string
	// Info-string options: once (the buf curl form is not run again:
	// repeating the call would change its answer), sets=VAR:json.path,…,
	// cookie=VAR (the Set-Cookie pair, from curl -i), headers (curl -i
	// prints headers before the body), after=Method (run once that method's
	// example ran), invalidates=VAR (run the example that set VAR again
	// afterwards).
	once        bool
	sets        [][2]string
	cookie      string
	headers     bool
	after       string
	invalidates string

	answer           string // the documented answer
	answerFrom       int    // byte offsets of the answer's content in the file
	answerTo         int
	ran              bool
	recorded, isJSON bool
}

var fenceRE = regexp.MustCompile("(?m)^```([^\\n]*)\\n")

// parseAPIDoc reads docs/api.md's examples in order.
func parseAPIDoc(t *testing.T, doc string) []*docExample {
	t.Helper()
	var out []*docExample
	pos := 0
	for {
		loc := fenceRE.FindStringSubmatchIndex(doc[pos:])
		if loc == nil {
			break
		}
		info := doc[pos+loc[2] : pos+loc[3]]
		start := pos + loc[1]
		end := strings.Index(doc[start:], "\n```")
		require.GreaterOrEqual(t, end, 0, "unclosed fence at byte %d", start)
		body := doc[start : start+end+1]
		pos = start + end + len("\n```")
		fields := strings.Fields(info)
		if len(fields) >= 2 && fields[1] == "api-answer" {
			require.NotEmpty(t, out, "an api-answer block before any example")
			last := out[len(out)-1]
			require.Empty(t, last.answer, "example at line %d has two answers", last.line)
			last.answer, last.answerFrom, last.answerTo = body, start, start+len(body)
			continue
		}
		if len(fields) < 2 || fields[1] != "api-example" {
			continue
		}
		ex := &docExample{line: strings.Count(doc[:start], "\n")}
		for _, f := range fields[2:] {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "once":
				ex.once = true
			case "headers":
				ex.headers = true
			case "cookie":
				ex.cookie = v
			case "after":
				ex.after = v
			case "invalidates":
				ex.invalidates = v
			case "sets":
				for _, pair := range strings.Split(v, ",") {
					name, path, ok := strings.Cut(pair, ":")
					require.True(t, ok, "line %d: sets=%s", ex.line, v)
					ex.sets = append(ex.sets, [2]string{name, path})
				}
			default:
				t.Fatalf("line %d: unknown option %q", ex.line, f)
			}
		}
		for _, c := range splitCommands(body) {
			switch {
			case strings.HasPrefix(c, "buf curl "):
				require.Empty(t, ex.buf, "line %d: two buf curl commands", ex.line)
				ex.buf = c
			case strings.HasPrefix(c, "grpcurl "):
				require.Empty(t, ex.grpcurl, "line %d: two grpcurl commands", ex.line)
				ex.grpcurl = c
			case strings.HasPrefix(c, "curl "):
				require.Empty(t, ex.curl, "line %d: two curl commands", ex.line)
				ex.curl = c
			default:
				t.Fatalf("line %d: a command that is neither buf curl, grpcurl nor curl: %q", ex.line, c)
			}
		}
		require.NotEmpty(t, ex.buf, "line %d: no buf curl form", ex.line)
		require.NotEmpty(t, ex.grpcurl, "line %d: no grpcurl form", ex.line)
		require.NotEmpty(t, ex.curl, "line %d: no curl form", ex.line)
		out = append(out, ex)
	}
	for _, ex := range out {
		require.NotEmpty(t, ex.answer, "example at line %d has no ```json api-answer block", ex.line)
	}
	return out
}

// splitCommands cuts a block into commands: a command runs on over lines
// ending in a backslash, and through its here-document.
func splitCommands(body string) []string {
	var out []string
	lines := strings.Split(strings.TrimRight(body, "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) == "" || strings.HasPrefix(lines[i], "#") {
			continue
		}
		cmd := []string{lines[i]}
		for strings.HasSuffix(lines[i], "\\") && i+1 < len(lines) {
			i++
			cmd = append(cmd, lines[i])
		}
		if m := regexp.MustCompile(`<<'?(\w+)'?`).FindStringSubmatch(lines[i]); m != nil {
			for i+1 < len(lines) {
				i++
				cmd = append(cmd, lines[i])
				if lines[i] == m[1] {
					break
				}
			}
		}
		out = append(out, strings.Join(cmd, "\n"))
	}
	return out
}

var varRE = regexp.MustCompile(`\$\{?([A-Z][A-Z0-9_]*)\}?`)

// vars are the shell variables a command uses.
func vars(cmd string) []string {
	var out []string
	for _, m := range varRE.FindAllStringSubmatch(cmd, -1) {
		if !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	return out
}

// invocation is what bash hands a command: its arguments and its stdin.
type invocation struct {
	args  []string
	stdin string
}

// parseWithBash lets bash expand cmd (quotes, variables, here-documents)
// with the command replaced by a function that prints what it got.
func parseWithBash(t *testing.T, env []string, cmd string) invocation {
	t.Helper()
	inv, err := bashInvocation(env, cmd)
	require.NoError(t, err)
	return inv
}

// bashInvocation is parseWithBash for any goroutine: it returns its error.
func bashInvocation(env []string, cmd string) (invocation, error) {
	name := strings.Fields(cmd)[0]
	script := name + "() { printf '%s\\0' \"$@\"; printf '\\001\\0'; cat; }\n" + cmd
	c := exec.Command("bash", "-c", script)
	c.Env = env
	c.Stdin = strings.NewReader("")
	out, err := c.CombinedOutput()
	if err != nil {
		return invocation{}, fmt.Errorf("%s: %w\n%s", cmd, err, out)
	}
	parts := strings.SplitN(string(out), "\001\x00", 2)
	if len(parts) != 2 {
		return invocation{}, fmt.Errorf("%s: no end of arguments in %q", cmd, out)
	}
	args := strings.Split(strings.TrimSuffix(parts[0], "\x00"), "\x00")
	return invocation{args: args, stdin: parts[1]}, nil
}

// request is what a command asks for, whichever tool it is.
type request struct {
	procedure string
	headers   map[string]string // lower-case name → value
	body      string
}

func (inv invocation) request(t *testing.T, tool, api, grpcAddr string) request {
	t.Helper()
	r := request{headers: map[string]string{}}
	var targets []string
	for i := 0; i < len(inv.args); i++ {
		a := inv.args[i]
		next := func() string {
			i++
			require.Less(t, i, len(inv.args), "%s: %s needs a value", tool, a)
			return inv.args[i]
		}
		switch a {
		case "curl", "-s", "-i", "-plaintext", "-v", "--http2-prior-knowledge":
		case "--protocol":
			require.Equal(t, "grpc", next())
		case "-w":
			// curl's answer ends with a newline, as a person reading it wants.
			require.Equal(t, `\n`, next(), "%s: -w takes only '\\n'", tool)
		case "-H":
			k, v, ok := strings.Cut(next(), ":")
			require.True(t, ok)
			r.headers[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
		case "-d":
			d := next()
			if d == "@-" || d == "@" {
				d = inv.stdin
			}
			r.body = d
		default:
			require.False(t, strings.HasPrefix(a, "-"), "%s: unexpected flag %s", tool, a)
			targets = append(targets, a)
		}
	}
	switch tool {
	case "grpcurl":
		require.Equal(t, []string{grpcAddr, strings.TrimPrefix(targets[1], "/")}, []string{targets[0], targets[1]}, "grpcurl host and method")
		require.Len(t, targets, 2)
		r.procedure = "/" + targets[1]
	default:
		require.Len(t, targets, 1, "%s: one URL", tool)
		require.True(t, strings.HasPrefix(targets[0], api+"/"), "%s: %s is not under $API", tool, targets[0])
		r.procedure = strings.TrimPrefix(targets[0], api)
	}
	delete(r.headers, "content-type")
	return r
}

// method finds a procedure in the generated descriptors.
func method(t *testing.T, procedure string) protoreflect.MethodDescriptor {
	t.Helper()
	svc, m, ok := strings.Cut(strings.TrimPrefix(procedure, "/"), "/")
	require.True(t, ok, procedure)
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	require.NoError(t, err, "service of %s", procedure)
	sd, ok := d.(protoreflect.ServiceDescriptor)
	require.True(t, ok, procedure)
	md := sd.Methods().ByName(protoreflect.Name(m))
	require.NotNil(t, md, "no method %s", procedure)
	return md
}

// docBundle is the shell environment the examples run in.
type docBundle struct {
	vars map[string]string
}

func (e *docBundle) environ() []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "LC_ALL=C.UTF-8"}
	for k, v := range e.vars {
		env = append(env, k+"="+v)
	}
	return env
}

func (e *docBundle) has(names ...string) bool {
	for _, n := range names {
		if _, ok := e.vars[n]; !ok {
			return false
		}
	}
	return true
}

// splitHTTP separates curl -i's headers from the body.
func splitHTTP(t *testing.T, out string) (http.Header, string) {
	t.Helper()
	out = strings.ReplaceAll(out, "\r\n", "\n")
	head, body, ok := strings.Cut(out, "\n\n")
	require.True(t, ok, "no header block in %q", out)
	h := http.Header{}
	for _, l := range strings.Split(head, "\n")[1:] {
		k, v, _ := strings.Cut(l, ":")
		h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	return h, body
}

// jsonPath reads a.b.0.c out of a decoded JSON value.
func jsonPath(v any, path string) (string, bool) {
	for _, p := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i >= len(x) {
				return "", false
			}
			v = x[i]
		default:
			return "", false
		}
	}
	s, ok := v.(string)
	return s, ok && s != ""
}

// checkShape compares an answer with the documented one: every key the
// documentation shows (unless its value is a zero value, which Connect
// JSON leaves out) is in the answer with a value of the same JSON type,
// recursively (the first element of lists); and the answer has no
// top-level key the documentation does not show.
func checkShape(doc, got any, path string, top bool) error {
	switch d := doc.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: documented an object, got %T", path, got)
		}
		for k, dv := range d {
			gv, ok := g[k]
			if !ok {
				if isZeroJSON(dv) {
					continue
				}
				return fmt.Errorf("%s.%s: documented, missing from the answer", path, k)
			}
			if err := checkShape(dv, gv, path+"."+k, false); err != nil {
				return err
			}
		}
		if top {
			for k := range g {
				if _, ok := d[k]; !ok {
					return fmt.Errorf("%s.%s: in the answer, not documented", path, k)
				}
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok {
			return fmt.Errorf("%s: documented a list, got %T", path, got)
		}
		if len(d) > 0 && len(g) > 0 {
			return checkShape(d[0], g[0], path+"[0]", false)
		}
	default:
		if fmt.Sprintf("%T", doc) != fmt.Sprintf("%T", got) {
			return fmt.Errorf("%s: documented %T, got %T", path, doc, got)
		}
	}
	return nil
}

func isZeroJSON(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case bool:
		return !x
	case float64:
		return x == 0
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

// errorCode is the Connect code a documented answer expects, "" for a
// success.
func errorCode(doc map[string]any) string {
	code, _ := doc["code"].(string)
	if code == "" {
		return ""
	}
	for k := range doc {
		if k != "code" && k != "message" && k != "details" {
			return ""
		}
	}
	return code
}

// abridge shortens an answer for the documentation: lists keep their
// first two elements, and config schemas (shown in full by GetPlugin) their
// type and required keys.
func abridge(v any, schemas bool) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(map[string]any); ok && k == "configSchema" && schemas {
				e = map[string]any{"type": s["type"], "required": s["required"]}
			}
			x[k] = abridge(e, schemas)
		}
	case []any:
		if len(x) > 2 {
			x = x[:2]
		}
		for i, e := range x {
			x[i] = abridge(e, schemas)
		}
		return x
	}
	return v
}

// The examples of docs/api.md are run, in document order, against a live
// service: every curl command, and every buf curl command whose call may
// be repeated. An example that needs a variable another example sets (or
// declares after=Method) waits until that example ran. Reads (Get and List
// calls) between two changes run side by side (runAPIDoc).
//
// PAYMENTD_UPDATE_API_DOC=1 writes the answers the service gave into the
// document's api-answer blocks instead of comparing them.
func TestAPIDocExamplesRunAgainstALiveServer(t *testing.T) {
	t.Parallel()
	runAPIDoc(t, "curl")
}

// The grpcurl form of every example of docs/api.md, run in document order
// against a service of its own: grpcurl (pinned in tools/go.mod, built once
// by the go command) makes every call, once examples included, gives the
// variables later examples use, and its answers are checked against the
// documented ones like curl's.
func TestAPIDocGrpcurlExamplesRunAgainstALiveServer(t *testing.T) {
	t.Parallel()
	runAPIDoc(t, "grpcurl")
}

// runAPIDoc runs the examples with tool ("curl", with buf curl beside it,
// or "grpcurl") making the calls; the three forms of each are first checked
// to ask for the same thing.
func runAPIDoc(t *testing.T, tool string) {
	for _, need := range []string{"bash", "curl"} {
		_, err := exec.LookPath(need)
		require.NoError(t, err, "the API examples need %s on the PATH", need)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	docPath := filepath.Join(root, "docs", "api.md")
	raw, err := os.ReadFile(docPath)
	require.NoError(t, err)
	doc := string(raw)
	examples := parseAPIDoc(t, doc)
	update := tool == "curl" && os.Getenv("PAYMENTD_UPDATE_API_DOC") != ""

	// The buf the README's function runs and grpcurl, built (or found in the
	// build cache) by the go command from tools/go.mod.
	bufPath, grpcurlPath := pinnedTool(t, root, "buf"), pinnedTool(t, root, "grpcurl")

	// Each example's procedure, from its curl form (bash reads four at a time).
	invs := make([]invocation, len(examples))
	errs := make([]error, len(examples))
	var wg sync.WaitGroup
	slots := make(chan struct{}, 4)
	for i, ex := range examples {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			invs[i], errs[i] = bashInvocation((&docBundle{vars: placeholderVars()}).environ(), ex.curl)
		})
	}
	wg.Wait()
	for i, ex := range examples {
		require.NoError(t, errs[i], "line %d", ex.line)
		ex.procedure = invs[i].request(t, "curl", "http://api.test", "grpc.test:443").procedure
	}

	// The service, the fake gateway, and what the examples cannot create
	// for themselves.
	fake := epay.New(epay.Options{})
	require.NoError(t, fake.Start())
	t.Cleanup(fake.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	hook := notifytest.StartWebhook(t, "webhook-secret-0123456789")
	cfg := testConfig(testdb.URL(t))
	cfg.Plugins.Dir = pluginDir(t)
	src, err := os.ReadFile(filepath.Join(root, "plugins", "notifier", "webhook.lua"))
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(cfg.Plugins.Dir, "notifier"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(cfg.Plugins.Dir, "notifier", "webhook.lua"), src, 0o644))
	cfg.Notify.Webhooks = []config.NotifyWebhook{{Name: "ops", URL: hook.URL, Secret: hook.Secret}}
	cfg.Notify.PollInterval = 100 * time.Millisecond
	cfg.Server.PublicURL = "http://" + ln.Addr().String()
	// The renewal examples move the billing clock, as under paymentd dev.
	cfg.Billing.TestClock = true
	r := startOn(t, cfg, ln)
	env := &docBundle{vars: map[string]string{
		"API": r.baseURL, "GRPC": ln.Addr().String(), "ADMIN_PASSWORD": cfg.Bootstrap.AdminPassword,
		"EPAY_URL": fake.URL() + "/", "EPAY_PID": epay.DefaultPID, "EPAY_KEY": epay.DefaultKey,
		"PAYMENTD_DOC_BUF": bufPath, "PAYMENTD_DOC_GRPCURL": grpcurlPath,
	}}
	fixtures := docFixtures(t, r, fake, env, cfg.Plugins.Dir)

	// Every method of every service the server offers (as its reflection
	// lists them) is shown exactly once.
	shown := map[string]int{}
	for _, ex := range examples {
		shown[ex.procedure]++
	}
	for _, svc := range servedServices(t, r.baseURL) {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(svc)
		require.NoError(t, err, "%s is served but its descriptor is not linked into the test", svc)
		ms := d.(protoreflect.ServiceDescriptor).Methods()
		for i := range ms.Len() {
			p := "/" + string(svc) + "/" + string(ms.Get(i).Name())
			require.Equal(t, 1, shown[p], "docs/api.md must show %s exactly once", p)
			delete(shown, p)
		}
	}
	require.Empty(t, shown, "docs/api.md shows procedures the server does not offer")

	byName := map[string]*docExample{}
	for _, ex := range examples {
		byName[ex.procedure[strings.LastIndexByte(ex.procedure, '/')+1:]] = ex
	}
	ready := func(ex *docExample) bool {
		if ex.after != "" && !byName[ex.after].ran {
			return false
		}
		return env.has(vars(ex.buf + ex.grpcurl + ex.curl)...)
	}
	// The examples run in the order a sequential run would take them (the
	// first ready one each time), but a call that only reads (readOnly) may
	// start while other reads are under way: reads between two changes see
	// the same state in any order. Anything else waits until every example
	// under way is done, runs alone, and the next waits for it. A read also
	// waits while an example under way sets variables or is one a waiting
	// example declares after=, since its end could make an earlier example
	// ready, which a sequential run would have taken first. What an example
	// sets is applied, and the fixtures run, once nothing is under way.
	type outcome struct {
		ex   *docExample
		sets map[string]string
	}
	done := make(chan outcome)
	var inFlight []*docExample
	var ended []outcome
	start := func(ex *docExample) {
		inFlight = append(inFlight, ex)
		go func() {
			var sets map[string]string
			t.Run(strings.TrimPrefix(ex.procedure, "/"), func(t *testing.T) {
				sets = runDocExample(t, ex, env, update, tool)
			})
			done <- outcome{ex, sets}
		}()
	}
	// settle waits for every example under way, then applies what they set
	// and runs the fixtures, as a sequential run does after each example.
	settle := func() {
		for len(inFlight) > 0 {
			o := <-done
			inFlight = slices.DeleteFunc(inFlight, func(ex *docExample) bool { return ex == o.ex })
			ended = append(ended, o)
		}
		if len(ended) == 0 {
			return
		}
		for _, o := range ended {
			maps.Copy(env.vars, o.sets)
			o.ex.ran = true
			if o.ex.invalidates != "" {
				for _, other := range examples {
					if other != o.ex && (other.cookie == o.ex.invalidates || slices.ContainsFunc(other.sets, func(s [2]string) bool { return s[0] == o.ex.invalidates })) {
						delete(env.vars, o.ex.invalidates)
						maps.Copy(env.vars, runDocExample(t, other, env, false, tool))
					}
				}
			}
		}
		ended = ended[:0]
		fixtures()
	}
	// joins says whether ex may start beside the examples under way.
	const maxInFlight = 4
	joins := func(ex *docExample, pending []*docExample) bool {
		if !readOnly(ex) || len(inFlight) >= maxInFlight {
			return false
		}
		for _, f := range inFlight {
			if len(f.sets) > 0 || f.cookie != "" || slices.ContainsFunc(pending, func(p *docExample) bool { return byName[p.after] == f }) {
				return false
			}
		}
		return true
	}
	pending := slices.Clone(examples)
	rounds := 0
	for len(pending) > 0 {
		i := slices.IndexFunc(pending, ready)
		if i >= 0 && len(inFlight) > 0 && !joins(pending[i], pending) {
			settle()
			continue
		}
		if i < 0 && len(inFlight) > 0 {
			settle()
			continue
		}
		if i < 0 {
			var waiting []string
			for _, ex := range pending {
				var missing []string
				for _, v := range vars(ex.buf + ex.grpcurl + ex.curl) {
					if !env.has(v) {
						missing = append(missing, "$"+v)
					}
				}
				waiting = append(waiting, fmt.Sprintf("%s (line %d) waits for %s %s", ex.procedure, ex.line, strings.Join(missing, " "), ex.after))
			}
			t.Fatalf("examples that can never run:\n%s", strings.Join(waiting, "\n"))
		}
		ex := pending[i]
		pending = slices.Delete(pending, i, i+1)
		if len(inFlight) == 0 {
			rounds++
		}
		start(ex)
		if !readOnly(ex) {
			settle()
		}
	}
	settle()
	t.Logf("%d examples in %d rounds (reads side by side)", len(examples), rounds)

	if update {
		var b strings.Builder
		last := 0
		for _, ex := range examples {
			b.WriteString(doc[last:ex.answerFrom])
			b.WriteString(ex.answer)
			last = ex.answerTo
		}
		b.WriteString(doc[last:])
		require.NoError(t, os.WriteFile(docPath, []byte(b.String()), 0o644))
		t.Log("docs/api.md: answers updated")
	}
}

// servedServices asks the server's gRPC reflection which services it
// offers (reflection itself left out).
func servedServices(t *testing.T, baseURL string) []protoreflect.FullName {
	t.Helper()
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	h2c := &http.Client{Transport: &http.Transport{Protocols: &protocols}}
	defer h2c.CloseIdleConnections()
	stream := grpcreflect.NewClient(h2c, baseURL, connect.WithGRPC()).NewStream(context.Background())
	names, err := stream.ListServices()
	require.NoError(t, err)
	_, _ = stream.Close()
	var out []protoreflect.FullName
	for _, n := range names {
		if !strings.HasPrefix(string(n), "grpc.reflection.") {
			out = append(out, n)
		}
	}
	require.NotEmpty(t, out)
	return out
}

// pinnedTools are the tools of tools/go.mod the examples run, by name:
// each is built (or found in the build cache) once per test run.
var pinnedTools = struct {
	sync.Mutex
	path map[string]string
}{path: map[string]string{}}

// pinnedTool is the path of a tool of tools/go.mod: what
// `go tool -modfile=tools/go.mod name` runs.
func pinnedTool(t *testing.T, root, name string) string {
	t.Helper()
	pinnedTools.Lock()
	defer pinnedTools.Unlock()
	if p, ok := pinnedTools.path[name]; ok {
		return p
	}
	c := exec.Command("go", "tool", "-n", "-modfile=tools/go.mod", name)
	c.Dir = root
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	require.NoError(t, err, "building %s with go tool -n: %s", name, stderr.String())
	pinnedTools.path[name] = strings.TrimSpace(string(out))
	return pinnedTools.path[name]
}

// placeholderVars stand in for every variable when only the shape of a
// command is looked at.
func placeholderVars() map[string]string {
	return map[string]string{"API": "http://api.test", "GRPC": "grpc.test:443"}
}

// readOnly says whether an example's call changes nothing another example
// could see: a Get or a List.
func readOnly(ex *docExample) bool {
	m := ex.procedure[strings.LastIndexByte(ex.procedure, '/')+1:]
	return strings.HasPrefix(m, "Get") || strings.HasPrefix(m, "List")
}

// runDocExample runs one example with tool: its curl (and buf curl, when
// the call may be repeated) command, or its grpcurl command; and checks the
// answers. It returns the variables the example sets (sets=, cookie=), for
// the caller to add to env: examples may run side by side, reading env.
func runDocExample(t *testing.T, ex *docExample, env *docBundle, update bool, tool string) map[string]string {
	api, grpcAddr := env.vars["API"], env.vars["GRPC"]
	// The three forms ask for the same thing (bash reads the three at once).
	forms := map[string]string{"buf": ex.buf, "grpcurl": ex.grpcurl, "curl": ex.curl}
	invs, errs := map[string]invocation{}, map[string]error{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for form, cmd := range forms {
		wg.Go(func() {
			inv, err := bashInvocation(env.environ(), cmd)
			mu.Lock()
			defer mu.Unlock()
			invs[form], errs[form] = inv, err
		})
	}
	wg.Wait()
	reqs := map[string]request{}
	for form := range forms {
		require.NoError(t, errs[form], "line %d: %s", ex.line, forms[form])
		reqs[form] = invs[form].request(t, form, api, grpcAddr)
	}
	require.Equal(t, ex.procedure, reqs["buf"].procedure, "line %d: buf curl calls another procedure", ex.line)
	require.Equal(t, ex.procedure, reqs["grpcurl"].procedure, "line %d: grpcurl calls another procedure", ex.line)
	for _, form := range []string{"buf", "grpcurl"} {
		require.Equal(t, reqs["curl"].headers, reqs[form].headers, "line %d: %s sends other credentials than curl", ex.line, form)
		require.JSONEq(t, reqs["curl"].body, reqs[form].body, "line %d: %s sends another body than curl", ex.line, form)
	}
	md := method(t, ex.procedure)
	in := dynamicpb.NewMessage(md.Input())
	require.NoError(t, protojson.Unmarshal([]byte(reqs["curl"].body), in), "line %d: the request body does not fit %s", ex.line, md.Input().FullName())

	var header http.Header
	var body string
	if tool == "grpcurl" {
		header, body = runGrpcurl(t, ex, env)
	} else {
		// curl, for real.
		c := exec.Command("bash", "-c", ex.curl)
		c.Env = env.environ()
		var stderr bytes.Buffer
		c.Stderr = &stderr
		out, err := c.Output()
		require.NoError(t, err, "line %d: %s\n%s", ex.line, ex.curl, stderr.String())
		body = string(out)
		require.True(t, strings.HasSuffix(body, "\n"), "line %d: the answer does not end with a newline: %q", ex.line, body)
		if ex.headers {
			header, body = splitHTTP(t, body)
		}
	}
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &got), "line %d: not JSON: %q", ex.line, body)

	if update {
		if code, ok := got["code"].(string); ok && len(got) <= 3 {
			ex.answer = mustIndent(t, map[string]any{"code": code, "message": got["message"]})
		} else {
			ex.answer = mustIndent(t, abridge(copyJSON(t, got), !strings.HasSuffix(ex.procedure, "/GetPlugin")))
		}
	}
	var want map[string]any
	require.NoError(t, json.Unmarshal([]byte(ex.answer), &want), "line %d: the documented answer is not JSON", ex.line)
	if code := errorCode(want); code != "" {
		require.Equal(t, code, got["code"], "line %d: %s answered %v", ex.line, ex.procedure, got)
	} else {
		require.NotContains(t, got, "code", "line %d: %s failed: %v", ex.line, ex.procedure, got)
		require.NoError(t, checkShape(want, got, "answer", true), "line %d: %s answered %s to %s", ex.line, ex.procedure, body, tool)
	}
	sets := map[string]string{}
	for _, s := range ex.sets {
		v, ok := jsonPath(got, s[1])
		require.True(t, ok, "line %d: no %s in %s", ex.line, s[1], body)
		sets[s[0]] = v
	}
	if ex.cookie != "" {
		sc := header.Get("Set-Cookie")
		require.NotEmpty(t, sc, "line %d: no Set-Cookie", ex.line)
		sets[ex.cookie] = strings.SplitN(sc, ";", 2)[0]
	}

	// buf curl, for real, when the call can be repeated: in the shell the
	// example leaves, with what it set.
	if tool != "curl" || ex.once {
		return sets
	}
	after := &docBundle{vars: maps.Clone(env.vars)}
	maps.Copy(after.vars, sets)
	c := exec.Command("bash", "-c", "buf() { \"$PAYMENTD_DOC_BUF\" \"$@\"; }\n"+ex.buf)
	c.Env = after.environ()
	var stderr bytes.Buffer
	c.Stderr = &stderr
	bufOut, err := c.Output()
	if code := errorCode(want); code != "" {
		require.Error(t, err, "line %d: buf curl succeeded: %s", ex.line, bufOut)
		require.Contains(t, stderr.String(), `"code": "`+code+`"`, "line %d", ex.line)
		return sets
	}
	require.NoError(t, err, "line %d: %s\n%s", ex.line, ex.buf, stderr.String())
	var bufGot map[string]any
	require.NoError(t, json.Unmarshal(bufOut, &bufGot), "line %d: buf curl printed %q", ex.line, bufOut)
	require.NoError(t, checkShape(want, bufGot, "buf answer", true), "line %d: buf curl answered %s", ex.line, bufOut)
	return sets
}

// runGrpcurl runs an example's grpcurl command with the pinned grpcurl and
// returns what it answered as Connect JSON would: the message, or for a
// failed call {"code", "message"} with the code in Connect's spelling.
// With -v (the examples that need a response header, as curl needs -i)
// the response headers come back too.
func runGrpcurl(t *testing.T, ex *docExample, env *docBundle) (http.Header, string) {
	t.Helper()
	c := exec.Command("bash", "-c", "grpcurl() { \"$PAYMENTD_DOC_GRPCURL\" \"$@\"; }\n"+ex.grpcurl)
	c.Env = env.environ()
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	out := stdout.String()
	if err != nil {
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "line %d: %s", ex.line, ex.grpcurl)
		m := grpcurlErrorRE.FindStringSubmatch(stderr.String())
		require.NotNil(t, m, "line %d: grpcurl failed without a status: %s\n%s", ex.line, ex.grpcurl, stderr.String())
		code, ok := connectCodeOfGRPCName(m[1])
		require.True(t, ok, "line %d: grpcurl printed an unknown code %q", ex.line, m[1])
		return nil, mustIndent(t, map[string]any{"code": code.String(), "message": m[2]})
	}
	if !ex.headers {
		return nil, out
	}
	require.True(t, slices.Contains(strings.Fields(ex.grpcurl), "-v"), "line %d: the example needs a response header: grpcurl prints them with -v", ex.line)
	head, rest, ok := strings.Cut(out, "\nResponse headers received:\n")
	require.True(t, ok, "line %d: no response headers in grpcurl -v's output: %s", ex.line, out)
	_ = head
	headers, rest, ok := strings.Cut(rest, "\n\nResponse contents:\n")
	require.True(t, ok, "line %d: no response contents in grpcurl -v's output: %s", ex.line, out)
	body, _, ok := strings.Cut(rest, "\n\nResponse trailers received:")
	require.True(t, ok, "line %d: no response trailers in grpcurl -v's output: %s", ex.line, out)
	h := http.Header{}
	for _, l := range strings.Split(headers, "\n") {
		k, v, _ := strings.Cut(l, ":")
		h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	return h, body
}

// grpcurlErrorRE reads grpcurl's report of a failed call.
var grpcurlErrorRE = regexp.MustCompile(`(?m)^ERROR:\n\s+Code: (\w+)\n\s+Message: (.*)$`)

// connectCodeOfGRPCName maps gRPC's name of a status code (NotFound) to
// Connect's code (not_found): the numbers are the same.
func connectCodeOfGRPCName(name string) (connect.Code, bool) {
	for c := codes.Canceled; c <= codes.Unauthenticated; c++ {
		if c.String() == name {
			return connect.Code(c), true
		}
	}
	return 0, false
}

func copyJSON(t *testing.T, v any) any {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var out any
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

func mustIndent(t *testing.T, v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	require.NoError(t, enc.Encode(v))
	return b.String()
}

// docFixtures returns the function run after every example that provides
// what the examples name but do not create themselves: a second customer,
// two more pending
// orders, a pending bank-transfer payment (and, once it is confirmed, a
// pending refund of it), the gateway's signed notification of the epay
// payment, and a failed event.
func docFixtures(t *testing.T, r *running, fake *epay.Server, env *docBundle, plugins string) func() {
	ctx := context.Background()
	orders := orderpbconnect.NewOrderServiceClient(http.DefaultClient, r.baseURL)
	payments := paymentpbconnect.NewPaymentServiceClient(http.DefaultClient, r.baseURL)
	admin := gatewaypbconnect.NewGatewayAdminServiceClient(http.DefaultClient, r.baseURL)
	customer := func() credential { return bearer(env.vars["TOKEN"]) }
	adminCookie := func() credential { return cookie(env.vars["ADMIN_COOKIE"]) }
	newOrder := func() string {
		o, err := orders.CreateOrder(ctx, with(&orderpb.CreateOrderRequest{ProductId: env.vars["PRODUCT_ID"]}, customer()))
		require.NoError(t, err)
		return o.Msg.GetOrder().GetId()
	}
	return func() {
		if !env.has("CUSTOMER2_ID") {
			// The customer the access examples disable and sign out.
			ids := identitypbconnect.NewIdentityServiceClient(http.DefaultClient, r.baseURL)
			reg, err := ids.Register(ctx, connect.NewRequest(&identitypb.RegisterRequest{Email: "bob@example.com", Password: "long enough password", Name: "Bob"}))
			require.NoError(t, err)
			env.vars["CUSTOMER2_ID"] = reg.Msg.GetCustomer().GetId()
		}
		if env.has("PRODUCT_ID", "TOKEN") && !env.has("ORDER2_ID") {
			env.vars["ORDER2_ID"], env.vars["ORDER3_ID"] = newOrder(), newOrder()
		}
		if env.has("PRODUCT_ID", "TOKEN", "ADMIN_COOKIE") && !env.has("BANK_PAYMENT_ID") {
			gw, err := admin.CreateGatewayInterface(ctx, with(&gatewaypb.CreateGatewayInterfaceRequest{
				PluginName: "bank_transfer", DisplayName: "Bank transfer",
				Config: mustStruct(t, map[string]any{"bank_name": "Example Bank", "account_name": "Example Hosting Ltd", "account_number": "DE02120300000000202051", "currencies": []any{"CNY"}}),
			}, adminCookie()))
			require.NoError(t, err)
			_, err = admin.EnableGatewayInterface(ctx, with(&gatewaypb.EnableGatewayInterfaceRequest{Id: gw.Msg.GetGatewayInterface().GetId()}, adminCookie()))
			require.NoError(t, err)
			p, err := payments.CreatePayment(ctx, with(&paymentpb.CreatePaymentRequest{
				OrderId: newOrder(), GatewayInterfaceId: gw.Msg.GetGatewayInterface().GetId(), ReturnUrl: "https://shop.example/orders/done",
			}, customer()))
			require.NoError(t, err)
			env.vars["BANK_PAYMENT_ID"] = p.Msg.GetPayment().GetId()
		}
		if env.has("BANK_PAYMENT_ID", "ADMIN_COOKIE") && !env.has("PENDING_REFUND_ID") {
			// A refund waiting for an admin: the bank transfer, once
			// ConfirmBankTransfer's example settled it, refunded (by hand,
			// so the refund stays pending).
			got, err := payments.GetPayment(ctx, with(&paymentpb.GetPaymentRequest{Id: env.vars["BANK_PAYMENT_ID"]}, adminCookie()))
			require.NoError(t, err)
			if got.Msg.GetPayment().GetStatus() == "success" {
				r, err := payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{
					PaymentId: env.vars["BANK_PAYMENT_ID"], Reason: "the customer withdrew",
				}, adminCookie()))
				require.NoError(t, err)
				require.Equal(t, "pending", r.Msg.GetRefund().GetStatus())
				env.vars["PENDING_REFUND_ID"] = r.Msg.GetRefund().GetId()
			}
		}
		if env.has("PAYMENT_ID") && !env.has("CALLBACK_PAYLOAD") {
			// The payer pays at the gateway, whose notification is what
			// HandleCallback's example delivers (the fake's own is dropped).
			fake.DropNotify(true)
			require.NoError(t, fake.Pay(env.vars["PAYMENT_ID"]))
			fo, ok := fake.Order(env.vars["PAYMENT_ID"])
			require.True(t, ok, "the fake gateway knows the payment")
			env.vars["CALLBACK_PAYLOAD"] = signedNotify(env.vars["PAYMENT_ID"], fo.TradeNo, "12.30")
		}
		if env.has("TOKEN", "CUSTOMER_ID", "ADMIN_COOKIE", "RENEWAL_ORDER_ID") && !env.has("SAVED_METHOD_ID") {
			// A card saved through Stripe (its Stripe a fake that detaches),
			// for the saved-card examples. The customer's renewing orders
			// do not charge it: the renewal examples' answers stay the
			// balance's.
			src, err := os.ReadFile(filepath.Join("..", "..", "plugins", "gateway", "stripe.lua"))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(plugins, "gateway", "stripe.lua"), src, 0o644))
			_, err = admin.ReloadPlugins(ctx, with(&gatewaypb.ReloadPluginsRequest{}, adminCookie()))
			require.NoError(t, err)
			stripe := newCardStripe(t)
			gw, err := admin.CreateGatewayInterface(ctx, with(&gatewaypb.CreateGatewayInterfaceRequest{
				PluginName: "stripe", DisplayName: "Card (Stripe)",
				Config: mustStruct(t, map[string]any{"secret_key": "sk_test_paymentd", "webhook_secret": stripeWhsec, "api_base": stripe.URL}),
			}, adminCookie()))
			require.NoError(t, err)
			_, err = r.app.Pool().Exec(ctx, `INSERT INTO order_auto_charge (order_id, auto_charge, updated_at)
				SELECT id, false, now() FROM orders WHERE customer_id = $1 AND renews`, env.vars["CUSTOMER_ID"])
			require.NoError(t, err)
			var id string
			require.NoError(t, r.app.Pool().QueryRow(ctx, `INSERT INTO saved_payment_methods
				(id, customer_id, gateway_interface_id, gateway_customer_id, gateway_method_id, brand, last4, exp_month, exp_year, created_at)
				VALUES (gen_random_uuid(), $1, $2, 'cus_Doc1', 'pm_Doc1', 'visa', '4242', 12, 2030, now()) RETURNING id::text`,
				env.vars["CUSTOMER_ID"], gw.Msg.GetGatewayInterface().GetId()).Scan(&id))
			env.vars["SAVED_METHOD_ID"] = id
		}
		if env.has("TOKEN", "CUSTOMER_ID", "ADMIN_COOKIE") && !env.has("RENEWAL_ORDER_ID") {
			// A monthly service, active: the renewal examples' order,
			// paid from a balance an admin credited.
			prod, err := orders.CreateProduct(ctx, with(&orderpb.CreateProductRequest{
				Name: "VPS 2G monthly", Price: "20.00", Currency: "CNY", BillingCycle: "monthly",
			}, adminCookie()))
			require.NoError(t, err)
			o, err := orders.CreateOrder(ctx, with(&orderpb.CreateOrderRequest{ProductId: prod.Msg.GetProduct().GetId()}, customer()))
			require.NoError(t, err)
			customers := identitypbconnect.NewCustomerAdminServiceClient(http.DefaultClient, r.baseURL)
			_, err = customers.AdjustBalance(ctx, with(&identitypb.AdjustBalanceRequest{
				CustomerId: env.vars["CUSTOMER_ID"], Amount: "20.00", Note: "for the renewal examples",
			}, adminCookie()))
			require.NoError(t, err)
			id := o.Msg.GetOrder().GetId()
			_, err = orders.PayWithBalance(ctx, with(&orderpb.PayWithBalanceRequest{OrderId: id}, customer()))
			require.NoError(t, err)
			require.Eventually(t, func() bool {
				got, err := orders.GetOrder(ctx, with(&orderpb.GetOrderRequest{Id: id}, customer()))
				return err == nil && got.Msg.GetOrder().GetStatus() == "active"
			}, 10*time.Second, 20*time.Millisecond)
			env.vars["RENEWAL_ORDER_ID"] = id
		}
		if env.has("RENEWAL_ORDER_ID") && !env.has("END_ORDER_ID") {
			// A second monthly service, active, for EndService's example
			// (which ends it), paid from a balance an admin credited.
			o, err := orders.CreateOrder(ctx, with(&orderpb.CreateOrderRequest{ProductId: renewalProduct(t, ctx, orders, env.vars["RENEWAL_ORDER_ID"], customer())}, customer()))
			require.NoError(t, err)
			customers := identitypbconnect.NewCustomerAdminServiceClient(http.DefaultClient, r.baseURL)
			_, err = customers.AdjustBalance(ctx, with(&identitypb.AdjustBalanceRequest{
				CustomerId: env.vars["CUSTOMER_ID"], Amount: "20.00", Note: "for the EndService example",
			}, adminCookie()))
			require.NoError(t, err)
			id := o.Msg.GetOrder().GetId()
			_, err = orders.PayWithBalance(ctx, with(&orderpb.PayWithBalanceRequest{OrderId: id}, customer()))
			require.NoError(t, err)
			require.Eventually(t, func() bool {
				got, err := orders.GetOrder(ctx, with(&orderpb.GetOrderRequest{Id: id}, customer()))
				return err == nil && got.Msg.GetOrder().GetStatus() == "active"
			}, 10*time.Second, 20*time.Millisecond)
			env.vars["END_ORDER_ID"] = id
		}
		if env.has("END_ORDER_ID") && !env.has("PLAN_PRODUCT_ID") {
			// The product ChangeOrderPlan's example moves END_ORDER_ID to
			// at the period end (CancelPlanChange's withdraws it).
			prod, err := orders.CreateProduct(ctx, with(&orderpb.CreateProductRequest{
				Name: "VPS 4G monthly", Price: "40.00", Currency: "CNY", BillingCycle: "monthly",
			}, adminCookie()))
			require.NoError(t, err)
			env.vars["PLAN_PRODUCT_ID"] = prod.Msg.GetProduct().GetId()
		}
		if env.has("EVENT_ID", "ORDER2_ID") && !env.has("FAILED_EVENT_ID") {
			// An event whose handler gave up: the order_paid of the order
			// paid from the balance, once its worker is done with it (its
			// handler finds the work done when it is retried).
			var id string
			require.Eventually(t, func() bool {
				err := r.app.Pool().QueryRow(ctx, `UPDATE events SET status = 'failed', last_error = 'provider unreachable: connection refused', attempts = 8
					WHERE order_id = $1 AND event_type = 'order_paid' AND status = 'done' RETURNING id`, env.vars["ORDER2_ID"]).Scan(&id)
				return err == nil
			}, 10*time.Second, 20*time.Millisecond)
			env.vars["FAILED_EVENT_ID"] = id
		}
	}
}

// readmeScript joins README.md's ```sh <kind> blocks into one script.
func readmeScript(t *testing.T, root, kind string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	var script strings.Builder
	for _, m := range regexp.MustCompile("(?s)```sh "+kind+"\n(.*?)```").FindAllStringSubmatch(string(raw), -1) {
		script.WriteString(m[1])
	}
	require.NotEmpty(t, script.String(), "README.md has no ```sh %s blocks", kind)
	return script.String()
}

// runREADMEScript runs a README script with bash (set -euo pipefail) in a
// directory whose .data/dev.toml holds the admin password as `task run`
// writes it, with buf and grpcurl the pinned ones, after replacing the
// default addresses as replace says; it returns what the script printed.
func runREADMEScript(t *testing.T, root, script, adminPassword string, replace ...string) string {
	t.Helper()
	for _, tool := range []string{"bash", "curl", "jq", "sed"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "the README's examples need %s on the PATH", tool)
	}
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ".data"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".data", "dev.toml"),
		[]byte("[bootstrap]\nadmin_username = \"admin\"\nadmin_password = \""+adminPassword+"\"\n"), 0o600))
	// The script runs as a file (`bash script.sh`), where aliases do not
	// expand: the README's own shell functions must define buf and grpcurl.
	// Only what they run is swapped for the pinned binaries, which need no
	// tools/go.mod in the test's directory.
	replace = append(replace,
		"go tool -modfile=tools/go.mod buf", `"$PAYMENTD_DOC_BUF"`,
		"go tool -modfile=tools/go.mod grpcurl", `"$PAYMENTD_DOC_GRPCURL"`)
	body := strings.NewReplacer(replace...).Replace(script)
	scriptFile := filepath.Join(t.TempDir(), "readme.sh")
	require.NoError(t, os.WriteFile(scriptFile, []byte("set -euo pipefail\n"+body), 0o600))
	// The pinned tools are built first: on a cold build cache that alone
	// takes minutes, which the script's bound must not count.
	buf, grpcurl := pinnedTool(t, root, "buf"), pinnedTool(t, root, "grpcurl")
	// A bound against a script that hangs, not a speed target: on a loaded
	// 2-core machine the block's tool calls (reflection, buf curl) took
	// over a minute.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", scriptFile)
	c.Dir = dir
	c.Env = append((&docBundle{}).environ(), "PAYMENTD_DOC_BUF="+buf, "PAYMENTD_DOC_GRPCURL="+grpcurl)
	out, err := c.CombinedOutput()
	require.NoError(t, err, "%s", out)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	require.Equal(t, []string{".data"}, left, "the examples leave no scratch files where they run")
	require.True(t, strings.HasSuffix(string(out), "\n"), "the output ends with a newline")
	return string(out)
}

// The README's quick start, its ```sh quickstart blocks joined into one
// script, runs against a live service and a fake epay gateway: the
// default addresses are replaced by the test's, and .data/dev.toml holds
// the admin password as `task run` writes it.
func TestREADMEQuickStartRuns(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	script := readmeScript(t, root, "quickstart")

	fake := epay.New(epay.Options{NotifyScale: 0.0001})
	require.NoError(t, fake.Start())
	t.Cleanup(fake.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cfg := testConfig(testdb.EmptyURL(t))
	cfg.Plugins.Dir = pluginDir(t)
	cfg.Server.PublicURL = "http://" + ln.Addr().String()
	cfg.Events.PollInterval = 100 * time.Millisecond
	r := startOn(t, cfg, ln)

	out := runREADMEScript(t, root, script, cfg.Bootstrap.AdminPassword,
		"http://127.0.0.1:50051", r.baseURL, "http://127.0.0.1:8090", fake.URL())
	require.Contains(t, out, `"status": "success"`)
	require.Regexp(t, `order [0-9a-f-]{36} is paid and active`, out)
}

// The README's "Calling the service" block runs as written against a live
// service, and each of the four credential kinds is accepted for what it
// is: the customer's token, the admin's cookie jar, the customer's API key,
// the admin's API key.
func TestREADMECallingTheServiceRuns(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	script := readmeScript(t, root, "calling")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	// The block calls a service that is running, not one's first start (the
	// quick start's test migrates an empty database): a migrated clone.
	cfg := testConfig(testdb.URL(t))
	cfg.Plugins.Dir = pluginDir(t)
	r := startOn(t, cfg, ln)

	out := runREADMEScript(t, root, script, cfg.Bootstrap.AdminPassword,
		"http://127.0.0.1:50051", r.baseURL, "GRPC=127.0.0.1:50051", "GRPC="+ln.Addr().String())
	// GetMe with the token (buf curl), the cookie jar (curl) and the key (grpcurl).
	require.Regexp(t, `(?s)"email": "bob@example.com".*"credential": "jwt"|"credential": "jwt".*"email": "bob@example.com"`, out)
	require.Regexp(t, `"role":"admin"[^}]*"credential":"session"|"credential":"session"[^}]*"role":"admin"`, out)
	require.Contains(t, out, `"canCreateApiKeys":true`, "the admin allowed Bob API keys")
	require.Contains(t, out, `"credential": "api_key"`)
	require.Contains(t, out, `"scope": "read"`, "GetMe with the admin's read key")
	require.Contains(t, out, `"asOf"`, "GetPaymentStats with the admin's read key")
	require.Contains(t, out, `"code":"not_found"`, "GetPayment of an unknown id")
	require.Equal(t, 2, strings.Count(out, "HTTP/1.1 200 OK"), "both probes answer 200:\n%s", out)
}

// renewalProduct is the product of the renewal examples' order id.
func renewalProduct(t *testing.T, ctx context.Context, orders orderpbconnect.OrderServiceClient, id string, c credential) string {
	t.Helper()
	got, err := orders.GetOrder(ctx, with(&orderpb.GetOrderRequest{Id: id}, c))
	require.NoError(t, err)
	return got.Msg.GetOrder().GetProductId()
}
