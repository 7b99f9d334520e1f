package alipay

import (
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/rustbill/paymentd/internal/fakes/cashier"
	"github.com/rustbill/paymentd/internal/fakes/fakekit"
	"github.com/rustbill/paymentd/internal/money"
)

type pageData struct {
	Trade  *Trade
	Return string
	Error  string
}

func renderPage(w http.ResponseWriter, status int, d pageData) {
	p := cashier.Page{Title: "支付宝收银台", Small: "(fake alipay)", Return: d.Return, Error: d.Error}
	if t := d.Trade; t != nil {
		p.Fields = []cashier.Field{
			{Label: "商品 / subject", Value: t.Subject},
			{Label: "金额 / total_amount", Value: "¥" + t.TotalAmount},
			{Label: "商户订单号 / out_trade_no", Value: t.OutTradeNo},
			{Label: "支付宝交易号 / trade_no", Value: t.TradeNo},
		}
		if t.Status != "WAIT_BUYER_PAY" {
			p.Done = t.Status
		} else {
			p.Pay = &cashier.Pay{Action: "/cashier/pay", TradeNo: t.TradeNo, Label: "确认付款 / Pay"}
		}
	}
	cashier.Write(w, status, p)
}

// pagePay is alipay.trade.page.pay: the buyer's browser brings the signed
// request (GET with the parameters in the query, or an auto-submitted
// form); a valid one opens the cashier, an invalid one an error page, as
// Alipay shows them.
func (s *Server) pagePay(w http.ResponseWriter, _ *http.Request, app App, p url.Values, gerr *gatewayError) {
	if gerr != nil {
		renderPage(w, http.StatusOK, pageData{Error: "错误代码 " + gerr.subCode + ": " + gerr.subMsg})
		return
	}
	biz, gerr := bizContent(p)
	if gerr != nil {
		renderPage(w, http.StatusOK, pageData{Error: "错误代码 " + gerr.subCode + ": " + gerr.subMsg})
		return
	}
	t, fail := s.create(app, "alipay.trade.page.pay", p, biz)
	if fail != nil {
		renderPage(w, http.StatusOK, pageData{Error: "错误代码 " + fail["sub_code"].(string) + ": " + fail["sub_msg"].(string)})
		return
	}
	w.Header().Set("Location", "/cashier?trade_no="+url.QueryEscape(t.TradeNo))
	w.WriteHeader(http.StatusSeeOther)
}

// handleCashier shows a trade (?trade_no=…) with its Pay button.
func (s *Server) handleCashier(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("trade_no")
	t, found := s.Trade(id)
	if !found || t.TradeNo != id {
		renderPage(w, http.StatusNotFound, pageData{Error: "交易不存在"})
		return
	}
	renderPage(w, http.StatusOK, pageData{Trade: &t, Return: s.returnURL(id)})
}

// handlePay is the cashier's Pay button: the trade is paid, its notify
// round starts, and the buyer goes back to return_url.
func (s *Server) handlePay(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	id := r.PostFormValue("trade_no")
	t, found := s.Trade(id)
	if !found || t.TradeNo != id {
		renderPage(w, http.StatusNotFound, pageData{Error: "交易不存在"})
		return
	}
	if err := s.Pay(id); err != nil && !errors.Is(err, ErrAlreadyPaid) {
		renderPage(w, http.StatusServiceUnavailable, pageData{Error: err.Error()})
		return
	}
	if ru := s.returnURL(id); ru != "" {
		http.Redirect(w, r, ru, http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/cashier?trade_no="+url.QueryEscape(id), http.StatusSeeOther)
}

// returnURL is the page.pay trade's return_url with the signed synchronous
// result appended (method alipay.trade.page.pay.return), as Alipay sends
// the buyer back; empty for an unpaid trade or one without return_url.
func (s *Server) returnURL(tradeNo string) string {
	s.mu.Lock()
	t := s.trades[tradeNo]
	if t == nil || t.ReturnURL == "" || t.PaidAt.IsZero() {
		s.mu.Unlock()
		return ""
	}
	p := url.Values{}
	p.Set("charset", "utf-8")
	p.Set("out_trade_no", t.OutTradeNo)
	p.Set("method", "alipay.trade.page.pay.return")
	p.Set("total_amount", money.FormatCents(t.cents))
	p.Set("trade_no", t.TradeNo)
	p.Set("auth_app_id", t.AppID)
	p.Set("version", "1.0")
	p.Set("app_id", t.AppID)
	p.Set("seller_id", t.SellerID)
	p.Set("timestamp", s.now().In(cst).Format(time.DateTime))
	ret := t.ReturnURL
	s.mu.Unlock()
	if err := Sign(s.key, p, true); err != nil {
		return ""
	}
	return fakekit.AppendQuery(ret, p.Encode())
}
