package epay

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/rustbill/paymentd/internal/fakes/cashier"
	"github.com/rustbill/paymentd/internal/fakes/fakekit"
)

type pageData struct {
	Order  *Order
	Return string
	Error  string
}

func renderPage(w http.ResponseWriter, status int, d pageData) {
	p := cashier.Page{Title: "收银台", Small: "(fake epay)", Return: d.Return, Error: d.Error}
	if o := d.Order; o != nil {
		p.Fields = []cashier.Field{
			{Label: "商品 / item", Value: o.Name},
			{Label: "金额 / amount", Value: "¥" + o.Money},
			{Label: "方式 / method", Value: o.Type},
			{Label: "商户订单号 / out_trade_no", Value: o.OutTradeNo},
			{Label: "订单号 / trade_no", Value: o.TradeNo},
		}
		if o.Paid {
			p.Done = "已支付 / paid"
		} else {
			p.Pay = &cashier.Pay{Action: "/submit.php/pay", TradeNo: o.TradeNo, Label: "确认支付 / Pay"}
		}
	}
	cashier.Write(w, status, p)
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
