package provider

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rustbill/paymentd/internal/fakes/fakekit"
)

// Options configure a Server. The zero value is usable.
type Options struct {
	// Addr is the listen address; empty means 127.0.0.1:0.
	Addr string
	// Token is the bearer token every call must carry; empty means
	// DefaultToken.
	Token string
	// ProvisionDelay keeps a new instance "provisioning" this long (by Now)
	// before it reports "running"; 0 means running at once.
	ProvisionDelay time.Duration
	// Logger receives one line per state change; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// DefaultToken is the bearer token when Options.Token is empty.
const DefaultToken = "prov-t0ken"

// Instance statuses, as the API reports them.
const (
	StatusProvisioning = "provisioning"
	StatusRunning      = "running"
	StatusStopped      = "stopped"
	StatusSuspended    = "suspended"
	StatusTerminated   = "terminated"
)

// ErrClosed is returned by Start after Close.
var ErrClosed = errors.New("provider fake: server closed")

// Instance is a copy of one instance as the fake holds it.
type Instance struct {
	ID         string    `json:"id"`
	OrderID    string    `json:"order_id"`
	Plan       string    `json:"plan"`
	CustomerID string    `json:"customer_id"`
	Status     string    `json:"status"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
	IP         string    `json:"ip"`
}

// UsageItem is one line of GET /v1/instances/{id}/usage. Quantities are
// decimal strings, never floats.
type UsageItem struct {
	Metric   string `json:"metric"`
	Quantity string `json:"quantity"`
	Unit     string `json:"unit"`
}

// Fault is injected into the API: a request whose path starts with Prefix
// and whose method is Method ("" matches all) waits Delay and then, when
// Status is set, answers Status instead of being handled.
type Fault struct {
	Method string
	Prefix string
	Delay  time.Duration
	Status int
	Times  int // requests it affects; 0 means until ClearFaults
}

// Server is the fake provider API. It is safe for concurrent use.
type Server struct {
	opts Options
	log  *slog.Logger
	now  func() time.Time
	host *fakekit.Host

	mu          sync.Mutex
	instances   map[string]*instance
	byOrder     map[string]string // order_id → instance id
	provisions  map[string]int    // order_id → POST /v1/instances received
	actions     map[string]int    // "id/action" → calls
	failOrders  map[string]failure
	holds       map[string]*Hold // order_id → a provisioning held until released
	faults      []*Fault
	seq         int
	unauthCalls int
}

type instance struct {
	Instance
	usage []UsageItem
}

type failure struct {
	status int
	msg    string
}

// New builds a server; Start makes it listen.
func New(opts Options) *Server {
	if opts.Token == "" {
		opts.Token = DefaultToken
	}
	s := &Server{
		opts:       opts,
		log:        opts.Logger,
		now:        opts.Now,
		instances:  map[string]*instance{},
		byOrder:    map[string]string{},
		provisions: map[string]int{},
		actions:    map[string]int{},
		failOrders: map[string]failure{},
		holds:      map[string]*Hold{},
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = s.log.With("component", "fake_provider")
	if s.now == nil {
		s.now = time.Now
	}
	s.host = fakekit.NewHost("provider", "", ErrClosed, s.log)
	return s
}

// Start listens on Options.Addr and serves in the background.
func (s *Server) Start() error { return s.host.Start(s.opts.Addr, s.Handler()) }

// URL is the API's base URL (the plugin's api_url).
func (s *Server) URL() string { return s.host.URL() }

// Token is the bearer token the API expects.
func (s *Server) Token() string { return s.opts.Token }

// Close stops the server and waits for its goroutines; it may be called
// more than once.
func (s *Server) Close() { s.host.Close() }

// --- test hooks -----------------------------------------------------------

// FailProvision makes POST /v1/instances for orderID answer status (422
// when 0) with msg, until ClearProvisionFailure.
func (s *Server) FailProvision(orderID string, status int, msg string) {
	if status == 0 {
		status = http.StatusUnprocessableEntity
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failOrders[orderID] = failure{status: status, msg: msg}
}

// Hold is a provisioning request held before it is handled: Arrived is
// closed once the request is in, and Release lets it (and later ones for
// the same order) through.
type Hold struct {
	Arrived chan struct{}
	once    sync.Once
	release chan struct{}
	done    sync.Once
}

// Release lets the held request go on.
func (h *Hold) Release() { h.done.Do(func() { close(h.release) }) }

// HoldProvision holds POST /v1/instances for orderID until the returned
// hold is released: a test can then act while the provider is at work.
func (s *Server) HoldProvision(orderID string) *Hold {
	h := &Hold{Arrived: make(chan struct{}), release: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holds[orderID] = h
	return h
}

// ClearProvisionFailure undoes FailProvision.
func (s *Server) ClearProvisionFailure(orderID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.failOrders, orderID)
}

// InjectFault adds a fault; the first matching one applies.
func (s *Server) InjectFault(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &f)
}

// ClearFaults removes every injected fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// ProvisionRequests is how many POST /v1/instances arrived for orderID
// (authenticated, failures included).
func (s *Server) ProvisionRequests(orderID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.provisions[orderID]
}

// InstancesFor is how many instances exist for orderID: at most one, since
// provisioning is idempotent on order_id.
func (s *Server) InstancesFor(orderID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, in := range s.instances {
		if in.OrderID == orderID {
			n++
		}
	}
	return n
}

// ActionCalls is how many POST /v1/instances/{id}/{action} arrived.
func (s *Server) ActionCalls(id, action string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.actions[id+"/"+action]
}

// UnauthorizedCalls is how many requests were refused for their token.
func (s *Server) UnauthorizedCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unauthCalls
}

// Instance returns the instance with this id.
func (s *Server) Instance(id string) (Instance, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[id]
	if !ok {
		return Instance{}, false
	}
	return s.viewLocked(in), true
}

// Instances returns every instance, by id.
func (s *Server) Instances() []Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Instance, 0, len(s.instances))
	for _, in := range s.instances {
		out = append(out, s.viewLocked(in))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// SetStatus forces an instance's status (e.g. "error" to simulate a crash).
func (s *Server) SetStatus(id, status string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[id]
	if ok {
		in.Status = status
		in.UpdatedAt = s.now()
	}
	return ok
}

// SetUsage replaces the usage report of an instance.
func (s *Server) SetUsage(id string, items []UsageItem) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[id]
	if ok {
		in.usage = append([]UsageItem(nil), items...)
	}
	return ok
}

// viewLocked reports provisioning → running once ProvisionDelay has passed.
func (s *Server) viewLocked(in *instance) Instance {
	if in.Status == StatusProvisioning && !s.now().Before(in.CreatedAt.Add(s.opts.ProvisionDelay)) {
		in.Status = StatusRunning
		in.UpdatedAt = s.now()
	}
	return in.Instance
}

// --- API ------------------------------------------------------------------

// Handler is the API's handler; Start serves it.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/ping", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"ok": true})
	})
	mux.HandleFunc("POST /v1/instances", s.handleProvision)
	mux.HandleFunc("GET /v1/instances/{id}", s.handleGet)
	mux.HandleFunc("POST /v1/instances/{id}/{action}", s.handleAction)
	mux.HandleFunc("POST /v1/instances/{id}/plan", s.handlePlan)
	mux.HandleFunc("GET /v1/instances/{id}/usage", s.handleUsage)
	return s.host.Guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(r) {
			writeError(w, http.StatusUnauthorized, "unauthorized", "missing or wrong bearer token")
			return
		}
		if s.fault(w, r) {
			return
		}
		mux.ServeHTTP(w, r)
	}))
}

func (s *Server) authorized(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if ok && subtle.ConstantTimeCompare([]byte(tok), []byte(s.opts.Token)) == 1 {
		return true
	}
	s.mu.Lock()
	s.unauthCalls++
	s.mu.Unlock()
	return false
}

// fault applies an injected fault; true when it answered the request.
func (s *Server) fault(w http.ResponseWriter, r *http.Request) bool {
	s.mu.Lock()
	var f *Fault
	for i, c := range s.faults {
		if (c.Method != "" && c.Method != r.Method) || !strings.HasPrefix(r.URL.Path, c.Prefix) {
			continue
		}
		cp := *c
		f = &cp
		if c.Times > 0 {
			c.Times--
			if c.Times == 0 {
				s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
			}
		}
		break
	}
	s.mu.Unlock()
	if f == nil {
		return false
	}
	if f.Delay > 0 && !s.host.Sleep(r.Context(), f.Delay) {
		return true
	}
	if f.Status == 0 {
		return false
	}
	writeError(w, f.Status, "injected", http.StatusText(f.Status))
	return true
}

type provisionRequest struct {
	OrderID    string `json:"order_id"`
	Plan       string `json:"plan"`
	CustomerID string `json:"customer_id"`
}

func (s *Server) handleProvision(w http.ResponseWriter, r *http.Request) {
	var req provisionRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "body is not JSON")
		return
	}
	if req.OrderID == "" || req.Plan == "" {
		writeError(w, http.StatusBadRequest, "bad_request", "order_id and plan are required")
		return
	}
	s.mu.Lock()
	hold := s.holds[req.OrderID]
	s.mu.Unlock()
	if hold != nil {
		hold.once.Do(func() { close(hold.Arrived) })
		select {
		case <-hold.release:
		case <-r.Context().Done():
			return
		case <-s.host.Context().Done():
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.provisions[req.OrderID]++
	if f, ok := s.failOrders[req.OrderID]; ok {
		s.log.Info("provisioning refused", "order_id", req.OrderID, "status", f.status)
		writeError(w, f.status, "provisioning_failed", f.msg)
		return
	}
	// Idempotent on order_id: a repeat (a retry after a lost answer, a
	// second delivery of the event) gets the instance that already exists.
	if id, ok := s.byOrder[req.OrderID]; ok {
		writeJSON(w, http.StatusOK, s.viewLocked(s.instances[id]))
		return
	}
	s.seq++
	now := s.now()
	in := &instance{Instance: Instance{
		ID:         fmt.Sprintf("inst-%04d", s.seq),
		OrderID:    req.OrderID,
		Plan:       req.Plan,
		CustomerID: req.CustomerID,
		Status:     StatusProvisioning,
		CreatedAt:  now,
		UpdatedAt:  now,
		IP:         fmt.Sprintf("198.51.100.%d", s.seq%250+1),
	}}
	in.usage = []UsageItem{
		{Metric: "cpu_hours", Quantity: "0.00", Unit: "h"},
		{Metric: "traffic_out", Quantity: "0.00", Unit: "GB"},
	}
	s.instances[in.ID] = in
	s.byOrder[req.OrderID] = in.ID
	s.log.Info("instance provisioned", "order_id", req.OrderID, "instance", in.ID)
	writeJSON(w, http.StatusCreated, s.viewLocked(in))
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[r.PathValue("id")]
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "no such instance")
		return
	}
	writeJSON(w, http.StatusOK, s.viewLocked(in))
}

// transitions: action → statuses it may start from, and where it leads.
// Repeating an action whose target is the current status succeeds without
// change (stop on a stopped instance), so the plugin may retry it; reboot
// is the exception, it is not idempotent.
var transitions = map[string]struct {
	from []string
	to   string
}{
	"start":     {[]string{StatusStopped}, StatusRunning},
	"stop":      {[]string{StatusRunning}, StatusStopped},
	"reboot":    {[]string{StatusRunning}, StatusRunning},
	"suspend":   {[]string{StatusRunning, StatusStopped}, StatusSuspended},
	"unsuspend": {[]string{StatusSuspended}, StatusRunning},
	"terminate": {[]string{StatusProvisioning, StatusRunning, StatusStopped, StatusSuspended, "error"}, StatusTerminated},
}

func (s *Server) handleAction(w http.ResponseWriter, r *http.Request) {
	id, action := r.PathValue("id"), r.PathValue("action")
	tr, ok := transitions[action]
	if !ok {
		writeError(w, http.StatusNotFound, "unknown_action", "unknown action "+action)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[id]
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "no such instance")
		return
	}
	s.actions[id+"/"+action]++
	cur := s.viewLocked(in).Status
	if cur == tr.to && action != "reboot" {
		writeJSON(w, http.StatusOK, in.Instance)
		return
	}
	allowed := false
	for _, f := range tr.from {
		allowed = allowed || f == cur
	}
	if !allowed {
		writeError(w, http.StatusConflict, "invalid_state", fmt.Sprintf("cannot %s an instance that is %s", action, cur))
		return
	}
	in.Status = tr.to
	in.UpdatedAt = s.now()
	s.log.Info("instance action", "instance", id, "action", action, "status", in.Status)
	writeJSON(w, http.StatusOK, in.Instance)
}

// handlePlan is POST /v1/instances/{id}/plan {"plan"}: the instance moves
// to the plan (a plan change; counted as the action "plan"). Asking for
// the plan it has succeeds without change; a terminated instance is 409.
func (s *Server) handlePlan(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var req struct {
		Plan string `json:"plan"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil || req.Plan == "" {
		writeError(w, http.StatusBadRequest, "invalid_request", "plan is required")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[id]
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "no such instance")
		return
	}
	s.actions[id+"/plan"]++
	if cur := s.viewLocked(in).Status; cur == StatusTerminated {
		writeError(w, http.StatusConflict, "invalid_state", "cannot change the plan of a terminated instance")
		return
	}
	if in.Plan != req.Plan {
		in.Plan = req.Plan
		in.UpdatedAt = s.now()
		s.log.Info("instance plan changed", "instance", id, "plan", in.Plan)
	}
	writeJSON(w, http.StatusOK, s.viewLocked(in))
}

func (s *Server) handleUsage(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[r.PathValue("id")]
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "no such instance")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"instance_id": in.ID,
		"from":        r.URL.Query().Get("from"),
		"to":          r.URL.Query().Get("to"),
		"items":       append([]UsageItem{}, in.usage...),
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}
