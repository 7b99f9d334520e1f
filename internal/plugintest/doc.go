// Package plugintest runs the shipped Lua plugins (plugins/ at the
// repository root) in the real sandbox of internal/plugin, with their HTTP
// going through the real internal/outbound client, against the fakes of
// internal/fakes (epay, provider) and httptest receivers. It is test support:
// the helpers here are imported from _test files only.
//
// The tests in this package are the plugins' own tests: known-answer
// signatures written out by hand, and whole flows over real sockets —
//
//	create_payment ──POST mapi.php──▶ fake epay ──cashier "Pay"──▶ paid
//	                                     │
//	                   notify (GET/POST) ▼
//	   httptest /callbacks/gw ──parse_callback──▶ valid? ──answer ack "success"
//
// so a change to a script that breaks the protocol fails here, before any
// payment reaches a real gateway.
package plugintest
