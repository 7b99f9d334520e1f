package payment_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/fakes/epay"
	"github.com/rustbill/paymentd/internal/ledger"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/payment/paymentrpc"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/plugintest"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// answering is a plugin that answers whatever the fuzzer said.
type answering struct {
	mu     sync.Mutex
	answer string
	err    error
}

func (a *answering) Call(context.Context, string, string, string) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.answer, a.err
}

func (a *answering) set(answer string, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.answer, a.err = answer, err
}

// fuzzBundle is a database with a customer, an epay interface on the real
// plugin, an interface whose plugin answers what the fuzzer says, and the
// service over them.
type fuzzBundle struct {
	pool              *pgxpool.Pool
	svc               *payment.Service
	gws               *gateways
	epayGW, answerGW  uuid.UUID
	answers           *answering
	customer, adminID uuid.UUID
}

func setupFuzz(f *testing.F) *fuzzBundle {
	f.Helper()
	w := &fuzzBundle{pool: testdb.Pool(f), gws: &gateways{m: map[uuid.UUID]payment.Gateway{}}, answers: &answering{}}
	log := slog.New(slog.DiscardHandler)
	w.svc = payment.NewService(w.pool, log, payment.WithGateways(w.gws), payment.WithPublicURL("http://127.0.0.1:1"))
	w.epayGW = testfixture.GatewayInterface(f, w.pool, "epay")
	w.gws.set(payment.Gateway{
		InterfaceID: w.epayGW, PluginName: "epay", DisplayName: "epay", Enabled: true,
		ConfigJSON: mustJSON(map[string]any{"api_url": "http://127.0.0.1:1/", "pid": epay.DefaultPID, "key": epay.DefaultKey}),
		Plugin:     plugintest.Load(f, "gateway/epay.lua", plugin.Options{}), Currencies: []string{"CNY"},
	})
	w.answerGW = testfixture.GatewayInterface(f, w.pool, "answers")
	w.gws.set(payment.Gateway{InterfaceID: w.answerGW, PluginName: "answers", DisplayName: "answers", Enabled: true, ConfigJSON: "{}", Plugin: w.answers, Currencies: []string{"CNY"}})
	w.customer = testfixture.Customer(f, w.pool)
	if err := w.pool.QueryRow(context.Background(), `INSERT INTO admin_users (username, password_hash) VALUES ('fuzz', 'x') RETURNING id`).Scan(&w.adminID); err != nil {
		f.Fatal(err)
	}
	return w
}

// FuzzCallbackRoute sends arbitrary requests to /callbacks/{id}: any
// method, path, content type, query or body. The route answers in the
// gateway's terms (200 with the ack, 400, 404, 405, 413) and never a 500,
// and the one pending payment is settled only by its genuine, signed
// notification — with the gateway order and amount that notification names.
func FuzzCallbackRoute(f *testing.F) {
	w := setupFuzz(f)
	pay := testfixture.InsertPayment(f, w.pool, testfixture.Payment{Customer: w.customer, Gateway: w.epayGW, Amount: "12.30"})
	genuine := notify(pay, "T2026", "12.30")
	gw := w.epayGW.String()
	f.Add(uint8(0), gw, "", genuine)
	f.Add(uint8(1), gw, "application/x-www-form-urlencoded", genuine)
	f.Add(uint8(1), gw, "application/json", `{"out_trade_no":"`+pay.String()+`"}`)
	f.Add(uint8(0), gw, "", strings.Replace(genuine, "money=12.30", "money=0.01", 1))
	f.Add(uint8(0), gw, "", notify(pay, "T2026", "12.31"))
	f.Add(uint8(0), gw, "", notify(uuid.New(), "T1", "12.30"))
	f.Add(uint8(0), uuid.NewString(), "", genuine)
	f.Add(uint8(0), "not-a-uuid", "", genuine)
	f.Add(uint8(0), gw+"/../../admin", "", "")
	f.Add(uint8(2), gw, "", "")
	f.Add(uint8(1), gw, "multipart/form-data; boundary=x", "--x\r\n\r\n--x--")
	f.Add(uint8(0), strings.ToUpper(gw), "", genuine)
	h := paymentrpc.NewCallbackHandler(w.svc, slog.New(slog.DiscardHandler))
	methods := []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodHead, http.MethodDelete}
	f.Fuzz(func(t *testing.T, m uint8, path, contentType, payload string) {
		method := methods[int(m)%len(methods)]
		req, err := http.NewRequest(method, "http://paymentd.test"+payment.CallbackPath+url.PathEscape(path), strings.NewReader(payload))
		if err != nil {
			return
		}
		if method == http.MethodGet {
			req.URL.RawQuery = payload
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("%s %q (%q, %q) answered %d %q", method, path, contentType, payload, rec.Code, rec.Body.String())
		}
		if strings.Contains(rec.Body.String(), "SELECT") || strings.Contains(rec.Body.String(), epay.DefaultKey+"\"") {
			t.Fatalf("the answer leaks internals: %q", rec.Body.String())
		}
		p, err := store.Q(w.pool).GetPayment(context.Background(), pay)
		if err != nil {
			t.Fatal(err)
		}
		switch p.Status {
		case "pending":
		case "success":
			if p.GatewayPaymentID != "T2026" || p.Amount.String() != "12.30" {
				t.Fatalf("settled as %q for %s", p.GatewayPaymentID, p.Amount)
			}
		default:
			t.Fatalf("payment became %s", p.Status)
		}
	})
}

