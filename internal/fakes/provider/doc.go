// Package provider is a fake instance-provider API, the counterpart of
// plugins/provider/http_provider.lua: a small JSON-over-HTTP service on a
// real listener that creates and drives "instances" in memory, so the
// provisioning path of an order (order_paid → provision → active) runs
// offline.
//
// Every call needs `Authorization: Bearer <token>` (401 otherwise).
//
//	GET  /v1/ping                          {"ok":true} (the plugin's test_config)
//	POST /v1/instances                     {order_id, plan, customer_id} → 201 instance
//	                                       a repeat for the same order_id → 200, the same instance
//	GET  /v1/instances/{id}                instance
//	POST /v1/instances/{id}/{action}       start|stop|reboot|suspend|unsuspend|terminate
//	GET  /v1/instances/{id}/usage          {"items":[{"metric","quantity","unit"}]}
//
// Provisioning is idempotent on order_id because the service delivers
// order_paid at least once and the plugin's HTTP client may retry a POST
// whose answer was lost; one order never gets two machines. Errors are
// {"error":{"code","message"}} with 400, 404, 409 (an action the current
// status does not allow) or 422 (FailProvision).
//
// Instance states:
//
//	provisioning ──(Options.ProvisionDelay)──▶ running ◀──start── stopped
//	                                            │  ▲ └────stop─────▶
//	                                            │  └──unsuspend──┐
//	                                     suspend▼                │
//	                                         suspended ──────────┘
//	any ──terminate──▶ terminated (final)
//
// Test hooks: FailProvision / ClearProvisionFailure, InjectFault (500s,
// slowness) / ClearFaults, ProvisionRequests and InstancesFor (per order),
// ActionCalls, UnauthorizedCalls, Instance(s), SetStatus, SetUsage.
package provider
