// Package wechatpay is a fake WeChat Pay API v3 (微信支付 APIv3) for a
// directly connected merchant: the https://api.mch.weixin.qq.com that
// plugins/gateway/wechatpay.lua talks to, served on a real listener so a
// payment flow — order, pay, notify, query, close, refund — runs offline,
// in tests and in demos, over the same HTTP, JSON, signatures and
// encryption as the real one, as WeChat Pay's published v3 documents
// describe them.
//
// It is test support, not a gateway: orders live in memory, there is no
// buyer, and "paying" is the Pay hook or the button of its H5 page. Its
// signing and encryption are Go's crypto/rsa and crypto/cipher, apart from
// the plugin's (the service's host functions), so each checks the other.
// What it insists on is the protocol:
//
//   - Requests: Authorization: WECHATPAY2-SHA256-RSA2048 with mchid,
//     nonce_str, signature, timestamp and serial_no; the signature is
//     SHA256withRSA (PKCS #1 v1.5), base64, by the merchant's key over
//     "METHOD\nPATH?QUERY\ntimestamp\nnonce\nbody\n"; serial_no must be the
//     merchant certificate's; the timestamp within 5 minutes. Anything else
//     is 401 {"code":"SIGN_ERROR"}. Bodies are JSON (Content-Type
//     application/json); bad ones are 400 PARAM_ERROR.
//   - Answers: every one — errors too — is signed with the fake's key (the
//     "WeChat Pay public key", PublicKeyPEM, named by KeySerial in
//     Wechatpay-Serial) over "timestamp\nnonce\nbody\n", in the headers
//     Wechatpay-Timestamp, Wechatpay-Nonce, Wechatpay-Signature and
//     Wechatpay-Serial; Request-ID names the request.
//   - Orders: POST /v3/pay/transactions/native (→ code_url) and
//     /v3/pay/transactions/h5 (scene_info.payer_client_ip and h5_info.type
//     required; → h5_url, the fake's page). appid, mchid, description (at
//     most 127 characters), out_trade_no (letters, digits, _-*, at most 32),
//     notify_url, amount.total (fen, a positive integer) and
//     amount.currency CNY. The same out_trade_no again with the same
//     parameters answers the same order; with others 400 INVALID_REQUEST,
//     once paid or closed 400 ORDERPAID.
//   - GET /v3/pay/transactions/out-trade-no/{out_trade_no}?mchid= (404
//     ORDER_NOT_EXIST), POST …/{out_trade_no}/close with {"mchid"} (204;
//     a paid order 400 ORDERPAID); trade_state NOTPAY, SUCCESS, REFUND,
//     CLOSED.
//   - Refunds: POST /v3/refund/domestic/refunds (out_trade_no or
//     transaction_id, out_refund_no, amount.refund, amount.total equal to
//     the order's, currency CNY), idempotent per out_refund_no (the same
//     again answers the same refund; other amounts 400 INVALID_REQUEST,
//     more than is left 403 NOT_ENOUGH); GET
//     /v3/refund/domestic/refunds/{out_refund_no} (404 RESOURCE_NOT_EXISTS).
//     A refund answers SUCCESS, or PROCESSING with Options.RefundsPending
//     until CompleteRefund.
//   - Notifications: POST JSON {id, create_time, event_type, resource_type
//     "encrypt-resource", resource {algorithm "AEAD_AES_256_GCM",
//     ciphertext, nonce, associated_data, original_type}, summary}, signed
//     like an answer, the resource sealed with the merchant's APIv3 key
//     (12-byte nonce, associated_data "transaction" or "refund"):
//     TRANSACTION.SUCCESS for a payment, REFUND.SUCCESS / REFUND.CLOSED for
//     a refund (to the refund's notify_url, else the order's). Any 2xx
//     acknowledges; otherwise it retries on WeChat Pay's schedule (15s,
//     15s, 30s, 3m, 10m, 20m, 30m, 30m, 30m, 60m, 3h, 3h, 3h, 6h, 6h;
//     Options.NotifyScale shrinks it for tests).
//
// Test hooks: Pay, Renotify, Transaction and SealNotify/SignNotify (forge
// what only WeChat Pay can sign or encrypt), DropNotify, Notifications,
// Requests, Refunds, CompleteRefund, Order. Close stops listening, ends
// pending notify waits and returns when every goroutine it started ended.
package wechatpay
