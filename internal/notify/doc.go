// Package notify queues and delivers notifications: an e-mail channel
// (SMTP through github.com/wneessen/go-mail) and a webhook channel (a
// notifier plugin, plugins/notifier/webhook.lua: an HMAC-signed POST).
//
// Queuing and delivery are apart on purpose. An event handler calls
// Enqueue inside its transaction: it renders the texts and inserts one
// notifications row per recipient, and is done — a failing channel never
// holds an event up. The rows are unique per (event, channel, recipient),
// so a retried handler queues nothing twice.
//
//	pending ──claim (attempts+1, next_attempt_at = now + lease)──▶ send
//	   ▲                                                            │
//	   └──── failed, retryable: next_attempt_at = now + backoff ◀───┤
//	                                                                ├── ok ──▶ sent
//	        permanent refusal, or the max_attempts-th failure ──────┴────────▶ failed
//
// The sender loop (Start/Stop) claims due rows with FOR UPDATE SKIP LOCKED,
// so it may run on every instance; a sender that dies mid-send leaves the
// row due again after the claim's lease. Delivery is therefore at least
// once: webhook receivers de-duplicate on X-Paymentd-Notification-Id, and
// the e-mail carries the same header. It wakes on NOTIFY
// paymentd_notifications (sent by InsertNotifications at commit) and polls
// every PollInterval.
//
// Recipients of an order notice: the customer (e-mail), every
// [notify].admin_emails address, and every [[notify.webhooks]] endpoint —
// whose name is the row's recipient; its URL and secret stay in the
// configuration and go to the plugin only.
package notify
