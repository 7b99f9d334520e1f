package epay

import (
	"net/url"
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
// schedule ends, or the server closes. Each attempt sends the order as it
// stands then.
func (s *Server) startNotify(tradeNo string) error {
	return s.notify.Start(tradeNo, func() Notification {
		s.mu.Lock()
		defer s.mu.Unlock()
		o := s.orders[tradeNo]
		return Notification{
			TradeNo:    o.TradeNo,
			OutTradeNo: o.OutTradeNo,
			URL:        o.NotifyURL,
			Params:     s.notifyParamsLocked(o),
			At:         s.now(),
		}
	})
}
