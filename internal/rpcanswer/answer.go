package rpcanswer

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/durationpb"
)

var errWriter = connect.NewErrorWriter()

// IsRPC reports whether r speaks gRPC, gRPC-Web or Connect, so that an
// answer can be read by the client as an RPC error.
//
// connect.ErrorWriter takes any POST of an application/* type for a Connect
// call, and any GET: a gateway's form-encoded callback, or its return by
// GET, would get a JSON error it cannot read. A Connect unary call is a
// POST of one of the codecs the handlers speak (JSON, protobuf) or a GET
// carrying its message in the query.
func IsRPC(r *http.Request) bool {
	if !errWriter.IsSupported(r) {
		return false
	}
	ctype, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	ctype = strings.ToLower(strings.TrimSpace(ctype))
	switch {
	case r.Method == http.MethodGet:
		q := r.URL.Query()
		return q.Has("message") && q.Has("encoding")
	case strings.HasPrefix(ctype, "application/grpc"), strings.HasPrefix(ctype, "application/connect+"):
		return true // gRPC, gRPC-Web, Connect streaming
	default:
		return ctype == "application/json" || ctype == "application/proto"
	}
}

// Error answers r with code and msg: in the client's RPC protocol, or as
// plain text with the code's HTTP status.
func Error(w http.ResponseWriter, r *http.Request, code connect.Code, msg string) {
	write(w, r, connect.NewError(code, errors.New(msg)), 0)
}

// Status is Error with the HTTP status a client that speaks no RPC gets
// (a gateway's callback): for the answers HTTP names more precisely than
// the code's own status does, 413 for a body too large, 408 for a body
// that did not arrive in time. An RPC client gets code, as with Error.
func Status(w http.ResponseWriter, r *http.Request, code connect.Code, status int, msg string) {
	write(w, r, connect.NewError(code, errors.New(msg)), status)
}

// RetryLater answers r with code and msg followed by ", retry after Ns",
// with a Retry-After header (whole seconds, rounded up) and, for RPC
// clients, a google.rpc.RetryInfo detail holding retryAfter exactly.
func RetryLater(w http.ResponseWriter, r *http.Request, code connect.Code, msg string, retryAfter time.Duration) {
	cerr, secs := retryError(code, msg, retryAfter)
	w.Header().Set("Retry-After", secs)
	write(w, r, cerr, 0)
}

// RetryError is RetryLater's answer for a handler to return: the same
// message, RetryInfo detail and Retry-After (as the error's metadata,
// which connect-go sends as headers).
func RetryError(code connect.Code, msg string, retryAfter time.Duration) *connect.Error {
	cerr, secs := retryError(code, msg, retryAfter)
	cerr.Meta().Set("Retry-After", secs)
	return cerr
}

func retryError(code connect.Code, msg string, retryAfter time.Duration) (*connect.Error, string) {
	retryAfter = max(retryAfter, time.Millisecond).Round(time.Millisecond)
	secs := strconv.Itoa(int((retryAfter + time.Second - 1) / time.Second))
	cerr := connect.NewError(code, errors.New(msg+", retry after "+secs+"s"))
	if detail, err := connect.NewErrorDetail(&errdetails.RetryInfo{RetryDelay: durationpb.New(retryAfter)}); err == nil {
		cerr.AddDetail(detail)
	}
	return cerr, secs
}

// write answers with cerr; status, when not 0, is the plain-text answer's.
func write(w http.ResponseWriter, r *http.Request, cerr *connect.Error, status int) {
	if IsRPC(r) {
		_ = errWriter.Write(w, r, cerr)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if status == 0 {
		status = httpStatus(cerr.Code())
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, cerr.Message()+"\n")
}

// httpStatus is the status Connect itself gives each code a layer here
// answers with.
func httpStatus(code connect.Code) int {
	switch code {
	case connect.CodeResourceExhausted:
		return http.StatusTooManyRequests
	case connect.CodeDeadlineExceeded:
		return http.StatusGatewayTimeout
	case connect.CodeUnavailable:
		return http.StatusServiceUnavailable
	case connect.CodeCanceled:
		return 499
	default:
		return http.StatusInternalServerError
	}
}

// Ended is the answer to a call that its own context ended (ctx.Err():
// its client went away, its deadline passed): DeadlineExceeded or
// Canceled, never the Internal or Unavailable of what failed under it.
func Ended(err error) *connect.Error {
	if errors.Is(err, context.DeadlineExceeded) {
		return connect.NewError(connect.CodeDeadlineExceeded, errors.New("deadline exceeded"))
	}
	return connect.NewError(connect.CodeCanceled, errors.New("request canceled"))
}
