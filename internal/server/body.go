package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sync/semaphore"

	"github.com/rustbill/paymentd/internal/rpcanswer"
)

// bodyChunk is the unit a body is held in, and charged to the buffer budget
// in. Nearly every request of this API (a callback, a payment, a login)
// fits in one.
const bodyChunk = 16 << 10

// bodySlack is what a request body may carry beyond [server].max_request_bytes
// and still be read: the gRPC and Connect envelopes, a form-encoded
// callback's escapes. A larger body is refused (413, ResourceExhausted)
// without being read further.
const bodySlack = 64 << 10

// bufferBudgetRequests is how many bodies of [server].max_request_bytes the
// charged chunks of all requests together may hold. It bounds the memory
// that reading outside the concurrency limit can cost: 68 MiB with the
// default 1 MiB, beyond one chunk per request being read.
const bufferBudgetRequests = 64

// budgetRetryAfter is the Retry-After of a request whose chunk the budget
// could not cover before its read deadline: the budget frees as the bodies
// holding it are handled, which takes well under a second.
const budgetRetryAfter = time.Second

// chunk is one piece of a body; chunkPool recycles them, so what a body
// holds is what it was charged (and its first chunk).
type chunk = [bodyChunk]byte

var chunkPool = sync.Pool{New: func() any { return new(chunk) }}

// bodyReader reads a request's whole body before the request goes on to the
// concurrency limit, under [server].read_timeout_secs. No request reaches
// the limit with its body unread.
//
// A client that sends its headers and then trickles (or withholds) its body
// must not hold one of the [server].max_concurrency slots while it does: 30
// such connections would otherwise stop every other request, and /ready with
// them, on every instance at once. So:
//
//   - A declared length over max_request_bytes + bodySlack is refused at
//     once (413; ResourceExhausted to an RPC client), nothing of it read; a
//     body of no declared length (chunked, HTTP/2 without content-length)
//     the moment it grows past that.
//
//   - The rest is read into chunks of bodyChunk. A request's first chunk is
//     its own; every further one is charged to a budget shared by all
//     requests being read, and only once the chunks before it are full and
//     another byte has come: a request is charged for bytes received, never
//     for a length it declares. Bodies that declare much and send nothing
//     take nothing from the budget (nor a chunk), and a small body (one
//     chunk) never waits for it. Memory held is at most the budget plus one
//     chunk per request that has sent a byte of its body, about what its
//     connection's own buffers cost.
//
//   - When the budget is spent, a request waits for it here, outside the
//     limit, until its read deadline; then it is answered 503 (Unavailable,
//     Retry-After).
//
//   - A body that has not arrived by the read deadline is cut off: answered
//     DeadlineExceeded in the client's RPC protocol, or 408, and its
//     connection ends (HTTP/1.1: Connection: close; HTTP/2: GOAWAY, the
//     streams already open finishing first), so one connection cannot
//     repeat the attack stream after stream. A body the client breaks off
//     (a malformed chunked encoding, a stream reset) ends its connection
//     the same way.
//
// A request's way through:
//
//	headers ─▶ declared > limit? ──yes──▶ 413 / ResourceExhausted
//	              │ no
//	              ▼
//	           reading ─┬─ whole body in ──────────▶ limit ─▶ handler
//	              ▲     ├─ past the limit ─────────▶ 413 / ResourceExhausted
//	              │     ├─ read deadline ──────────▶ 408 / DeadlineExceeded, connection ends
//	              │     └─ chunk full, more comes
//	              │           │
//	              └─ charged ─┤ budget spent: wait until the read deadline
//	                          └─ still spent ──────▶ 503 / Unavailable, Retry-After
type bodyReader struct {
	timeout time.Duration
	max     int64 // a longer body is refused
	budget  *semaphore.Weighted

	cutOff     atomic.Uint64 // bodies not in by the read deadline
	tooLarge   atomic.Uint64 // bodies refused for their length
	budgetBusy atomic.Uint64 // requests refused because the budget stayed spent
}

func newBodyReader(timeout time.Duration, maxRequestBytes int) *bodyReader {
	maxBody := int64(maxRequestBytes) + bodySlack
	return &bodyReader{
		timeout: timeout,
		max:     maxBody,
		budget:  semaphore.NewWeighted(bufferBudgetRequests * maxBody),
	}
}

// Why reading a body stopped short, besides the client's own errors.
var (
	errTooLarge   = errors.New("request body too large")
	errBudgetBusy = errors.New("request buffer budget spent until the read deadline")
)

