// Package epay is a fake epay v1 ("易支付") gateway: the merchant API that
// plugins/gateway/epay.lua talks to, served on a real listener so that a
// payment flow — create, pay, notify, query, refund — runs offline, in tests
// and in demos, over the same HTTP and signatures as a real deployment.
//
// It is test support, not a gateway: orders live in memory, there is no
// buyer, and "paying" is a button on its cashier page or the Pay hook. What
// it does insist on is the protocol, because that is what the plugin must
// get right:
//
//   - Signing: parameter names sorted ascending, `sign`, `sign_type` and
//     empty values skipped, `k=v` joined with `&`, the merchant key appended
//     directly, MD5, lowercase hex (Sign, SigningString). Every create is
//     verified; a bad signature answers {"code":-1,"msg":"签名错误"}.
//   - Values travel exactly as the merchant sent them: a money of "1" is
//     stored, notified, signed and queried as "1", never as "1.00".
//   - Notifies are at-least-once: GET (or POST) to notify_url with the signed
//     result; only a body of exactly `success` stops the round, otherwise it
//     retries on the epay schedule (0s, 15s, 15s, 30s, 3m, 10m, 20m, 30m,
//     30m, 30m, 60m; Options.NotifyScale shrinks it for tests).
//   - act=refund answers code 1 or, like some deployments, code 0 on
//     success (SetRefundCode); refunding more than was paid is an error.
//
// Endpoints:
//
//	POST /mapi.php                 signed create → {"code":1,"trade_no","payurl"|"qrcode"}
//	GET|POST /submit.php           signed create (page redirect) or ?trade_no= cashier page
//	POST /submit.php/pay           the cashier's Pay button (→ return_url, signed)
//	GET|POST /api.php?act=order    pid, key, trade_no|out_trade_no → order, status 1|0
//	POST /api.php?act=refund       pid, key, trade_no|out_trade_no, money
//
// An order's life, and its notify round:
//
//	created (status 0) ──Pay / cashier button──▶ paid (status 1, TRADE_SUCCESS)
//	                                                │
//	                                                ▼
//	      attempt n ──"success"──▶ done
//	         │ anything else, error, timeout, or dropped (DropNotify)
//	         ▼
//	      wait schedule[n] ──▶ attempt n+1 … schedule exhausted ──▶ given up
//	                                       (Renotify starts a new round)
//
// Test hooks: Pay, Renotify, Notifications, DropNotify, SetRefundCode,
// Refunds, Order, Orders, InjectFault (500s, slowness) and ClearFaults.
// Close stops listening, cancels pending notify waits and returns only when
// every goroutine the server started has ended.
package epay
