package alipay

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rustbill/paymentd/internal/fakes/fakekit"
	"github.com/rustbill/paymentd/internal/money"
)

// answer is the value of an Open API response node.
type answer map[string]any

// gatewayError is refused at the gateway, before any business: Alipay
// answers it in an unsigned "error_response" node.
type gatewayError struct{ code, msg, subCode, subMsg string }

func (e gatewayError) node() answer {
	return answer{"code": e.code, "msg": e.msg, "sub_code": e.subCode, "sub_msg": e.subMsg}
}

func missing(sub, msg string) *gatewayError {
	return &gatewayError{"40001", "Missing Required Arguments", sub, msg}
}

func invalid(sub, msg string) *gatewayError {
	return &gatewayError{"40002", "Invalid Arguments", sub, msg}
}

// business is a signed business failure (code 40004).
func business(sub, msg string) answer {
	return answer{"code": "40004", "msg": "Business Failed", "sub_code": sub, "sub_msg": msg}
}

func ok(fields answer) answer {
	fields["code"] = "10000"
	fields["msg"] = "Success"
	return fields
}

var methods = map[string]bool{
	"alipay.trade.page.pay":             true,
	"alipay.trade.precreate":            true,
	"alipay.trade.query":                true,
	"alipay.trade.refund":               true,
	"alipay.trade.fastpay.refund.query": true,
}

// authenticate runs the gateway's checks of a call's common parameters and
// signature; it returns the app or the refusal.
func (s *Server) authenticate(p url.Values) (App, *gatewayError) {
	appID := p.Get("app_id")
	if appID == "" {
		return App{}, missing("isv.missing-app-id", "缺少AppID参数")
	}
	method := p.Get("method")
	if method == "" {
		return App{}, missing("isv.missing-method", "缺少方法名参数")
	}
	if !methods[method] {
		return App{}, invalid("isv.invalid-method", "不存在的方法名")
	}
	app, known := s.apps[appID]
	if !known {
		return App{}, invalid("isv.invalid-app-id", "无效的AppID参数")
	}
	if p.Get("sign") == "" {
		return App{}, missing("isv.missing-signature", "缺少签名参数")
	}
	if p.Get("sign_type") != "RSA2" {
		return App{}, invalid("isv.invalid-signature-type", "无效的签名类型")
	}
	if cs := p.Get("charset"); !strings.EqualFold(cs, "utf-8") {
		return App{}, invalid("isv.invalid-charset", "字符集错误")
	}
	if p.Get("version") != "1.0" {
		return App{}, invalid("isv.invalid-version", "版本号错误")
	}
	ts, err := time.ParseInLocation(time.DateTime, p.Get("timestamp"), cst)
	if err != nil {
		return App{}, invalid("isv.invalid-timestamp", "非法的时间戳参数")
	}
	// A server's call must be fresh: off by some minutes (clocks drift),
	// never in another time zone (UTC is eight hours off). A page.pay link
	// is opened by the buyer's browser whenever, so only its form counts.
	if d := s.now().Sub(ts); method != "alipay.trade.page.pay" && (d > 15*time.Minute || d < -15*time.Minute) {
		return App{}, invalid("isv.invalid-timestamp", "非法的时间戳参数 (not within 15 minutes of Beijing time)")
	}
	if !Verify(app.PublicKey, p) {
		return App{}, invalid("isv.invalid-signature", "验签出错，建议检查签名字符串或签名私钥与应用公钥是否匹配，网关生成的验签字符串为："+SigningString(p, false))
	}
	if f := p.Get("format"); f != "" && !strings.EqualFold(f, "JSON") {
		return App{}, invalid("isv.invalid-format", "无效的数据格式")
	}
	return app, nil
}

// bizContent decodes the biz_content parameter into a map of strings.
func bizContent(p url.Values) (map[string]string, *gatewayError) {
	raw := p.Get("biz_content")
	if raw == "" {
		return nil, missing("isv.missing-biz-content", "缺少业务参数")
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return nil, invalid("isv.invalid-biz-content", "业务参数格式错误")
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		switch x := v.(type) {
		case string:
			out[k] = x
		case nil:
		default:
			// Numbers and arrays are allowed by some methods; the fake reads
			// strings only and keeps the JSON text of anything else.
			out[k] = jsonText(x)
		}
	}
	return out, nil
}

func (s *Server) record(r *http.Request, p url.Values, verified bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, Request{HTTPMethod: r.Method, Params: fakekit.CloneValues(p), Verified: verified})
}

