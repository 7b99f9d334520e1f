package epay

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rustbill/paymentd/internal/fakes/fakekit"
	"github.com/rustbill/paymentd/internal/money"
)

// Options configure a Server. The zero value is usable: one merchant
// (pid "1001", key "k3y"), the real notify schedule, GET notifies.
type Options struct {
	// Addr is the listen address; empty means 127.0.0.1:0 (a free port).
	Addr string
	// PublicURL is the base written into payurl/qrcode; empty means
	// http://<listener address>. Set it when the demo listens on 0.0.0.0,
	// or when Handler is mounted on a server of the caller's.
	PublicURL string
	// Merchants maps pid → key. Empty means DefaultPID → DefaultKey.
	Merchants map[string]string
	// NotifySchedule is the wait before each notify attempt, the first one
	// counted from the payment. Nil means DefaultNotifySchedule().
	NotifySchedule []time.Duration
	// NotifyScale multiplies every wait of the schedule; 0 means 1. Tests use
	// something like 0.0001 so the two-hour schedule runs in under a second.
	NotifyScale float64
	// NotifyMethod is GET (default, as most deployments) or POST (form body).
	NotifyMethod string
	// NotifyTimeout bounds one notify attempt; 0 means 10 s.
	NotifyTimeout time.Duration
	// APITradeNo makes paid orders carry an api_trade_no (the upstream
	// channel's transaction id), in notifies and queries, as some
	// deployments send.
	APITradeNo bool
	// Client sends notifies; nil means a private client closed with the
	// server.
	Client *http.Client
	// Logger receives one line per state change; nil discards.
	Logger *slog.Logger
	// Now is the clock for addtime/endtime; nil means time.Now.
	Now func() time.Time
}

// Defaults used when Options leave them empty.
const (
	DefaultPID = "1001"
	DefaultKey = "k3y"
)

// DefaultNotifySchedule is the retry schedule of epay v1 deployments: at
// once, then 15 s, 15 s, 30 s, 3 min, 10 min, 20 min, 30 min, 30 min, 30 min
// and 60 min later (11 attempts, about 3.5 hours).
func DefaultNotifySchedule() []time.Duration {
	return []time.Duration{
		0, 15 * time.Second, 15 * time.Second, 30 * time.Second,
		3 * time.Minute, 10 * time.Minute, 20 * time.Minute,
		30 * time.Minute, 30 * time.Minute, 30 * time.Minute, 60 * time.Minute,
	}
}

// Errors of the test hooks.
var (
	ErrUnknownOrder = errors.New("epay fake: unknown order")
	ErrAlreadyPaid  = errors.New("epay fake: order already paid")
	ErrNotPaid      = errors.New("epay fake: order not paid")
	ErrClosed       = errors.New("epay fake: server closed")
)

// Order is a copy of one order as the fake holds it.
type Order struct {
	PID        string
	TradeNo    string // the fake's id, "2026…"
	OutTradeNo string // the merchant's id (paymentd: the payment id)
	APITradeNo string // set when paid and Options.APITradeNo
	Type       string
	Name       string
	Money      string // exactly as the merchant sent it
	NotifyURL  string
	ReturnURL  string
	Param      string
	ClientIP   string
	Device     string
	SiteName   string
	Paid       bool
	AddTime    time.Time
	EndTime    time.Time // zero while unpaid
	Refunded   string    // sum of refunds, two decimals
}

// Refund is one accepted act=refund.
type Refund struct {
	PID        string
	TradeNo    string
	OutTradeNo string
	Money      string
	At         time.Time
}

// Notification is one notify attempt and the merchant's answer; Acked
// means the answer was exactly "success" (spaces trimmed).
type Notification = fakekit.Notification

