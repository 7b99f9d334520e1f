package wechatpay

import (
	"bytes"
	"context"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/rustbill/paymentd/internal/fakes/cashier"
	"github.com/rustbill/paymentd/internal/fakes/fakekit"
	"github.com/rustbill/paymentd/internal/money"
)

// Merchant is a merchant registered with the fake: its mchid, the AppID
// bound to it, its merchant certificate's serial number and public key,
// and its APIv3 key (which seals its notifications).
type Merchant struct {
	MchID     string
	AppID     string
	SerialNo  string
	PublicKey *rsa.PublicKey
	APIv3Key  string
}

// Defaults used when Options leave Merchants empty.
const (
	DefaultMchID     = "1900000109"
	DefaultAppID     = "wxd678efh567hg6787"
	DefaultSerialNo  = "5157F09EFDC096DE15EBE81A47057A7232F1B8E1"
	DefaultAPIv3Key  = "paymentd0fake0wechatpay0apiv3key"
	DefaultKeySerial = "PUB_KEY_ID_0119000001092026112900000000000001"
)

// DefaultNotifySchedule is WeChat Pay's: 15s/15s/30s/3m/10m/20m/30m/30m/
// 30m/60m/3h/3h/3h/6h/6h, the first counted from the payment (sent at
// once here: the first wait is 0).
func DefaultNotifySchedule() []time.Duration {
	return []time.Duration{0, 15 * time.Second, 15 * time.Second, 30 * time.Second, 3 * time.Minute,
		10 * time.Minute, 20 * time.Minute, 30 * time.Minute, 30 * time.Minute, 30 * time.Minute,
		time.Hour, 3 * time.Hour, 3 * time.Hour, 3 * time.Hour, 6 * time.Hour, 6 * time.Hour}
}

// Options configure a Server; the zero value is usable (one merchant whose
// key New generates, a generated WeChat Pay key, the real schedule).
type Options struct {
	Addr      string // empty: 127.0.0.1:0
	PublicURL string // the base of h5_url; empty: http://<listener>
	Merchants []Merchant
	// Key is "WeChat Pay's" signing key; its public half is the WeChat Pay
	// public key merchants configure, named KeySerial.
	Key       *rsa.PrivateKey
	KeySerial string
	// RefundsPending answers refunds PROCESSING until CompleteRefund.
	RefundsPending bool
	// AnswerSkew moves the Wechatpay-Timestamp of every answer (a test
	// ages them; the signature covers the moved time).
	AnswerSkew time.Duration
	// EditAnswer, when set, may change a successful answer's JSON object
	// before it is signed (a test's genuine answer that says something
	// else: another refund amount, another order).
	EditAnswer     func(path string, doc map[string]any)
	NotifySchedule []time.Duration
	NotifyScale    float64
	NotifyTimeout  time.Duration
	Client         *http.Client
	Logger         *slog.Logger
	Now            func() time.Time
}

// Trade states and refund statuses, as WeChat Pay names them.
const (
	NotPay  = "NOTPAY"
	Success = "SUCCESS"
	Refund  = "REFUND"
	Closed  = "CLOSED"

	RefundProcessing = "PROCESSING"
	RefundSuccess    = "SUCCESS"
	RefundClosed     = "CLOSED"
)

// Errors of the test hooks.
var (
	ErrUnknownOrder = errors.New("wechatpay fake: unknown order")
	ErrNotPayable   = errors.New("wechatpay fake: order not payable")
	ErrNotPaid      = errors.New("wechatpay fake: order not paid")
	ErrClosed       = errors.New("wechatpay fake: server closed")
)

// Order is a copy of one order as the fake holds it.
type Order struct {
	MchID, AppID   string
	TradeType      string // NATIVE or MWEB (H5)
	OutTradeNo     string
	TransactionID  string // set when paid
	Description    string
	Total          int64 // fen
	PayerTotal     int64 // fen, what the buyer paid (Total unless a test says otherwise)
	NotifyURL      string
	Attach         string
	TimeExpire     string
	PayerClientIP  string
	State          string
	SuccessTime    time.Time
	Refunded       int64  // fen
	CreatedRequest string // the create call's body
}

// RefundRecord is one refund as the fake holds it.
type RefundRecord struct {
	MchID, OutTradeNo, TransactionID string
	OutRefundNo, RefundID            string
	Refund, Total                    int64 // fen
	Status                           string
	NotifyURL                        string
	CreateTime, SuccessTime          time.Time
}

// Request is one API call as received.
type Request struct {
	Method, URI, Body string
	Auth              Authorization
	Verified          bool // the signature, serial and timestamp checked out
	Status            int  // what the fake answered
}

