// Command paymentd-soak runs a cluster of real paymentd processes under a
// mixed load for a while, injecting faults the whole time, and ends with
// the money check: every payment the (fake) gateway took settled exactly
// once (or, when its order ended meanwhile, failed with the money captured
// to return), nothing doubled, every event done or visibly failed, every
// renewal period paid once and every paid invoice's money applied, nothing
// captured and forgotten, and internal/ledger.Verify clean. It prints the
// payments, invoices, periods, orders and refunds the run made, and every
// Internal answer grouped by call and message ([gateway] when the message
// names a gateway's failure) with the nodes' logged causes.
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
// Recurring orders renew meanwhile (internal/clustertest/renewals.go):
// the nodes run with [billing].test_clock on and a billing pass every
// second; --renewals customers (6) each order a monthly product, paid
// through the gateway or from the balance; every 3 s the billing clock
// moves 9 days on every live node (AdvanceBillingClock; a restarted node
// is caught up the whole way). Each open renewal invoice is paid through
// the gateway or from the balance (an admin credits it, the billing run
// applies it), and settled renewal payments are refunded now and then,
// half of them in full.
//
// The faults, one at a time in a loop: an instance killed with SIGKILL
// (often the event_worker leader) and restarted; the billing leader killed
// in the middle of the pass an advance of its clock runs; an instance stopped
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