// Fault is injected into the merchant API (/mapi.php, /api.php,
// /submit.php). A request matching Path (and Act for /api.php) waits Delay
// and then, when Status is set, answers Status with Body instead of being
// handled.
type Fault struct {
	Path   string // "" matches every path
	Act    string // "" matches every act
	Delay  time.Duration
	Status int
	Body   string
	Times  int // requests it affects; 0 means until ClearFaults
	// Hangup closes the connection after Delay without any answer (a
	// gateway that is not there, or dies mid-request).
	Hangup bool
	// Arrived, when set, is sent a value (without blocking: give it room)
	// as each request the fault applies to arrives, before its Delay: a
	// test waits for the gateway to have the request instead of guessing.
	Arrived chan<- struct{}
}

// Server is the fake epay v1 gateway. It is safe for concurrent use.
type Server struct {
	opts   Options
	log    *slog.Logger
	now    func() time.Time
	host   *fakekit.Host     // listening, handlers and notify rounds
	notify *fakekit.Notifier // the rounds and every attempt

	mu         sync.Mutex
	orders     map[string]*order // by trade_no
	byOut      map[string]string // pid + "\x00" + out_trade_no → trade_no
	seq        int
	refunds    []Refund
	faults     []*Fault
	refundCode int
}

type order struct {
	Order
	paidCents     int64
	refundedCents int64
}

var cst = time.FixedZone("CST", 8*3600)

// New builds a server; Start makes it listen.
func New(opts Options) *Server {
	if len(opts.Merchants) == 0 {
		opts.Merchants = map[string]string{DefaultPID: DefaultKey}
	} else {
		m := make(map[string]string, len(opts.Merchants))
		for k, v := range opts.Merchants {
			m[k] = v
		}
		opts.Merchants = m
	}
	if opts.NotifySchedule == nil {
		opts.NotifySchedule = DefaultNotifySchedule()
	}
	opts.NotifyMethod = strings.ToUpper(opts.NotifyMethod)
	if opts.NotifyMethod != http.MethodPost {
		opts.NotifyMethod = http.MethodGet
	}
	s := &Server{
		opts:       opts,
		log:        opts.Logger,
		now:        opts.Now,
		orders:     map[string]*order{},
		byOut:      map[string]string{},
		refundCode: 1,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = s.log.With("component", "fake_epay")
	if s.now == nil {
		s.now = time.Now
	}
	s.host = fakekit.NewHost("epay", opts.PublicURL, ErrClosed, s.log)
	s.notify = fakekit.NewNotifier(s.host, fakekit.NotifyOptions{
		Schedule:    opts.NotifySchedule,
		Scale:       opts.NotifyScale,
		Timeout:     opts.NotifyTimeout,
		Method:      opts.NotifyMethod,
		ContentType: "application/x-www-form-urlencoded",
		UserAgent:   "epay-fake-notify/1.0",
		// epay looks at the body only: the merchant acknowledges with "success".
		Ack:    "success",
		Client: opts.Client,
	})
	return s
}

// Start listens on Options.Addr and serves in the background.
func (s *Server) Start() error { return s.host.Start(s.opts.Addr, s.Handler()) }

// URL is the base URL of the merchant API (the plugin's api_url).
func (s *Server) URL() string { return s.host.URL() }

// Close stops listening, cancels pending notify retries and waits for every
// goroutine the server started. It may be called more than once.
func (s *Server) Close() { s.host.Close() }

// Handler is the fake's HTTP handler, for mounting elsewhere; Start serves it.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/mapi.php", s.faulty(s.handleMAPI))
	mux.HandleFunc("/submit.php", s.faulty(s.handleSubmit))
	mux.HandleFunc("/submit.php/pay", s.handlePay)
	mux.HandleFunc("/api.php", s.faulty(s.handleAPI))
	return s.host.Guard(mux)
}

// --- test hooks -----------------------------------------------------------

