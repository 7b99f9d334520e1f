// Package app wires paymentd together: the database pool, migrations under
// the migration role, the bootstrap admin, and the server with every service.
// cmd/paymentd and the end-to-end tests both start the service through it.
//
// It owns no rule of its own: it builds the domain services (payment,
// order, identity, gateway, fulfillment) over one pool, their Connect
// handlers with the shared interceptors (errors, validation, credentials,
// the policy of each procedure), the HTTP routes (/callbacks, /admin,
// probes), and the background services with their leader roles — the
// reconciler and the billing run (renewals, overdue invoices) under `billing`, the event
// worker and the payment-timeout scanner under `event_worker`, plus the
// heartbeat, the plugin scanner and the notifier on every instance — and
// it starts and stops them in order (app.go, events.go, plugins.go,
// telemetry.go).
package app
