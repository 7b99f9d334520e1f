// Package clustertest runs real paymentd processes against one database and
// drives them the way production does — several instances, customers paying
// through a (fake) gateway that notifies whichever instance it likes,
// admins refunding — while faults are injected: an instance killed with
// SIGKILL, PostgreSQL restarted or its connections cut, a gateway that is
// slow, failing or gone. It is the harness of the cluster and fault tests
// and of the soak command (cmd/paymentd-soak); nothing in the service
// imports it.
//
// What a run must end with is the same every time: every payment the
// gateway took is settled exactly once, every paid order has one order_paid
// event and reaches active, every event is done or visibly failed, at most
// one instance held a leader role at any moment, and internal/ledger.Verify
// reports a clean ledger. Bundle.Check says which of these failed.
//
//	Build ──▶ paymentd binary (deploy/build.sh's flags, once per process)
//	BuildCommit ▶ a past commit's paymentd and plugins (the release)
//	Start ──▶ Cluster: N nodes, own ports, one database, short leases
//	            │  Node.Kill (SIGKILL) / Node.Stop (SIGTERM) / Node.Start,
//	            │  Node.Use (another binary at the next Start)
//	            │  Balancer: round robin in front, as nginx (Bundle.Through)
//	            ▼
//	Setup ──▶ Bundle: admin session, epay interface on the fake, a product
//	            │
//	Run   ──▶ Load: workers order, pay, notify (twice, to any node),
//	            │    send hostile callbacks, refund, pay from the balance
//	            ▼
//	Settle ─▶ wait until nothing is pending that should not be
//	Check  ─▶ accounting against the fake gateway + ledger.Verify
package clustertest