// Pay marks an order paid (trade_status TRADE_SUCCESS), as a buyer pressing
// "Pay" would, and starts its notify round. id is a trade_no or an
// out_trade_no (of any merchant).
func (s *Server) Pay(id string) error {
	s.mu.Lock()
	o := s.lookupLocked("", id)
	if o == nil {
		s.mu.Unlock()
		return ErrUnknownOrder
	}
	if o.Paid {
		s.mu.Unlock()
		return ErrAlreadyPaid
	}
	o.Paid = true
	o.EndTime = s.now()
	o.paidCents, _ = fakekit.ParseCents(o.Money, maxMoneyDigits)
	if s.opts.APITradeNo {
		// Shaped like an upstream channel id (wxpay ids start with 4200).
		o.APITradeNo = "4200" + o.TradeNo
	}
	tradeNo, out := o.TradeNo, o.OutTradeNo
	s.mu.Unlock()
	s.log.Info("order paid", "trade_no", tradeNo, "out_trade_no", out)
	return s.startNotify(tradeNo)
}

// Renotify starts a new notify round for a paid order, like the
// "re-send notification" button of an epay merchant console.
func (s *Server) Renotify(id string) error {
	s.mu.Lock()
	o := s.lookupLocked("", id)
	if o == nil {
		s.mu.Unlock()
		return ErrUnknownOrder
	}
	if !o.Paid {
		s.mu.Unlock()
		return ErrNotPaid
	}
	tradeNo := o.TradeNo
	s.mu.Unlock()
	return s.startNotify(tradeNo)
}

// DropNotify makes every notify attempt, while on, get "lost": recorded with
// Dropped set, nothing sent, and the round goes on to its next retry.
func (s *Server) DropNotify(drop bool) { s.notify.Drop(drop) }

// SetRefundCode sets the code a successful act=refund answers: 1 or 0. Real
// deployments differ; both mean success.
func (s *Server) SetRefundCode(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refundCode = code
}

// InjectFault adds a fault to the merchant API; the first matching fault
// applies to a request.
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

// Notifications returns every notify attempt so far, in order.
func (s *Server) Notifications() []Notification { return s.notify.Notifications() }

// NotifyRoundsEnded counts the notify rounds (Pay, Renotify) that have
// ended: no attempt of theirs comes after.
func (s *Server) NotifyRoundsEnded() int { return s.notify.RoundsEnded() }

// Refunds returns every accepted refund, in order.
func (s *Server) Refunds() []Refund {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Refund(nil), s.refunds...)
}

// Order returns the order with this trade_no or out_trade_no.
func (s *Server) Order(id string) (Order, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.lookupLocked("", id)
	if o == nil {
		return Order{}, false
	}
	return s.snapshotLocked(o), true
}

// Orders returns every order, oldest first.
func (s *Server) Orders() []Order {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Order, 0, len(s.orders))
	for _, o := range s.orders {
		out = append(out, s.snapshotLocked(o))
	}
	// trade_no grows with creation.
	sort.Slice(out, func(i, j int) bool { return out[i].TradeNo < out[j].TradeNo })
	return out
}

func (s *Server) snapshotLocked(o *order) Order {
	c := o.Order
	c.Refunded = money.FormatCents(o.refundedCents)
	return c
}

// lookupLocked finds an order by trade_no, or by out_trade_no of pid (any
// merchant when pid is empty).
func (s *Server) lookupLocked(pid, id string) *order {
	if id == "" {
		return nil
	}
	if o, ok := s.orders[id]; ok && (pid == "" || o.PID == pid) {
		return o
	}
	if pid != "" {
		return s.orders[s.byOut[pid+"\x00"+id]]
	}
	for _, o := range s.orders {
		if o.OutTradeNo == id {
			return o
		}
	}
	return nil
}

// --- merchant API ---------------------------------------------------------

type apiError struct{ msg string }

func (e apiError) Error() string { return e.msg }

var (
	payTypes  = map[string]bool{"alipay": true, "wxpay": true, "qqpay": true}
	outNoRE   = regexp.MustCompile(`^[0-9A-Za-z_\-.|]{1,64}$`)
	maxNameSz = 127
)

// maxMoneyDigits bounds the integer part of a money ("1", "1.5", "1.00").
const maxMoneyDigits = 10