// FuzzPluginAnswers makes a gateway plugin answer arbitrary text to
// parse_callback, query_payment and create_payment. The service decodes
// every answer strictly: a malformed or nonsensical one is refused with a
// domain error (never a panic, never an unclassified error), and whatever
// it accepts obeys the money rules (ledger checked at the end).
func FuzzPluginAnswers(f *testing.F) {
	w := setupFuzz(f)
	pending := testfixture.InsertPayment(f, w.pool, testfixture.Payment{Customer: w.customer, Gateway: w.answerGW, Amount: "12.30"})
	pid := pending.String()
	for _, a := range []string{
		`{"valid":true,"payment_id":"` + pid + `","amount":"12.30","status":"success","gateway_payment_id":"G1","ack":"success"}`,
		`{"valid":true,"payment_id":"` + pid + `","amount":"12.3","status":"success","gateway_payment_id":"G1"}`,
		`{"valid":true,"payment_id":"` + pid + `","amount":"1e3","status":"success"}`,
		`{"valid":true,"payment_id":"` + pid + `","amount":"12.30","currency":"USD","status":"success","gateway_payment_id":"G2"}`,
		`{"valid":true,"payment_id":"` + pid + `","amount":"12.30","currency":"cny","status":"success","gateway_payment_id":"G3"}`,
		`{"valid":true,"payment_id":"` + pid + `","amount":"12.30","currency":{"code":"CNY"},"status":"success"}`,
		`{"status":"success","amount":"12.30","currency":"\u0000","gateway_payment_id":"Q2"}`,
		`{"valid":true,"payment_id":"` + pid + `","amount":12.30,"status":"success"}`,
		`{"valid":true,"payment_id":"../../etc","amount":"1","status":"success"}`,
		`{"valid":true,"payment_id":"` + pid + `","amount":"12.30","status":"success","gateway_payment_id":"G\u00001"}`,
		`{"valid":false,"reason":"bad\u0000"}`,
		`{"valid":true,"status":"ignored","reason":"event type charge.succeeded","ack":"{\"received\":true}"}`,
		`{"valid":true,"status":"ignored","payment_id":"` + pid + `","amount":"0.01"}`,
		`{"status":"success","amount":"12.30","gateway_payment_id":"Q1","gateway_tx_id":"\u0000"}`,
		`{"valid":"yes"}`,
		`{"status":"success","amount":"12.30","gateway_payment_id":"Q1","paid_at":"2999-01-01T00:00:00Z"}`,
		`{"status":"failed"}`,
		`{"status":"weird"}`,
		`{"payment_url":"https://pay.example/x","qr_code":"","instructions":""}`,
		`{"payment_url":{"a":1}}`,
		`{}`, `null`, `[]`, `"success"`, ``, `{"valid":true}`, `{"a":` + strings.Repeat("[", 500),
	} {
		f.Add(uint8(0), a)
		f.Add(uint8(1), a)
		f.Add(uint8(2), a)
	}
	f.Cleanup(func() {
		r, err := ledger.Verify(context.Background(), w.pool)
		if err != nil || !r.OK() {
			f.Errorf("after the answers: %v %s", err, r)
		}
	})
	admin := as(auth.RoleAdmin, w.adminID)
	customer := as(auth.RoleCustomer, w.customer)
	allowed := map[apperr.Kind]bool{
		apperr.InvalidArgument: true, apperr.NotFound: true, apperr.AlreadyExists: true, apperr.Internal: true,
	}
	f.Fuzz(func(t *testing.T, which uint8, answer string) {
		w.answers.set(answer, nil)
		var err error
		switch which % 3 {
		case 0:
			_, err = w.svc.HandleCallback(context.Background(), payment.Callback{GatewayInterfaceID: w.answerGW, Method: http.MethodGet, Payload: "x=1"})
		case 1:
			_, err = w.svc.QueryPaymentStatus(admin, pending)
		case 2:
			order := testfixture.Order(t, w.pool, w.customer, "12.30")
			var p store.Payment
			p, err = w.svc.CreatePayment(customer, payment.NewPayment{OrderID: &order, GatewayInterfaceID: w.answerGW, ReturnURL: "https://shop.example/done"})
			if err == nil && (p.Status != "pending" || len(p.PaymentUrl) > 4096+3) {
				t.Fatalf("created %+v", p)
			}
		}
		if err != nil {
			kind, ok := apperr.KindOf(err)
			if !ok || !allowed[kind] {
				t.Fatalf("answer %q: unclassified error %v", answer, err)
			}
		}
	})
}
