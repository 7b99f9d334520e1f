package server

import (
	"net/http"
	"strings"

	connectcors "connectrpc.com/cors"
	"github.com/rs/cors"
)

// corsMaxAge is how long a browser may cache a preflight answer, in
// seconds: two hours, Chromium's own ceiling, so a page on an allowed
// origin asks once per procedure and header set, not before every call.
const corsMaxAge = 7200

// withCORS lets browser pages on origins call the API with gRPC-Web and
// Connect: the preflight is answered here, before the body is read or a slot
// of the concurrency limit is taken, and real answers carry the
// Access-Control headers those protocols need (connectrpc.com/cors lists
// them; ours add the credential and request-id headers). No origins: no
// layer at all.
//
// Only the procedures of the API's services (paths /<service>/<method>)
// get CORS. Everything else never does: /callbacks (gateways call it server
// to server; a browser has no business there), the CSV exports and the
// admin console (answered before this layer), which are same-origin by
// design. Credentials
// (cookies) are never allowed cross-origin: the admin session cookie
// authenticates only same-origin requests, so an allowed origin cannot
// ride on an operator's session; such pages send a bearer token or an API
// key in a header instead.
func withCORS(origins, services []string, next http.Handler) http.Handler {
	if len(origins) == 0 {
		return next
	}
	c := cors.New(cors.Options{
		AllowedOrigins:   origins,
		AllowedMethods:   connectcors.AllowedMethods(),
		AllowedHeaders:   append(connectcors.AllowedHeaders(), "Authorization", "X-Api-Key", "X-Request-Id"),
		ExposedHeaders:   append(connectcors.ExposedHeaders(), "Retry-After", "X-Request-Id"),
		AllowCredentials: false,
		MaxAge:           corsMaxAge,
	})
	withHeaders := c.Handler(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isProcedure(r.URL.Path, services) {
			withHeaders.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isProcedure tells whether path names a method of one of services:
// "/billing.v1.PaymentService/GetPayment".
func isProcedure(path string, services []string) bool {
	for _, svc := range services {
		rest, ok := strings.CutPrefix(path, "/"+svc+"/")
		if ok && rest != "" && !strings.Contains(rest, "/") {
			return true
		}
	}
	return false
}