// create validates a signed create request (mapi.php or submit.php) and
// returns the order, an existing one when the merchant repeats an unpaid
// order with the same out_trade_no and money.
func (s *Server) create(p url.Values) (Order, error) {
	pid := p.Get("pid")
	s.mu.Lock()
	defer s.mu.Unlock()
	key, ok := s.opts.Merchants[pid]
	if pid == "" || !ok {
		return Order{}, apiError{"商户不存在 (unknown pid)"}
	}
	if !verify(p, key) {
		return Order{}, apiError{"签名错误"}
	}
	typ := p.Get("type")
	if !payTypes[typ] {
		return Order{}, apiError{"支付方式不存在 (type)"}
	}
	out := p.Get("out_trade_no")
	if !outNoRE.MatchString(out) {
		return Order{}, apiError{"订单号(out_trade_no)格式错误"}
	}
	nu := p.Get("notify_url")
	if u, err := url.Parse(nu); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Order{}, apiError{"通知地址(notify_url)不能为空"}
	}
	name := p.Get("name")
	if name == "" || len(name) > maxNameSz {
		return Order{}, apiError{"商品名称(name)不能为空"}
	}
	money := p.Get("money")
	cents, ok := fakekit.ParseCents(money, maxMoneyDigits)
	if !ok || cents <= 0 {
		return Order{}, apiError{"金额(money)不合法"}
	}
	if tn, ok := s.byOut[pid+"\x00"+out]; ok {
		o := s.orders[tn]
		switch {
		case o.Paid:
			return Order{}, apiError{"该订单已完成支付"}
		case o.Money != money || o.Type != typ:
			return Order{}, apiError{"订单号已存在"}
		}
		return s.snapshotLocked(o), nil
	}
	s.seq++
	now := s.now()
	o := &order{Order: Order{
		PID:        pid,
		TradeNo:    now.In(cst).Format("20060102150405") + fmt.Sprintf("%05d", s.seq),
		OutTradeNo: out,
		Type:       typ,
		Name:       name,
		Money:      money,
		NotifyURL:  nu,
		ReturnURL:  p.Get("return_url"),
		Param:      p.Get("param"),
		ClientIP:   p.Get("clientip"),
		Device:     p.Get("device"),
		SiteName:   p.Get("sitename"),
		AddTime:    now,
	}}
	s.orders[o.TradeNo] = o
	s.byOut[pid+"\x00"+out] = o.TradeNo
	s.log.Info("order created", "trade_no", o.TradeNo, "out_trade_no", out, "pid", pid, "money", money)
	return s.snapshotLocked(o), nil
}

func (s *Server) handleMAPI(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeJSON(w, map[string]any{"code": -1, "msg": "请使用POST方式提交"})
		return
	}
	if err := r.ParseForm(); err != nil {
		writeJSON(w, map[string]any{"code": -1, "msg": "参数错误"})
		return
	}
	o, err := s.create(r.PostForm)
	if err != nil {
		writeJSON(w, map[string]any{"code": -1, "msg": err.Error()})
		return
	}
	resp := map[string]any{"code": 1, "msg": "succ", "trade_no": o.TradeNo}
	pay := s.URL() + "/submit.php?trade_no=" + url.QueryEscape(o.TradeNo)
	if o.Type == "wxpay" {
		// A real wxpay answer is a weixin:// code to scan; the fake's is a
		// link to its payment page so the demo can still be clicked through.
		resp["qrcode"] = pay
	} else {
		resp["payurl"] = pay
	}
	writeJSON(w, resp)
}

func (s *Server) handleAPI(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeJSON(w, map[string]any{"code": -1, "msg": "参数错误"})
		return
	}
	switch r.Form.Get("act") {
	case "order":
		writeJSON(w, s.apiOrder(r.Form))
	case "refund":
		if r.Method != http.MethodPost {
			writeJSON(w, map[string]any{"code": -1, "msg": "请使用POST方式提交"})
			return
		}
		writeJSON(w, s.apiRefund(r.Form))
	default:
		writeJSON(w, map[string]any{"code": -1, "msg": "act不存在"})
	}
}

