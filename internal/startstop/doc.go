// Package startstop is the one Start/Stop shape of the background services
// (the event worker, the elector, the listener, the heartbeat, the
// reconciler, the notification sender, the plugin scanner): one loop in a
// goroutine, started at most once at a time, stopped by cancelling its
// context (or, for a loop that drains, by a signal first), waited for, and
// startable again afterwards. Each service embeds a Loop and adds its own
// work around it (resigning a lease, removing its node row, a log line).
package startstop
