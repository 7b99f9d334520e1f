// Command paymentd-soak runs a cluster of real paymentd processes under a
// mixed load for a while, injecting faults the whole time, and ends with
// the money check: every payment the (fake) gateway took settled exactly
// once, nothing doubled, every event done or visibly failed, and
// internal/ledger.Verify clean.
//
//	go run ./cmd/paymentd-soak --minutes 10      (task soak -- --minutes 10)
//	go run ./cmd/paymentd-soak --overload        (task soak -- --overload)
//
// --overload runs only the overload scenario (overload.go): one node at
// [server].max_concurrency 4 under 20 clients whose calls carry deadlines
// (--overload-deadline, 100 ms; --overload-queue-timeout sets the node's
// [server].queue_timeout_ms, 0 by default);
// it prints p50/p99 of the calls served and the codes of the rest, fails
// when any call answered something other than a clean refusal
// (DeadlineExceeded, ResourceExhausted, Unavailable "database busy,
// retry"), then runs the money check.
//
// The load: customers order and pay through the epay gateway (the fake
// notifies the node that created the payment; half the notifications are
// sent once more to another node), pay from their balance after an admin
// top-up, get partial refunds, and send hostile callbacks (changed amounts,
// forged signatures, another payment's signature, unknown interfaces) that
// must all be refused.
//
// The faults, one at a time in a loop: an instance killed with SIGKILL
// (often the event_worker leader) and restarted; an instance stopped
// gracefully and restarted; every database connection terminated;
// PostgreSQL itself restarted (only on the private cluster); the gateway
// answering 500, answering slowly, hanging up, or its notifications lost.
//
// By default PostgreSQL is a private cluster in a temporary directory
// (internal/pgcluster), so restarting it harms nobody; --db uses an
// existing server instead (a database of its own is created and dropped)
// and leaves PostgreSQL restarts out. Exit status 0 means nothing was lost,
// doubled or broken.
package main
