// Package alipay is a fake Alipay Open API gateway (支付宝开放平台): the
// https://openapi.alipay.com/gateway.do that plugins/gateway/alipay.lua
// talks to, served on a real listener so that a payment flow — create,
// pay, notify, query, refund — runs offline, in tests and in demos, over
// the same HTTP, parameters and RSA2 signatures as the real one.
//
// It is test support, not a gateway: trades live in memory, there is no
// buyer, and "paying" is a button on its cashier page or the Pay hook. Its
// signing code is Go's crypto/rsa, an implementation apart from the
// plugin's (the service's host functions), so that each checks the other.
// What it insists on is the protocol:
//
//   - Requests: common parameters app_id, method, charset=utf-8,
//     sign_type=RSA2, timestamp ("yyyy-MM-dd HH:mm:ss", Beijing time,
//     within 15 minutes but for page.pay links), version=1.0, biz_content (JSON), and sign:
//     SHA256withRSA (PKCS #1 v1.5), base64, by the app's key over every
//     other non-empty parameter, names sorted, `k=v` joined with `&`,
//     values raw (SigningString). A call failing these checks is answered
//     {"error_response":{"code":"40001"|"40002","sub_code":"isv.…"}},
//     unsigned, as Alipay's gateway does.
//   - Answers: {"<method with _>_response":{…},"sign":"…"}, the signature
//     by the fake's key (PublicKeyPEM) over the node's JSON text exactly
//     as written; code 10000 is success, 40004 a business failure with
//     sub_code ACQ.… (TRADE_NOT_EXIST, TRADE_STATUS_ERROR,
//     REFUND_AMT_NOT_EQUAL_TOTAL, DISCORDANT_REPEAT_REQUEST, …).
//   - out_trade_no and out_request_no are letters, digits and _ only, at
//     most 64 (Alipay's documented rule); total_amount 0.01 to 100000000
//     with at most two decimals; subject without / = &.
//   - Notifies: POST form (application/x-www-form-urlencoded; charset=utf-8)
//     to notify_url, notify_type trade_status_sync, signed like a request
//     but without sign_type in the signed text; amounts with two decimals.
//     Only a body of exactly `success` ends the round; otherwise it
//     retries on Alipay's schedule (0, 4m, 10m, 10m, 1h, 2h, 6h, 15h;
//     Options.NotifyScale shrinks it for tests).
//   - alipay.trade.refund is idempotent per out_request_no: the same one
//     again is answered again (fund_change N) and pays out nothing; with
//     another refund_amount it is ACQ.DISCORDANT_REPEAT_REQUEST. A trade
//     refunded in full becomes TRADE_CLOSED. A refund that moved money is
//     notified like a payment (a new round, refund_fee, out_biz_no and
//     gmt_refund added; TRADE_SUCCESS, or TRADE_CLOSED once all went back).
//
// Methods of POST /gateway.do: alipay.trade.page.pay (GET or POST, from
// the buyer's browser: → the cashier page), alipay.trade.precreate
// (→ qr_code, here a link to the cashier page), alipay.trade.query,
// alipay.trade.refund and alipay.trade.fastpay.refund.query.
//
// A trade's life:
//
//	page.pay opened / precreate ──▶ WAIT_BUYER_PAY ──Pay──▶ TRADE_SUCCESS ──refunded in full──▶ TRADE_CLOSED
//	                                                              │ notify round: attempt n ──"success"──▶ done
//	                                                              ▼   anything else: wait schedule[n], attempt n+1
//
// Test hooks: Pay, Renotify, NotifyParams and SignNotify (forge what only
// Alipay can sign), DropNotify, Notifications, Requests, Refunds, Trade,
// Trades. Close stops listening, cancels pending notify waits and returns
// only when every goroutine the server started has ended.
package alipay
