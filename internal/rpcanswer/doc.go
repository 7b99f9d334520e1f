// Package rpcanswer answers a request in its client's protocol from an HTTP
// layer in front of the Connect handlers: the rate limit, the concurrency
// limit, the request body reader. Such a layer has no handler to return a
// *connect.Error from, yet a gRPC client must see a grpc-status, a gRPC-Web
// client the same in its trailers frame and a Connect client its JSON error
// with the matching HTTP status — otherwise each reports a transport
// failure (Unknown or Unavailable) instead of the code that says what to do.
//
// connect.ErrorWriter knows the three protocols; this package adds what the
// layers share: Retry-After, the google.rpc.RetryInfo detail, and a plain
// text answer for anything that is not RPC, with the HTTP status of the
// code or one the layer names (Status: 408, 413).
package rpcanswer
