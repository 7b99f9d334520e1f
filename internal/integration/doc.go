// Package integration serves billing.integration.IntegrationService: what
// the platform knows about its downstream dependencies. Today that is the
// circuit breaker of every host the process's one outbound HTTP client has
// called (gateways, upstream providers, webhook notifiers), so an admin can
// see which host is failing and when the next probe goes out:
//
//	closed ──5 consecutive failures──▶ open ──30 s──▶ half_open ──probe ok──▶ closed
//	                                    ▲                 │
//	                                    └── probe fails ──┘
//
// The breakers live in memory, per instance: the answer is the answering
// instance's view, as the breakers themselves are.
package integration