func (s *Server) handleGateway(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeNode(w, "error_response", invalid("isv.invalid-parameter", "参数错误").node(), "")
		return
	}
	p := r.Form
	method := p.Get("method")
	app, gerr := s.authenticate(p)
	s.record(r, p, gerr == nil)
	if method == "alipay.trade.page.pay" {
		s.pagePay(w, r, app, p, gerr)
		return
	}
	if gerr != nil {
		writeNode(w, "error_response", gerr.node(), "")
		return
	}
	if r.Method != http.MethodPost {
		writeNode(w, "error_response", invalid("isv.invalid-http-method", "请使用POST方式提交").node(), "")
		return
	}
	biz, gerr := bizContent(p)
	if gerr != nil {
		writeNode(w, "error_response", gerr.node(), "")
		return
	}
	var a answer
	switch method {
	case "alipay.trade.precreate":
		a = s.precreate(app, p, biz)
	case "alipay.trade.query":
		a = s.query(app, biz)
	case "alipay.trade.refund":
		a = s.refund(app, biz)
		// Alipay notifies a refund that moved money to the trade's
		// notify_url (trade_status_sync, with refund_fee and out_biz_no).
		if a["fund_change"] == "Y" {
			if err := s.startNotify(a["trade_no"].(string)); err != nil {
				s.log.Warn("refund notify not started", "error", err)
			}
		}
	case "alipay.trade.fastpay.refund.query":
		a = s.refundQuery(app, biz)
	}
	node := strings.ReplaceAll(method, ".", "_") + "_response"
	raw := jsonText(a)
	sig, err := SignText(s.key, raw)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeNode(w, node, a, sig)
}

// writeNode writes {"<node>":<value>,"sign":"…"}: the signature covers the
// node's JSON text exactly as written, which a client cuts out of the body
// to verify (as Alipay's SDKs do).
func writeNode(w http.ResponseWriter, node string, v answer, sig string) {
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	body := `{"` + node + `":` + jsonText(v)
	if sig != "" {
		body += `,"sign":"` + sig + `"`
	}
	_, _ = w.Write([]byte(body + "}"))
}

// create validates the business parameters of a page.pay or precreate and
// returns the trade (an unpaid one with the same parameters is reused,
// as Alipay does), or a business failure.
func (s *Server) create(app App, method string, p url.Values, biz map[string]string) (*trade, answer) {
	out := biz["out_trade_no"]
	if !outNoRE.MatchString(out) {
		return nil, business("ACQ.INVALID_PARAMETER", "参数无效 (out_trade_no: letters, digits and _ only, at most 64)")
	}
	amount := biz["total_amount"]
	cents, valid := fakekit.ParseCents(amount, maxAmountDigits)
	if !valid || cents < 1 || cents > 100_000_000_00 {
		return nil, business("ACQ.INVALID_PARAMETER", "参数无效 (total_amount: 0.01 to 100000000, two decimals at most)")
	}
	subject := biz["subject"]
	if subject == "" || len([]rune(subject)) > 256 || strings.ContainsAny(subject, "/=&") {
		return nil, business("ACQ.INVALID_PARAMETER", "参数无效 (subject: 1 to 256 characters, no / = &)")
	}
	want := "FACE_TO_FACE_PAYMENT"
	if method == "alipay.trade.page.pay" {
		want = "FAST_INSTANT_TRADE_PAY"
	}
	if pc := biz["product_code"]; pc != want && !(pc == "" && method == "alipay.trade.precreate") {
		return nil, business("ACQ.PRODUCT_CODE_ERROR", "产品码错误 (product_code must be "+want+")")
	}
	if nu := p.Get("notify_url"); nu != "" {
		if u, err := url.Parse(nu); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, business("ACQ.INVALID_PARAMETER", "参数无效 (notify_url)")
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if tn, exists := s.byOut[app.AppID+"\x00"+out]; exists {
		t := s.trades[tn]
		switch {
		case t.Status == TradeSuccess:
			return nil, business("ACQ.TRADE_HAS_SUCCESS", "交易已被支付")
		case t.Status == TradeClosed:
			return nil, business("ACQ.TRADE_HAS_CLOSE", "交易已经关闭")
		case t.TotalAmount != amount || t.Subject != subject:
			return nil, business("ACQ.CONTEXT_INCONSISTENT", "交易信息被篡改")
		}
		return t, nil
	}
	s.seq++
	now := s.now()
	t := &trade{Trade: Trade{
		AppID:       app.AppID,
		SellerID:    app.SellerID,
		Method:      method,
		TradeNo:     now.In(cst).Format("20060102") + fmt.Sprintf("22001%011d", s.seq),
		OutTradeNo:  out,
		Subject:     subject,
		TotalAmount: amount,
		NotifyURL:   p.Get("notify_url"),
		ReturnURL:   p.Get("return_url"),
		Status:      WaitBuyerPay,
		CreatedAt:   now,
	}, cents: cents, byRequest: map[string]int64{}}
	s.trades[t.TradeNo] = t
	s.byOut[app.AppID+"\x00"+out] = t.TradeNo
	s.log.Info("trade created", "trade_no", t.TradeNo, "out_trade_no", out, "app_id", app.AppID, "total_amount", amount, "method", method)
	return t, nil
}

func (s *Server) precreate(app App, p url.Values, biz map[string]string) answer {
	t, fail := s.create(app, "alipay.trade.precreate", p, biz)
	if fail != nil {
		return fail
	}
	// A real qr_code is https://qr.alipay.com/…, opened by the Alipay app;
	// the fake's is its cashier page, so a demo can still be clicked through.
	return ok(answer{"out_trade_no": t.OutTradeNo, "qr_code": s.URL() + "/cashier?trade_no=" + url.QueryEscape(t.TradeNo)})
}

func (s *Server) findLocked(app App, biz map[string]string) *trade {
	if tn := biz["trade_no"]; tn != "" {
		if t := s.trades[tn]; t != nil && t.AppID == app.AppID {
			return t
		}
		return nil
	}
	if out := biz["out_trade_no"]; out != "" {
		return s.trades[s.byOut[app.AppID+"\x00"+out]]
	}
	return nil
}

func (s *Server) query(app App, biz map[string]string) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.findLocked(app, biz)
	if t == nil {
		return business("ACQ.TRADE_NOT_EXIST", "交易不存在")
	}
	a := ok(answer{
		"trade_no":         t.TradeNo,
		"out_trade_no":     t.OutTradeNo,
		"trade_status":     t.Status,
		"total_amount":     money.FormatCents(t.cents),
		"buyer_pay_amount": "0.00",
		"point_amount":     "0.00",
		"invoice_amount":   "0.00",
	})
	if !t.PaidAt.IsZero() {
		a["buyer_logon_id"] = "buy***@example.com"
		a["buyer_user_id"] = "2088102177846880"
		a["buyer_pay_amount"] = money.FormatCents(t.cents)
		a["invoice_amount"] = money.FormatCents(t.cents)
		a["send_pay_date"] = t.PaidAt.In(cst).Format(time.DateTime)
	}
	return a
}

