package alipay

import (
	"fmt"
	"net/url"
	"time"

	"github.com/rustbill/paymentd/internal/money"
)

// notifyParamsLocked are the signed parameters of an asynchronous notify
// of t as it stands: what Alipay posts for a trade_status_sync.
func (s *Server) notifyParamsLocked(t *trade) (url.Values, error) {
	now := s.now().In(cst)
	amount := money.FormatCents(t.cents)
	p := url.Values{}
	p.Set("notify_time", now.Format(time.DateTime))
	p.Set("notify_type", "trade_status_sync")
	p.Set("notify_id", fmt.Sprintf("2026%s0222%012d", now.Format("0102150405"), s.notify.Count()+1))
	p.Set("charset", "utf-8")
	p.Set("version", "1.0")
	p.Set("app_id", t.AppID)
	p.Set("auth_app_id", t.AppID)
	p.Set("seller_id", t.SellerID)
	p.Set("trade_no", t.TradeNo)
	p.Set("out_trade_no", t.OutTradeNo)
	p.Set("trade_status", t.Status)
	p.Set("total_amount", amount)
	p.Set("receipt_amount", amount)
	p.Set("invoice_amount", amount)
	p.Set("buyer_pay_amount", amount)
	p.Set("point_amount", "0.00")
	p.Set("subject", t.Subject)
	p.Set("buyer_id", "2088102177846880")
	p.Set("buyer_logon_id", "buy***@example.com")
	p.Set("gmt_create", t.CreatedAt.In(cst).Format(time.DateTime))
	p.Set("gmt_payment", t.PaidAt.In(cst).Format(time.DateTime))
	// A JSON value with quotes and brackets: it is signed decoded, as it is.
	p.Set("fund_bill_list", `[{"amount":"`+amount+`","fundChannel":"ALIPAYACCOUNT"}]`)
	if t.refundedCents > 0 {
		// After a refund: the total refunded, the refund's out_request_no
		// and its time (the status is TRADE_SUCCESS, or TRADE_CLOSED once
		// everything went back).
		p.Set("refund_fee", money.FormatCents(t.refundedCents))
		p.Set("out_biz_no", t.lastRefund)
		p.Set("gmt_refund", t.lastRefundAt.In(cst).Format("2006-01-02 15:04:05.000"))
	}
	if err := Sign(s.key, p, true); err != nil {
		return nil, err
	}
	return p, nil
}

// startNotify runs one notify round for a paid trade in the background:
// attempts on the schedule until the merchant answers "success", the
// schedule ends, or the server closes. Each attempt sends the trade as it
// stands then (a refund after the payment is in the next attempt's
// parameters).
func (s *Server) startNotify(tradeNo string) error {
	return s.notify.Start(tradeNo, func() Notification {
		s.mu.Lock()
		defer s.mu.Unlock()
		t := s.trades[tradeNo]
		params, err := s.notifyParamsLocked(t)
		n := Notification{TradeNo: t.TradeNo, OutTradeNo: t.OutTradeNo, URL: t.NotifyURL, Params: params, At: s.now()}
		if err != nil {
			n.Err = err.Error()
		}
		return n
	})
}