// Notification is one notification attempt and the merchant's answer.
type Notification struct {
	OutTradeNo string
	EventType  string
	Attempt    int
	URL        string
	Body       string
	Header     http.Header // the signed headers sent
	At         time.Time
	Dropped    bool
	Status     int
	Answer     string
	Err        string
	Acked      bool // a 2xx answer
}

// Server is the fake WeChat Pay API v3. It is safe for concurrent use.
type Server struct {
	opts      Options
	key       *rsa.PrivateKey
	merchKey  *rsa.PrivateKey // the generated default merchant's key, or nil
	merchants map[string]Merchant
	log       *slog.Logger
	now       func() time.Time
	host      *fakekit.Host
	client    *http.Client
	drop      bool

	mu       sync.Mutex
	orders   map[string]*Order        // mchid + "\x00" + out_trade_no
	refunds  map[string]*RefundRecord // mchid + "\x00" + out_refund_no
	refundLs []string
	seq      int
	requests []Request
	sent     []Notification
}

// New builds a server; Start makes it listen.
func New(opts Options) (*Server, error) {
	s := &Server{opts: opts, key: opts.Key, merchants: map[string]Merchant{}, log: opts.Logger, now: opts.Now,
		orders: map[string]*Order{}, refunds: map[string]*RefundRecord{}}
	if s.key == nil {
		k, err := GenerateKey()
		if err != nil {
			return nil, err
		}
		s.key = k
	}
	if s.opts.KeySerial == "" {
		s.opts.KeySerial = DefaultKeySerial
	}
	if len(opts.Merchants) == 0 {
		k, err := GenerateKey()
		if err != nil {
			return nil, err
		}
		s.merchKey = k
		opts.Merchants = []Merchant{{MchID: DefaultMchID, AppID: DefaultAppID, SerialNo: DefaultSerialNo, PublicKey: &k.PublicKey, APIv3Key: DefaultAPIv3Key}}
	}
	for _, m := range opts.Merchants {
		if m.MchID == "" || m.AppID == "" || m.SerialNo == "" || m.PublicKey == nil || len(m.APIv3Key) != 32 {
			return nil, fmt.Errorf("wechatpay fake: merchant %q needs an appid, a serial, a public key and a 32-byte APIv3 key", m.MchID)
		}
		s.merchants[m.MchID] = m
	}
	if s.opts.NotifySchedule == nil {
		s.opts.NotifySchedule = DefaultNotifySchedule()
	}
	if s.opts.NotifyScale <= 0 {
		s.opts.NotifyScale = 1
	}
	if s.opts.NotifyTimeout <= 0 {
		s.opts.NotifyTimeout = 10 * time.Second
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = s.log.With("component", "fake_wechatpay")
	if s.now == nil {
		s.now = time.Now
	}
	s.host = fakekit.NewHost("wechatpay", opts.PublicURL, ErrClosed, s.log)
	s.client = opts.Client
	if s.client == nil {
		c := &http.Client{Transport: &http.Transport{}}
		s.client = c
		s.host.OnClose(c.CloseIdleConnections)
	}
	return s, nil
}

// Start listens on Options.Addr and serves in the background.
func (s *Server) Start() error { return s.host.Start(s.opts.Addr, s.Handler()) }

// URL is the API base (the plugin's api_base).
func (s *Server) URL() string { return s.host.URL() }

// PublicKeyPEM is the WeChat Pay public key merchants configure.
func (s *Server) PublicKeyPEM() string { return PublicKeyPEM(&s.key.PublicKey) }

// KeySerial is the ID of that key (Wechatpay-Serial).
func (s *Server) KeySerial() string { return s.opts.KeySerial }

// Key is the fake's signing key, for tests that forge what only WeChat Pay
// could sign.
func (s *Server) Key() *rsa.PrivateKey { return s.key }

// MerchantKey is the default merchant's private key New generated (nil
// when Options named the merchants).
func (s *Server) MerchantKey() *rsa.PrivateKey { return s.merchKey }

// Close stops listening, ends pending notify waits and waits for every
// goroutine the server started.
func (s *Server) Close() { s.host.Close() }

// Handler is the fake's HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v3/", s.handleAPI)
	mux.HandleFunc("/h5", s.handleH5)
	mux.HandleFunc("/h5/pay", s.handleH5Pay)
	return s.host.Guard(mux)
}

// --- test hooks ----------------------------------------------------------

// Pay marks order out_trade_no (of any merchant) paid, as the buyer
// confirming in WeChat would, and starts its TRANSACTION.SUCCESS round.
func (s *Server) Pay(outTradeNo string) error { return s.PayWith(outTradeNo, -1) }

