// Package startstop is the one Start/Stop shape of the background services
// (the event worker, the elector, the listener, the heartbeat, the
// reconciler, the notification sender, the plugin scanner, the
// housekeeping): one loop in a goroutine, started at most once at a time,
// stopped by cancelling its context (or, for a loop that drains, by a
// signal first), waited for, and startable again afterwards. Each service
// embeds a Loop and adds its own work around it (resigning a lease,
// removing its node row, a log line).
//
// Periodic is that Loop for a job run every interval while a leader role
// is held (the payment trends fold, the idempotency key sweep, retention):
// the owner package gives it the round and its options, and a test waits
// on its rounds (internal/testsignal).
//
// StartAll and StopAll start a list of services in order and stop it in
// reverse: internal/app's background is one such list.
package startstop