func (s *Server) refund(app App, biz map[string]string) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.findLocked(app, biz)
	if t == nil {
		return business("ACQ.TRADE_NOT_EXIST", "交易不存在")
	}
	reqNo := biz["out_request_no"]
	if reqNo == "" {
		// Alipay defaults it to the out_trade_no, so a second partial refund
		// without one would repeat the first; the fake insists on it.
		return business("ACQ.INVALID_PARAMETER", "参数无效 (out_request_no is required)")
	}
	if !outNoRE.MatchString(reqNo) {
		return business("ACQ.INVALID_PARAMETER", "参数无效 (out_request_no: letters, digits and _ only, at most 64)")
	}
	cents, valid := fakekit.ParseCents(biz["refund_amount"], maxAmountDigits)
	if !valid || cents < 1 {
		return business("ACQ.INVALID_PARAMETER", "参数无效 (refund_amount)")
	}
	done := func(fundChange string) answer {
		return ok(answer{
			"trade_no":       t.TradeNo,
			"out_trade_no":   t.OutTradeNo,
			"buyer_logon_id": "buy***@example.com",
			"fund_change":    fundChange,
			"refund_fee":     money.FormatCents(t.refundedCents),
			"send_back_fee":  money.FormatCents(cents),
			"gmt_refund_pay": s.now().In(cst).Format(time.DateTime),
		})
	}
	// The same out_request_no again is the same refund: answered again,
	// paid once (fund_change N: no money moved this time).
	if prev, seen := t.byRequest[reqNo]; seen {
		if prev != cents {
			return business("ACQ.DISCORDANT_REPEAT_REQUEST", "请求信息不一致 (out_request_no was used with another refund_amount)")
		}
		return done("N")
	}
	if t.Status != TradeSuccess {
		return business("ACQ.TRADE_STATUS_ERROR", "交易状态不合法")
	}
	if cents > t.cents-t.refundedCents {
		return business("ACQ.REFUND_AMT_NOT_EQUAL_TOTAL", "退款金额超限")
	}
	t.refundedCents += cents
	t.byRequest[reqNo] = cents
	t.lastRefund, t.lastRefundAt = reqNo, s.now()
	if t.refundedCents == t.cents {
		t.Status = TradeClosed
	}
	s.refunds = append(s.refunds, Refund{AppID: app.AppID, TradeNo: t.TradeNo, OutTradeNo: t.OutTradeNo,
		OutRequestNo: reqNo, Amount: biz["refund_amount"], At: s.now()})
	s.log.Info("refund paid", "trade_no", t.TradeNo, "out_request_no", reqNo, "refund_amount", biz["refund_amount"])
	return done("Y")
}

func (s *Server) refundQuery(app App, biz map[string]string) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.findLocked(app, biz)
	if t == nil {
		return business("ACQ.TRADE_NOT_EXIST", "交易不存在")
	}
	a := ok(answer{"trade_no": t.TradeNo, "out_trade_no": t.OutTradeNo})
	reqNo := biz["out_request_no"]
	if cents, seen := t.byRequest[reqNo]; seen {
		// Alipay answers an unknown refund with a bare success: no
		// refund_status means "no such refund".
		a["out_request_no"] = reqNo
		a["refund_amount"] = money.FormatCents(cents)
		a["total_amount"] = money.FormatCents(t.cents)
		a["refund_status"] = "REFUND_SUCCESS"
	}
	return a
}