// PayWith is Pay where the buyer paid payerTotal fen (a coupon covered the
// rest); -1 means the total.
func (s *Server) PayWith(outTradeNo string, payerTotal int64) error {
	s.mu.Lock()
	o := s.lookupLocked("", outTradeNo)
	if o == nil {
		s.mu.Unlock()
		return ErrUnknownOrder
	}
	if o.State != NotPay {
		s.mu.Unlock()
		return ErrNotPayable
	}
	s.seq++
	o.State = Success
	o.SuccessTime = s.now()
	o.TransactionID = fmt.Sprintf("42000%s%013d", o.SuccessTime.In(cst).Format("20060102"), s.seq)
	o.PayerTotal = o.Total
	if payerTotal >= 0 {
		o.PayerTotal = payerTotal
	}
	key := o.MchID + "\x00" + o.OutTradeNo
	s.mu.Unlock()
	s.log.Info("order paid", "out_trade_no", outTradeNo)
	return s.startNotify(key, "TRANSACTION.SUCCESS", "")
}

// Renotify starts a new TRANSACTION.SUCCESS round for a paid order.
func (s *Server) Renotify(outTradeNo string) error {
	s.mu.Lock()
	o := s.lookupLocked("", outTradeNo)
	if o == nil {
		s.mu.Unlock()
		return ErrUnknownOrder
	}
	if o.State == NotPay || o.State == Closed {
		s.mu.Unlock()
		return ErrNotPaid
	}
	key := o.MchID + "\x00" + o.OutTradeNo
	s.mu.Unlock()
	return s.startNotify(key, "TRANSACTION.SUCCESS", "")
}

// Transaction is the resource of a TRANSACTION.SUCCESS for the order as it
// stands (what the query answers), for tests that alter and reseal it.
func (s *Server) Transaction(outTradeNo string) (map[string]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.lookupLocked("", outTradeNo)
	if o == nil {
		return nil, ErrUnknownOrder
	}
	return transactionJSON(o), nil
}

// SealNotify builds a notification body around resource (a transaction or
// a refund), sealed with apiV3Key and associatedData.
func (s *Server) SealNotify(eventType, originalType, apiV3Key, associatedData string, resource any) (string, error) {
	return seal(s.now(), len(s.Notifications())+1, eventType, originalType, apiV3Key, associatedData, resource)
}

// SignNotify signs body as WeChat Pay signs a notification at time at.
func (s *Server) SignNotify(body string, at time.Time) (http.Header, error) {
	return SignedHeaders(s.key, s.opts.KeySerial, strconv.FormatInt(at.Unix(), 10), Nonce(), body)
}

// DropNotify makes every attempt, while on, get lost (recorded, not sent).
func (s *Server) DropNotify(drop bool) {
	s.mu.Lock()
	s.drop = drop
	s.mu.Unlock()
}

// Notifications returns every attempt so far, in order.
func (s *Server) Notifications() []Notification {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Notification, len(s.sent))
	for i, n := range s.sent {
		n.Header = n.Header.Clone()
		out[i] = n
	}
	return out
}

// Requests returns every API call so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Refunds returns every refund, in order of creation.
func (s *Server) Refunds() []RefundRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]RefundRecord, 0, len(s.refundLs))
	for _, k := range s.refundLs {
		out = append(out, *s.refunds[k])
	}
	return out
}

// Order returns the order with this out_trade_no (of any merchant).
func (s *Server) Order(outTradeNo string) (Order, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.lookupLocked("", outTradeNo)
	if o == nil {
		return Order{}, false
	}
	return *o, true
}

// CompleteRefund ends a PROCESSING refund: SUCCESS (ok) or CLOSED (the
// money goes back to the order), and notifies it.
func (s *Server) CompleteRefund(outRefundNo string, ok bool) error {
	s.mu.Lock()
	var r *RefundRecord
	for _, k := range s.refundLs {
		if s.refunds[k].OutRefundNo == outRefundNo {
			r = s.refunds[k]
		}
	}
	if r == nil || r.Status != RefundProcessing {
		s.mu.Unlock()
		return errors.New("wechatpay fake: no such processing refund")
	}
	event := "REFUND.SUCCESS"
	if ok {
		r.Status, r.SuccessTime = RefundSuccess, s.now()
	} else {
		r.Status = RefundClosed
		event = "REFUND.CLOSED"
		o := s.orders[r.MchID+"\x00"+r.OutTradeNo]
		o.Refunded -= r.Refund
		if o.Refunded == 0 {
			o.State = Success
		}
	}
	key := r.MchID + "\x00" + r.OutRefundNo
	s.mu.Unlock()
	return s.startNotify(key, event, key)
}