func (b *bodyReader) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		if r.ContentLength > b.max {
			b.refuseTooLarge(w, r)
			return
		}
		deadline := time.Now().Add(b.timeout)
		rc := http.NewResponseController(w)
		// An error means the connection takes no deadline (a test's
		// recorder); the read is then bounded by the client alone, and the
		// budget's wait by the same deadline.
		_ = rc.SetReadDeadline(deadline)
		ctx, cancel := context.WithDeadline(r.Context(), deadline)
		body := &heldBody{}
		err := b.read(ctx, r.Body, r.ContentLength, body)
		cancel()
		defer b.release(body)
		switch {
		case err == nil:
			// Nothing more is read from the client for this request, so the
			// deadline goes: on HTTP/1.1 it would otherwise cancel the
			// context of a handler that outlives it.
			_ = rc.SetReadDeadline(time.Time{})
			r.Body = body
			next.ServeHTTP(w, r)
		case errors.Is(err, errTooLarge):
			b.refuseTooLarge(w, r)
		case errors.Is(err, os.ErrDeadlineExceeded):
			b.cutOff.Add(1)
			// HTTP/1.1: the connection closes. HTTP/2: the server turns
			// this header into GOAWAY, so a connection that holds stalled
			// streams takes no new ones while those it has finish.
			w.Header().Set("Connection", "close")
			rpcanswer.Status(w, r, connect.CodeDeadlineExceeded, http.StatusRequestTimeout,
				"request body not received within the server's read timeout")
		case errors.Is(err, errBudgetBusy) && r.Context().Err() == nil:
			b.budgetBusy.Add(1)
			if r.ProtoMajor == 1 {
				// The rest of the body is unread: the connection cannot
				// carry another request.
				w.Header().Set("Connection", "close")
			}
			rpcanswer.RetryLater(w, r, connect.CodeUnavailable, "server busy reading other requests", budgetRetryAfter)
		default:
			// The client went away, or broke its body off (a malformed
			// chunked encoding, an HTTP/2 stream reset): its connection is
			// not trusted with another request.
			w.Header().Set("Connection", "close")
			rpcanswer.Status(w, r, connect.CodeInvalidArgument, http.StatusBadRequest, "cannot read request body")
		}
	})
}

// refuseTooLarge answers a body over the limit without reading more of it.
func (b *bodyReader) refuseTooLarge(w http.ResponseWriter, r *http.Request) {
	b.tooLarge.Add(1)
	if r.ProtoMajor == 1 {
		// The body is unread: the connection cannot carry another request.
		// HTTP/2 resets the stream alone, and the connection goes on.
		w.Header().Set("Connection", "close")
	}
	rpcanswer.Status(w, r, connect.CodeResourceExhausted, http.StatusRequestEntityTooLarge, "request body too large")
}

// read copies src into held, declared bytes or (declared < 0) up to its
// end. A chunk is taken only once a byte for it has come, and charged to
// the budget unless it is the first; a wait for the budget ends with ctx.
func (b *bodyReader) read(ctx context.Context, src io.Reader, declared int64, held *heldBody) error {
	var one [1]byte
	for {
		if held.size == declared {
			return nil
		}
		if held.size == int64(len(held.chunks))*bodyChunk {
			// Every chunk is full: does the body go on?
			n, err := src.Read(one[:])
			if n == 0 {
				switch {
				case err == io.EOF:
					return nil
				case err != nil:
					return err
				}
				continue
			}
			if held.size >= b.max {
				return errTooLarge
			}
			if len(held.chunks) > 0 {
				if err := b.charge(ctx); err != nil {
					return err
				}
				held.charged += bodyChunk
			}
			c := chunkPool.Get().(*chunk)
			c[0] = one[0]
			held.chunks = append(held.chunks, c)
			held.size++
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			continue
		}
		at := held.size % bodyChunk
		n, err := src.Read(held.chunks[len(held.chunks)-1][at:])
		held.size += int64(n)
		if held.size > b.max {
			return errTooLarge
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// charge takes one chunk from the budget, waiting while it is spent.
func (b *bodyReader) charge(ctx context.Context) error {
	if b.budget.TryAcquire(bodyChunk) {
		return nil
	}
	if err := b.budget.Acquire(ctx, bodyChunk); err != nil {
		return errBudgetBusy
	}
	return nil
}

// release gives a body's chunks back to the pool and its charge back to
// the budget, once its handler has returned.
func (b *bodyReader) release(held *heldBody) {
	if held.charged > 0 {
		b.budget.Release(held.charged)
	}
	for i, c := range held.chunks {
		chunkPool.Put(c)
		held.chunks[i] = nil
	}
	held.chunks, held.size, held.off = nil, 0, 0
}

// heldBody is a body read whole, in chunks: all full but the last. It is
// the body the handler reads.
type heldBody struct {
	chunks  []*chunk
	size    int64 // bytes held
	charged int64 // taken from the budget
	off     int64 // what the handler has read
}

func (h *heldBody) Read(p []byte) (int, error) {
	if h.off >= h.size {
		return 0, io.EOF
	}
	i, at := h.off/bodyChunk, h.off%bodyChunk
	end := min(int64(bodyChunk), h.size-i*bodyChunk)
	n := copy(p, h.chunks[i][at:end])
	h.off += int64(n)
	return n, nil
}

func (h *heldBody) Close() error { return nil }