// authLocked checks pid and key of an api.php call.
func (s *Server) authLocked(p url.Values) error {
	key, ok := s.opts.Merchants[p.Get("pid")]
	if !ok {
		return apiError{"商户不存在"}
	}
	if p.Get("key") == "" || p.Get("key") != key {
		return apiError{"KEY校验失败"}
	}
	return nil
}

func (s *Server) findLocked(p url.Values) *order {
	pid := p.Get("pid")
	if tn := p.Get("trade_no"); tn != "" {
		if o := s.orders[tn]; o != nil && o.PID == pid {
			return o
		}
		return nil
	}
	if out := p.Get("out_trade_no"); out != "" {
		return s.orders[s.byOut[pid+"\x00"+out]]
	}
	return nil
}

func (s *Server) apiOrder(p url.Values) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.authLocked(p); err != nil {
		return map[string]any{"code": -1, "msg": err.Error()}
	}
	o := s.findLocked(p)
	if o == nil {
		return map[string]any{"code": -1, "msg": "订单号不存在"}
	}
	status := 0
	var endtime any
	if o.Paid {
		status = 1
		endtime = o.EndTime.In(cst).Format(time.DateTime)
	}
	resp := map[string]any{
		"code":         1,
		"msg":          "succ",
		"trade_no":     o.TradeNo,
		"out_trade_no": o.OutTradeNo,
		"type":         o.Type,
		"pid":          o.PID,
		"addtime":      o.AddTime.In(cst).Format(time.DateTime),
		"endtime":      endtime,
		"name":         o.Name,
		"money":        o.Money,
		"param":        o.Param,
		"buyer":        "",
		"status":       status,
	}
	if o.APITradeNo != "" {
		resp["api_trade_no"] = o.APITradeNo
	}
	return resp
}

func (s *Server) apiRefund(p url.Values) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	fail := func(msg string) map[string]any { return map[string]any{"code": -1, "msg": msg} }
	if err := s.authLocked(p); err != nil {
		return fail(err.Error())
	}
	o := s.findLocked(p)
	if o == nil {
		return fail("订单号不存在")
	}
	if !o.Paid {
		return fail("订单未支付")
	}
	cents, ok := fakekit.ParseCents(p.Get("money"), maxMoneyDigits)
	if !ok || cents <= 0 {
		return fail("退款金额(money)不合法")
	}
	if cents > o.paidCents-o.refundedCents {
		return fail("退款金额超过可退金额")
	}
	o.refundedCents += cents
	s.refunds = append(s.refunds, Refund{PID: o.PID, TradeNo: o.TradeNo, OutTradeNo: o.OutTradeNo, Money: p.Get("money"), At: s.now()})
	s.log.Info("refund accepted", "trade_no", o.TradeNo, "money", p.Get("money"))
	return map[string]any{"code": s.refundCode, "msg": "退款成功"}
}

// faulty applies injected faults before h.
func (s *Server) faulty(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f := s.takeFault(r)
		if f == nil {
			h(w, r)
			return
		}
		if f.Arrived != nil {
			select {
			case f.Arrived <- struct{}{}:
			default:
			}
		}
		if f.Delay > 0 && !s.host.Sleep(r.Context(), f.Delay) {
			return
		}
		if f.Hangup {
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					_ = conn.Close()
					return
				}
			}
			panic(http.ErrAbortHandler) // HTTP/2: reset the stream
		}
		if f.Status == 0 {
			h(w, r)
			return
		}
		body := f.Body
		if body == "" {
			body = http.StatusText(f.Status)
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(f.Status)
		_, _ = io.WriteString(w, body)
	}
}

func (s *Server) takeFault(r *http.Request) *Fault {
	act := r.URL.Query().Get("act")
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.faults {
		if (f.Path != "" && f.Path != r.URL.Path) || (f.Act != "" && f.Act != act) {
			continue
		}
		c := *f
		if f.Times > 0 {
			f.Times--
			if f.Times == 0 {
				s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
			}
		}
		return &c
	}
	return nil
}

// --- helpers --------------------------------------------------------------

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(v)
}
