// Package server is the transport edge: one HTTP listener serving HTTP/1.1 and
// HTTP/2 (cleartext or TLS) on the same port, the Connect handlers (gRPC,
// gRPC-Web and Connect JSON), gRPC server reflection, and the platform routes.
//
//	request ─▶ Options.Observe (request id, span, access line: every request)
//	        ─▶ panic recovery (500 / Internal, logged, counted: recover.go)
//	        ─▶ /health (answered here, before every other layer)
//	        ─▶ [server].admin_path/* (the embedded admin console, before every layer)
//	        ─▶ read deadline ([server].read_timeout_secs)
//	        ─┬─ /ready, /grpc.reflection.v1.ServerReflection/*, v1alpha (no slot)
//	         └─ CORS ([server].cors_allowed_origins; preflights answered here;
//	            never /callbacks)
//	            ─▶ body read whole (outside the limit, under the deadline;
//	               too large: 413 at once; not in time: cut off)
//	            ─▶ middleware layers (concurrency limit, rate limit, credentials)
//	            ─▶ mux ── /billing.payment.PaymentService/*, …
//	                       (interceptors; innermost, a panic becomes Internal)
//
// The console's files are public, static and held in memory: they need no
// credential, so they skip the credential layers (which would look a session
// cookie up in the database for every script and stylesheet) and the
// concurrency limit that protects the API. Its API calls are ordinary Connect
// requests and pass every layer.
//
// A request's body is read whole before the request waits for a slot of the
// concurrency limit (body.go), and no request reaches the limit with its
// body unread: a client that trickles its body, or never sends it, is cut
// off by the read timeout without having held a slot (answered in its own
// protocol, its connection ended); a body declared or grown over the limit
// is refused at once; the memory of bodies being read is charged by the
// bytes received, so declaring large bodies and sending nothing spends none
// of it.
package server
