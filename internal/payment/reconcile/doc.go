// Package reconcile is the payment domain's background service: it repairs
// lost gateway callbacks by asking the gateways about pending payments that
// are due (claimed FOR UPDATE SKIP LOCKED, with backoff), applying each
// answer through the domain's settlement. internal/app runs it on the
// billing leader only. (Invoices past due are marked overdue by the
// billing run, internal/order/renewal.)
package reconcile
