package epay

import (
	"errors"
	"html/template"
	"net/http"
	"net/url"

	"github.com/rustbill/paymentd/internal/fakes/fakekit"
)

var pageTmpl = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="zh"><head><meta charset="utf-8"><title>收银台 — fake epay</title>
<style>body{font-family:sans-serif;max-width:28rem;margin:3rem auto}dt{color:#666}dd{margin:0 0 .6rem}button{font-size:1.2rem;padding:.5rem 2rem}</style>
</head><body>
<h1>收银台 <small>(fake epay)</small></h1>
{{with .Order}}<dl>
<dt>商品 / item</dt><dd>{{.Name}}</dd>
<dt>金额 / amount</dt><dd>¥{{.Money}}</dd>
<dt>方式 / method</dt><dd>{{.Type}}</dd>
<dt>商户订单号 / out_trade_no</dt><dd>{{.OutTradeNo}}</dd>
<dt>订单号 / trade_no</dt><dd>{{.TradeNo}}</dd>
</dl>
{{if .Paid}}<p><strong>已支付 / paid</strong></p>{{if $.Return}}<p><a href="{{$.Return}}">返回商户 / back to the merchant</a></p>{{end}}
{{else}}<form method="post" action="/submit.php/pay"><input type="hidden" name="trade_no" value="{{.TradeNo}}"><button type="submit">确认支付 / Pay</button></form>{{end}}
{{end}}{{with .Error}}<p style="color:#b00">{{.}}</p>{{end}}
</body></html>`))

type pageData struct {
	Order  *Order
	Return string
	Error  string
}

func renderPage(w http.ResponseWriter, status int, d pageData) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = pageTmpl.Execute(w, d)
}

// handleSubmit is the page-redirect API (a signed create, then the cashier
// page) and the cashier page itself (?trade_no=…).
func (s *Server) handleSubmit(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		renderPage(w, http.StatusBadRequest, pageData{Error: "参数错误"})
		return
	}
	if r.Form.Get("sign") != "" {
		o, err := s.create(r.Form)
		if err != nil {
			renderPage(w, http.StatusOK, pageData{Error: err.Error()})
			return
		}
		http.Redirect(w, r, "/submit.php?trade_no="+url.QueryEscape(o.TradeNo), http.StatusSeeOther)
		return
	}
	o, ok := s.Order(r.Form.Get("trade_no"))
	if !ok || r.Form.Get("trade_no") != o.TradeNo {
		renderPage(w, http.StatusNotFound, pageData{Error: "订单号不存在"})
		return
	}
	d := pageData{Order: &o}
	if o.Paid {
		d.Return = s.returnURL(o.TradeNo)
	}
	renderPage(w, http.StatusOK, d)
}

// handlePay is the cashier's "Pay" button.
func (s *Server) handlePay(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	tradeNo := r.PostFormValue("trade_no")
	o, ok := s.Order(tradeNo)
	if !ok || o.TradeNo != tradeNo {
		renderPage(w, http.StatusNotFound, pageData{Error: "订单号不存在"})
		return
	}
	if err := s.Pay(tradeNo); err != nil && !errors.Is(err, ErrAlreadyPaid) {
		renderPage(w, http.StatusServiceUnavailable, pageData{Error: err.Error()})
		return
	}
	if ru := s.returnURL(tradeNo); ru != "" {
		http.Redirect(w, r, ru, http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/submit.php?trade_no="+url.QueryEscape(tradeNo), http.StatusSeeOther)
}

// returnURL is the order's return_url with the signed result appended, as
// epay sends the buyer back; empty when the order has none.
func (s *Server) returnURL(tradeNo string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.orders[tradeNo]
	if o == nil || o.ReturnURL == "" || !o.Paid {
		return ""
	}
	return fakekit.AppendQuery(o.ReturnURL, s.notifyParamsLocked(o).Encode())
}
