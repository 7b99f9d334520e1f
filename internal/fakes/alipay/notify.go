package alipay

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// notifyParamsLocked are the signed parameters of an asynchronous notify
// of t as it stands: what Alipay posts for a trade_status_sync.
func (s *Server) notifyParamsLocked(t *trade) (url.Values, error) {
	now := s.now().In(cst)
	amount := formatCents(t.cents)
	p := url.Values{}
	p.Set("notify_time", now.Format(time.DateTime))
	p.Set("notify_type", "trade_status_sync")
	p.Set("notify_id", fmt.Sprintf("2026%s0222%012d", now.Format("0102150405"), len(s.notifies)+1))
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
		p.Set("refund_fee", formatCents(t.refundedCents))
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
// schedule ends, or the server closes.
func (s *Server) startNotify(tradeNo string) error {
	if !s.enter() {
		return ErrClosed
	}
	go func() {
		defer s.wg.Done()
		s.notifyRound(tradeNo)
	}()
	return nil
}

func (s *Server) notifyRound(tradeNo string) {
	for i, wait := range s.opts.NotifySchedule {
		d := time.Duration(float64(wait) * s.opts.NotifyScale)
		if d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-s.ctx.Done():
				t.Stop()
				return
			}
		} else if s.ctx.Err() != nil {
			return
		}
		if s.notifyOnce(tradeNo, i+1) {
			return
		}
	}
	s.log.Warn("notify schedule exhausted without success", "trade_no", tradeNo)
}

// notifyOnce makes one attempt and records it; true when acknowledged.
func (s *Server) notifyOnce(tradeNo string, attempt int) bool {
	s.mu.Lock()
	t := s.trades[tradeNo]
	params, err := s.notifyParamsLocked(t)
	n := Notification{TradeNo: t.TradeNo, OutTradeNo: t.OutTradeNo, Attempt: attempt, URL: t.NotifyURL, Params: params, At: s.now()}
	s.mu.Unlock()
	if err != nil {
		n.Err = err.Error()
		s.recordNotify(n)
		return false
	}
	if n.URL == "" {
		return true // nowhere to notify
	}
	if s.dropNotfy.Load() {
		n.Dropped = true
		s.recordNotify(n)
		s.log.Info("notify dropped", "trade_no", tradeNo, "attempt", attempt)
		return false
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.NotifyTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.URL, strings.NewReader(params.Encode()))
	if err != nil {
		n.Err = err.Error()
		s.recordNotify(n)
		return false
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	req.Header.Set("User-Agent", "Mozilla/4.0 (fake alipay notify)")
	resp, err := s.client.Do(req)
	if err != nil {
		n.Err = err.Error()
		s.recordNotify(n)
		s.log.Info("notify failed", "trade_no", tradeNo, "attempt", attempt, "error", err)
		return false
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	n.Status = resp.StatusCode
	n.Body = string(b)
	// Alipay reads the body only: the merchant acknowledges with "success".
	n.Acked = strings.TrimSpace(n.Body) == "success"
	s.recordNotify(n)
	s.log.Info("notify answered", "trade_no", tradeNo, "attempt", attempt, "status", n.Status, "acked", n.Acked)
	return n.Acked
}

func (s *Server) recordNotify(n Notification) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notifies = append(s.notifies, n)
}