func (s *Server) lookupLocked(mchid, outTradeNo string) *Order {
	if mchid != "" {
		return s.orders[mchid+"\x00"+outTradeNo]
	}
	for _, o := range s.orders {
		if o.OutTradeNo == outTradeNo || (o.TransactionID != "" && o.TransactionID == outTradeNo) {
			return o
		}
	}
	return nil
}

// --- the API -------------------------------------------------------------

var (
	cst        = time.FixedZone("CST", 8*3600)
	outNoRE    = regexp.MustCompile(`^[0-9A-Za-z_*-]{1,32}$`)
	outRefNoRE = regexp.MustCompile(`^[0-9A-Za-z_*|@/-]{1,64}$`)
	tradePath  = regexp.MustCompile(`^/v3/pay/transactions/out-trade-no/([^/]+)$`)
	closePath  = regexp.MustCompile(`^/v3/pay/transactions/out-trade-no/([^/]+)/close$`)
	refundPath = regexp.MustCompile(`^/v3/refund/domestic/refunds/([^/]+)$`)
)

type apiError struct {
	status        int
	code, message string
}

func fail(status int, code, format string, args ...any) *apiError {
	return &apiError{status, code, fmt.Sprintf(format, args...)}
}

func (s *Server) handleAPI(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		s.answer(w, nil, fail(400, "PARAM_ERROR", "cannot read the body"))
		return
	}
	req := Request{Method: r.Method, URI: r.URL.RequestURI(), Body: string(body)}
	m, aerr := s.authenticate(r, &req)
	var out any
	status := http.StatusOK
	if aerr == nil {
		out, status, aerr = s.route(r, m, body)
	}
	req.Verified = aerr == nil || aerr.code != "SIGN_ERROR"
	req.Status = status
	if aerr != nil {
		req.Status = aerr.status
	}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()
	if aerr != nil {
		s.answer(w, nil, aerr)
		return
	}
	if doc, ok := out.(map[string]any); ok && s.opts.EditAnswer != nil {
		s.opts.EditAnswer(r.URL.Path, doc)
	}
	s.answerStatus(w, status, out)
}

// authenticate checks the Authorization of a request: a known merchant,
// its certificate's serial, a fresh timestamp and the signature.
func (s *Server) authenticate(r *http.Request, req *Request) (Merchant, *apiError) {
	a, err := ParseAuthorization(r.Header.Get("Authorization"))
	if err != nil {
		return Merchant{}, fail(401, "SIGN_ERROR", "%v", err)
	}
	req.Auth = a
	m, ok := s.merchants[a.MchID]
	if !ok {
		return Merchant{}, fail(401, "SIGN_ERROR", "unknown mchid")
	}
	if a.SerialNo != m.SerialNo {
		return Merchant{}, fail(401, "SIGN_ERROR", "serial_no is not the merchant certificate's")
	}
	ts, err := strconv.ParseInt(a.Timestamp, 10, 64)
	if err != nil || s.now().Sub(time.Unix(ts, 0)).Abs() > 5*time.Minute {
		return Merchant{}, fail(401, "SIGN_ERROR", "timestamp out of range")
	}
	if !VerifyText(m.PublicKey, RequestText(r.Method, req.URI, a.Timestamp, a.NonceStr, req.Body), a.Signature) {
		return Merchant{}, fail(401, "SIGN_ERROR", "signature does not verify")
	}
	return m, nil
}

func (s *Server) route(r *http.Request, m Merchant, body []byte) (any, int, *apiError) {
	p := r.URL.Path
	switch {
	case r.Method == http.MethodPost && (p == "/v3/pay/transactions/native" || p == "/v3/pay/transactions/h5"):
		return s.createOrder(m, p == "/v3/pay/transactions/h5", body)
	case r.Method == http.MethodPost && closePath.MatchString(p):
		return s.closeOrder(m, closePath.FindStringSubmatch(p)[1], body)
	case r.Method == http.MethodGet && tradePath.MatchString(p):
		if r.URL.Query().Get("mchid") != m.MchID {
			return nil, 0, fail(400, "PARAM_ERROR", "mchid must be the caller's")
		}
		return s.queryOrder(m, tradePath.FindStringSubmatch(p)[1])
	case r.Method == http.MethodPost && p == "/v3/refund/domestic/refunds":
		return s.createRefund(m, body)
	case r.Method == http.MethodGet && refundPath.MatchString(p):
		return s.queryRefund(m, refundPath.FindStringSubmatch(p)[1])
	}
	return nil, 0, fail(404, "NOT_FOUND", "no such API")
}

