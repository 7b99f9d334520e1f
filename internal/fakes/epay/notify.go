package epay

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// notifyParams are the signed parameters of a notify (and of the return_url
// redirect) for o: the order's values exactly as the merchant created them.
func (s *Server) notifyParamsLocked(o *order) url.Values {
	p := url.Values{}
	p.Set("pid", o.PID)
	p.Set("trade_no", o.TradeNo)
	p.Set("out_trade_no", o.OutTradeNo)
	p.Set("type", o.Type)
	p.Set("name", o.Name)
	p.Set("money", o.Money)
	p.Set("trade_status", "TRADE_SUCCESS")
	if o.Param != "" {
		p.Set("param", o.Param)
	}
	if o.APITradeNo != "" {
		p.Set("api_trade_no", o.APITradeNo)
	}
	p.Set("sign", Sign(p, s.opts.Merchants[o.PID]))
	p.Set("sign_type", "MD5")
	return p
}

// startNotify runs one notify round for a paid order in the background:
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
	o := s.orders[tradeNo]
	params := s.notifyParamsLocked(o)
	n := Notification{
		TradeNo:    o.TradeNo,
		OutTradeNo: o.OutTradeNo,
		Attempt:    attempt,
		Method:     s.opts.NotifyMethod,
		Params:     params,
		At:         s.now(),
	}
	notifyURL := o.NotifyURL
	s.mu.Unlock()

	n.URL = notifyURL
	var body io.Reader
	if n.Method == http.MethodGet {
		sep := "?"
		if strings.Contains(notifyURL, "?") {
			sep = "&"
		}
		n.URL = notifyURL + sep + params.Encode()
	} else {
		body = strings.NewReader(params.Encode())
	}

	if s.dropNotify.Load() {
		n.Dropped = true
		s.record(n)
		s.log.Info("notify dropped", "trade_no", tradeNo, "attempt", attempt)
		return false
	}

	ctx, cancel := context.WithTimeout(s.ctx, s.opts.NotifyTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, n.Method, n.URL, body)
	if err != nil {
		n.Err = err.Error()
		s.record(n)
		return false
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("User-Agent", "epay-fake-notify/1.0")
	resp, err := s.client.Do(req)
	if err != nil {
		n.Err = err.Error()
		s.record(n)
		s.log.Info("notify failed", "trade_no", tradeNo, "attempt", attempt, "error", err)
		return false
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	n.Status = resp.StatusCode
	n.Body = string(b)
	// epay looks at the body only: the merchant acknowledges with "success".
	n.Acked = strings.TrimSpace(n.Body) == "success"
	s.record(n)
	s.log.Info("notify answered", "trade_no", tradeNo, "attempt", attempt, "status", n.Status, "acked", n.Acked)
	return n.Acked
}

func (s *Server) record(n Notification) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notifies = append(s.notifies, n)
}
