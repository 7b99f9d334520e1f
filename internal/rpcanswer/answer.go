package rpcanswer

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/durationpb"
)

var errWriter = connect.NewErrorWriter()

// IsRPC reports whether r speaks gRPC, gRPC-Web or Connect, so that an
// answer can be read by the client as an RPC error.
func IsRPC(r *http.Request) bool { return errWriter.IsSupported(r) }

// Error answers r with code and msg: in the client's RPC protocol, or as
// plain text with the code's HTTP status.
func Error(w http.ResponseWriter, r *http.Request, code connect.Code, msg string) {
	write(w, r, connect.NewError(code, errors.New(msg)))
}

// RetryLater answers r with code and msg followed by ", retry after Ns",
// with a Retry-After header (whole seconds, rounded up) and, for RPC
// clients, a google.rpc.RetryInfo detail holding retryAfter exactly.
func RetryLater(w http.ResponseWriter, r *http.Request, code connect.Code, msg string, retryAfter time.Duration) {
	retryAfter = max(retryAfter, time.Millisecond).Round(time.Millisecond)
	secs := int((retryAfter + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	cerr := connect.NewError(code, errors.New(msg+", retry after "+strconv.Itoa(secs)+"s"))
	if detail, err := connect.NewErrorDetail(&errdetails.RetryInfo{RetryDelay: durationpb.New(retryAfter)}); err == nil {
		cerr.AddDetail(detail)
	}
	write(w, r, cerr)
}

func write(w http.ResponseWriter, r *http.Request, cerr *connect.Error) {
	if errWriter.IsSupported(r) {
		_ = errWriter.Write(w, r, cerr)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(httpStatus(cerr.Code()))
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