type createReq struct {
	AppID       string `json:"appid"`
	MchID       string `json:"mchid"`
	Description string `json:"description"`
	OutTradeNo  string `json:"out_trade_no"`
	TimeExpire  string `json:"time_expire"`
	Attach      string `json:"attach"`
	NotifyURL   string `json:"notify_url"`
	Amount      *struct {
		Total    *int64 `json:"total"`
		Currency string `json:"currency"`
	} `json:"amount"`
	SceneInfo *struct {
		PayerClientIP string `json:"payer_client_ip"`
		H5Info        *struct {
			Type string `json:"type"`
		} `json:"h5_info"`
	} `json:"scene_info"`
}

func decodeStrict(body []byte, v any) *apiError {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fail(400, "PARAM_ERROR", "body: %v", err)
	}
	return nil
}

func (s *Server) createOrder(m Merchant, h5 bool, body []byte) (any, int, *apiError) {
	var c createReq
	if e := decodeStrict(body, &c); e != nil {
		return nil, 0, e
	}
	switch {
	case c.MchID != m.MchID:
		return nil, 0, fail(400, "PARAM_ERROR", "mchid is not the caller's")
	case c.AppID != m.AppID:
		return nil, 0, fail(400, "APPID_MCHID_NOT_MATCH", "appid and mchid do not match")
	case c.Description == "" || utf8.RuneCountInString(c.Description) > 127:
		return nil, 0, fail(400, "PARAM_ERROR", "description: 1 to 127 characters")
	case !outNoRE.MatchString(c.OutTradeNo):
		return nil, 0, fail(400, "PARAM_ERROR", "out_trade_no: letters, digits, _-* and at most 32")
	case !strings.HasPrefix(c.NotifyURL, "http"):
		return nil, 0, fail(400, "PARAM_ERROR", "notify_url is required")
	case c.Amount == nil || c.Amount.Total == nil || *c.Amount.Total <= 0:
		return nil, 0, fail(400, "PARAM_ERROR", "amount.total must be a positive number of fen")
	case c.Amount.Currency != "" && c.Amount.Currency != "CNY":
		return nil, 0, fail(400, "PARAM_ERROR", "amount.currency: CNY only")
	}
	if c.TimeExpire != "" {
		if _, err := time.Parse(time.RFC3339, c.TimeExpire); err != nil {
			return nil, 0, fail(400, "PARAM_ERROR", "time_expire is not RFC 3339")
		}
	}
	tradeType, ip := "NATIVE", ""
	if h5 {
		if c.SceneInfo == nil || c.SceneInfo.PayerClientIP == "" || c.SceneInfo.H5Info == nil || c.SceneInfo.H5Info.Type == "" {
			return nil, 0, fail(400, "PARAM_ERROR", "scene_info.payer_client_ip and scene_info.h5_info.type are required")
		}
		tradeType, ip = "MWEB", c.SceneInfo.PayerClientIP
	} else if c.SceneInfo != nil && c.SceneInfo.H5Info != nil {
		return nil, 0, fail(400, "PARAM_ERROR", "h5_info is for H5 orders")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := m.MchID + "\x00" + c.OutTradeNo
	if o, ok := s.orders[key]; ok {
		if o.State != NotPay {
			return nil, 0, fail(400, "ORDERPAID", "the order is paid or closed")
		}
		if o.Total != *c.Amount.Total || o.TradeType != tradeType || o.Description != c.Description {
			return nil, 0, fail(400, "INVALID_REQUEST", "out_trade_no already used with other parameters")
		}
	} else {
		s.orders[key] = &Order{MchID: m.MchID, AppID: c.AppID, TradeType: tradeType, OutTradeNo: c.OutTradeNo,
			Description: c.Description, Total: *c.Amount.Total, NotifyURL: c.NotifyURL, Attach: c.Attach,
			TimeExpire: c.TimeExpire, PayerClientIP: ip, State: NotPay, CreatedRequest: string(body)}
		s.log.Info("order placed", "out_trade_no", c.OutTradeNo, "trade_type", tradeType)
	}
	if h5 {
		return map[string]any{"h5_url": s.URL() + "/h5?prepay=" + m.MchID + "-" + c.OutTradeNo}, 200, nil
	}
	return map[string]any{"code_url": "weixin://wxpay/bizpayurl?pr=" + c.OutTradeNo}, 200, nil
}

func (s *Server) closeOrder(m Merchant, outTradeNo string, body []byte) (any, int, *apiError) {
	var c struct {
		MchID string `json:"mchid"`
	}
	if e := decodeStrict(body, &c); e != nil {
		return nil, 0, e
	}
	if c.MchID != m.MchID {
		return nil, 0, fail(400, "PARAM_ERROR", "mchid is not the caller's")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.lookupLocked(m.MchID, outTradeNo)
	if o == nil {
		return nil, 0, fail(404, "ORDER_NOT_EXIST", "no such order")
	}
	if o.State == Success || o.State == Refund {
		return nil, 0, fail(400, "ORDERPAID", "the order is paid")
	}
	o.State = Closed
	return nil, http.StatusNoContent, nil
}

func (s *Server) queryOrder(m Merchant, outTradeNo string) (any, int, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.lookupLocked(m.MchID, outTradeNo)
	if o == nil {
		return nil, 0, fail(404, "ORDER_NOT_EXIST", "no such order")
	}
	return transactionJSON(o), 200, nil
}

// transactionJSON is an order as the query and TRANSACTION.SUCCESS carry it.
func transactionJSON(o *Order) map[string]any {
	t := map[string]any{
		"appid":            o.AppID,
		"mchid":            o.MchID,
		"out_trade_no":     o.OutTradeNo,
		"trade_type":       o.TradeType,
		"trade_state":      o.State,
		"trade_state_desc": map[string]string{NotPay: "未支付", Success: "支付成功", Refund: "转入退款", Closed: "已关闭"}[o.State],
		"attach":           o.Attach,
		"amount":           map[string]any{"total": o.Total, "currency": "CNY"},
	}
	if o.TransactionID != "" {
		t["transaction_id"] = o.TransactionID
		t["bank_type"] = "OTHERS"
		t["success_time"] = o.SuccessTime.In(cst).Format(time.RFC3339)
		t["payer"] = map[string]any{"openid": "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"}
		t["amount"] = map[string]any{"total": o.Total, "payer_total": o.PayerTotal, "currency": "CNY", "payer_currency": "CNY"}
	}
	return t
}

type refundReq struct {
	TransactionID string `json:"transaction_id"`
	OutTradeNo    string `json:"out_trade_no"`
	OutRefundNo   string `json:"out_refund_no"`
	Reason        string `json:"reason"`
	NotifyURL     string `json:"notify_url"`
	Amount        *struct {
		Refund   *int64 `json:"refund"`
		Total    *int64 `json:"total"`
		Currency string `json:"currency"`
	} `json:"amount"`
}

func (s *Server) createRefund(m Merchant, body []byte) (any, int, *apiError) {
	var c refundReq
	if e := decodeStrict(body, &c); e != nil {
		return nil, 0, e
	}
	switch {
	case !outRefNoRE.MatchString(c.OutRefundNo):
		return nil, 0, fail(400, "PARAM_ERROR", "out_refund_no: at most 64 of letters, digits, _-|*@/")
	case c.Amount == nil || c.Amount.Refund == nil || c.Amount.Total == nil || *c.Amount.Refund <= 0:
		return nil, 0, fail(400, "PARAM_ERROR", "amount.refund and amount.total are required")
	case c.Amount.Currency != "CNY":
		return nil, 0, fail(400, "PARAM_ERROR", "amount.currency must be CNY")
	case utf8.RuneCountInString(c.Reason) > 80:
		return nil, 0, fail(400, "PARAM_ERROR", "reason: at most 80 characters")
	}
	s.mu.Lock()
	id := c.OutTradeNo
	if id == "" {
		id = c.TransactionID
	}
	o := s.lookupLocked("", id)
	if o == nil || o.MchID != m.MchID {
		s.mu.Unlock()
		return nil, 0, fail(404, "RESOURCE_NOT_EXISTS", "no such order")
	}
	if o.State != Success && o.State != Refund {
		s.mu.Unlock()
		return nil, 0, fail(400, "INVALID_REQUEST", "the order is not paid")
	}
	rkey := m.MchID + "\x00" + c.OutRefundNo
	if r, ok := s.refunds[rkey]; ok {
		defer s.mu.Unlock()
		if r.OutTradeNo != o.OutTradeNo || r.Refund != *c.Amount.Refund {
			return nil, 0, fail(400, "INVALID_REQUEST", "out_refund_no already used with other parameters")
		}
		return refundJSON(r), 200, nil
	}
	if *c.Amount.Total != o.Total {
		s.mu.Unlock()
		return nil, 0, fail(400, "INVALID_REQUEST", "amount.total is not the order's total")
	}
	if o.Refunded+*c.Amount.Refund > o.Total {
		s.mu.Unlock()
		return nil, 0, fail(403, "NOT_ENOUGH", "the refund is more than is left of the order")
	}
	s.seq++
	now := s.now()
	notify := c.NotifyURL
	if notify == "" {
		notify = o.NotifyURL
	}
	r := &RefundRecord{MchID: m.MchID, OutTradeNo: o.OutTradeNo, TransactionID: o.TransactionID, OutRefundNo: c.OutRefundNo,
		RefundID: fmt.Sprintf("50300%s%013d", now.In(cst).Format("20060102"), s.seq), Refund: *c.Amount.Refund, Total: o.Total,
		Status: RefundProcessing, NotifyURL: notify, CreateTime: now}
	o.Refunded += r.Refund
	o.State = Refund
	if !s.opts.RefundsPending {
		r.Status, r.SuccessTime = RefundSuccess, now
	}
	s.refunds[rkey] = r
	s.refundLs = append(s.refundLs, rkey)
	out := refundJSON(r)
	status := r.Status
	s.mu.Unlock()
	s.log.Info("refund", "out_refund_no", r.OutRefundNo, "refund", r.Refund, "status", status)
	if status == RefundSuccess {
		if err := s.startNotify(rkey, "REFUND.SUCCESS", rkey); err != nil {
			s.log.Warn("refund notify not started", "err", err)
		}
	}
	return out, 200, nil
}

func (s *Server) queryRefund(m Merchant, outRefundNo string) (any, int, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.refunds[m.MchID+"\x00"+outRefundNo]
	if !ok {
		return nil, 0, fail(404, "RESOURCE_NOT_EXISTS", "no such refund")
	}
	return refundJSON(r), 200, nil
}

func refundJSON(r *RefundRecord) map[string]any {
	out := map[string]any{
		"refund_id":             r.RefundID,
		"out_refund_no":         r.OutRefundNo,
		"transaction_id":        r.TransactionID,
		"out_trade_no":          r.OutTradeNo,
		"channel":               "ORIGINAL",
		"user_received_account": "支付用户零钱",
		"create_time":           r.CreateTime.In(cst).Format(time.RFC3339),
		"status":                r.Status,
		"funds_account":         "AVAILABLE",
		"amount": map[string]any{"total": r.Total, "refund": r.Refund, "payer_total": r.Total, "payer_refund": r.Refund,
			"settlement_refund": r.Refund, "settlement_total": r.Total, "discount_refund": 0, "currency": "CNY"},
	}
	if !r.SuccessTime.IsZero() {
		out["success_time"] = r.SuccessTime.In(cst).Format(time.RFC3339)
	}
	return out
}

// refundResource is a refund as its notification carries it.
func refundResource(r *RefundRecord) map[string]any {
	out := map[string]any{
		"mchid": r.MchID, "out_trade_no": r.OutTradeNo, "transaction_id": r.TransactionID,
		"out_refund_no": r.OutRefundNo, "refund_id": r.RefundID, "refund_status": r.Status,
		"user_received_account": "支付用户零钱",
		"amount":                map[string]any{"total": r.Total, "refund": r.Refund, "payer_total": r.Total, "payer_refund": r.Refund},
	}
	if !r.SuccessTime.IsZero() {
		out["success_time"] = r.SuccessTime.In(cst).Format(time.RFC3339)
	}
	return out
}

// answer writes an error answer, signed like every answer.
func (s *Server) answer(w http.ResponseWriter, _ any, e *apiError) {
	s.write(w, e.status, jsonText(map[string]any{"code": e.code, "message": e.message}))
}

func (s *Server) answerStatus(w http.ResponseWriter, status int, out any) {
	if status == http.StatusNoContent {
		s.write(w, status, "")
		return
	}
	s.write(w, status, jsonText(out))
}

func (s *Server) write(w http.ResponseWriter, status int, body string) {
	h, err := SignedHeaders(s.key, s.opts.KeySerial, strconv.FormatInt(s.now().Add(s.opts.AnswerSkew).Unix(), 10), Nonce(), body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	for k, v := range h {
		w.Header()[k] = v
	}
	w.Header().Set("Request-ID", Nonce())
	if body != "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// --- notifications -------------------------------------------------------

// startNotify runs one round in the background for an order (key of
// s.orders) or, with refundKey, a refund: attempts on the schedule until a
// 2xx answer, the schedule's end or Close.
func (s *Server) startNotify(key, event, refundKey string) error {
	return s.host.Go(func() {
		for i, wait := range s.opts.NotifySchedule {
			if !s.host.Sleep(context.Background(), time.Duration(float64(wait)*s.opts.NotifyScale)) {
				return
			}
			if s.attempt(key, event, refundKey, i+1) {
				return
			}
		}
		s.log.Warn("notify schedule exhausted without success", "key", key, "event", event)
	})
}

func (s *Server) attempt(key, event, refundKey string, attempt int) bool {
	s.mu.Lock()
	var (
		url, outTradeNo, body string
		err                   error
	)
	if refundKey == "" {
		o := s.orders[key]
		m := s.merchants[o.MchID]
		url, outTradeNo = o.NotifyURL, o.OutTradeNo
		body, err = seal(s.now(), len(s.sent)+1, event, "transaction", m.APIv3Key, "transaction", transactionJSON(o))
	} else {
		r := s.refunds[refundKey]
		m := s.merchants[r.MchID]
		url, outTradeNo = r.NotifyURL, r.OutTradeNo
		body, err = seal(s.now(), len(s.sent)+1, event, "refund", m.APIv3Key, "refund", refundResource(r))
	}
	drop := s.drop
	s.mu.Unlock()
	n := Notification{OutTradeNo: outTradeNo, EventType: event, Attempt: attempt, URL: url, Body: body, At: s.now()}
	if err == nil {
		n.Header, err = s.SignNotify(body, n.At)
	}
	if err != nil {
		n.Err = err.Error()
		s.record(n)
		return false
	}
	if drop {
		n.Dropped = true
		s.record(n)
		return false
	}
	ctx, cancel := context.WithTimeout(s.host.Context(), s.opts.NotifyTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		n.Err = err.Error()
		s.record(n)
		return false
	}
	for k, v := range n.Header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Mozilla/4.0 (fake wechatpay notify)")
	resp, err := s.client.Do(req)
	if err != nil {
		n.Err = err.Error()
		s.record(n)
		return false
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	n.Status, n.Answer = resp.StatusCode, string(b)
	n.Acked = resp.StatusCode >= 200 && resp.StatusCode < 300
	s.record(n)
	s.log.Info("notify answered", "event", event, "status", n.Status, "acked", n.Acked)
	return n.Acked
}

// seal is a notification body: resource sealed with apiV3Key and
// associatedData, the n-th notification at now.
func seal(now time.Time, n int, event, originalType, apiV3Key, associatedData string, resource any) (string, error) {
	plain, err := json.Marshal(resource)
	if err != nil {
		return "", err
	}
	nonce := Nonce()[:12]
	ct, err := Seal(apiV3Key, nonce, associatedData, plain)
	if err != nil {
		return "", err
	}
	now = now.In(cst)
	summary := "支付成功"
	if originalType == "refund" {
		summary = "退款状态变更"
	}
	return jsonText(map[string]any{
		"id":            fmt.Sprintf("EV-%s%06d", now.Format("20060102150405"), n),
		"create_time":   now.Format(time.RFC3339),
		"resource_type": "encrypt-resource",
		"event_type":    event,
		"summary":       summary,
		"resource": map[string]any{
			"algorithm": "AEAD_AES_256_GCM", "ciphertext": ct, "nonce": nonce,
			"associated_data": associatedData, "original_type": originalType,
		},
	}), nil
}

func (s *Server) record(n Notification) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, n)
}

// --- the H5 page ---------------------------------------------------------

func (s *Server) handleH5(w http.ResponseWriter, r *http.Request) {
	mchid, out, _ := strings.Cut(r.URL.Query().Get("prepay"), "-")
	s.mu.Lock()
	o := s.lookupLocked(mchid, out)
	var p cashier.Page
	p.Title, p.Small, p.Return = "微信支付", "(fake wechatpay)", r.URL.Query().Get("redirect_url")
	status := http.StatusOK
	if o == nil {
		p.Error, status = "no such order", http.StatusNotFound
	} else {
		p.Fields = []cashier.Field{{Label: "商品", Value: o.Description}, {Label: "金额", Value: "¥" + money.FormatCents(o.Total)}, {Label: "商户订单号", Value: o.OutTradeNo}}
		if o.State == NotPay {
			p.Pay = &cashier.Pay{Action: "/h5/pay", TradeNo: o.OutTradeNo, Label: "确认支付 / Pay"}
		} else {
			p.Done = o.State
		}
	}
	s.mu.Unlock()
	cashier.Write(w, status, p)
}

func (s *Server) handleH5Pay(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	if err := s.Pay(r.PostFormValue("trade_no")); err != nil {
		cashier.Write(w, http.StatusConflict, cashier.Page{Title: "微信支付", Small: "(fake wechatpay)", Error: err.Error()})
		return
	}
	cashier.Write(w, http.StatusOK, cashier.Page{Title: "微信支付", Small: "(fake wechatpay)", Done: "支付成功"})
}

// Orders returns every order, by out_trade_no.
func (s *Server) Orders() []Order {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Order, 0, len(s.orders))
	for _, o := range s.orders {
		out = append(out, *o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].OutTradeNo < out[j].OutTradeNo })
	return out
}

func jsonText(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
