package server

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
)

// bodyChunk is how much of a body is read (and of the buffer budget taken)
// at a time. Nearly every request of this API (a callback, a payment, a
// login) fits in one.
const bodyChunk = 16 << 10

// bodySlack is what a request body may carry beyond [server].max_request_bytes
// and still be buffered: the gRPC and Connect envelopes, a form-encoded
// callback's escapes. A larger body is handed on unbuffered, and the
// handler's own limit refuses it as before.
const bodySlack = 64 << 10

// bufferBudgetRequests is how many bodies of [server].max_request_bytes the
// buffers of requests not yet admitted may hold together. It bounds the
// memory that reading outside the concurrency limit can cost: 64 MiB with
// the default 1 MiB.
const bufferBudgetRequests = 64

// bodyReader reads a request's whole body before the request goes on to the
// concurrency limit, under [server].read_timeout_secs.
//
// A client that sends its headers and then trickles (or withholds) its body
// must not hold one of the [server].max_concurrency slots while it does: 30
// such connections would otherwise stop every other request, and /ready with
// them, on every instance at once. So the body is read here, ahead of the
// limit, into a buffer taken from a budget of bytes shared by all requests
// being read; a request whose body does not arrive within the read timeout
// is answered 408 and its connection (HTTP/1.1) or stream (HTTP/2) ends,
// without ever taking a slot.
//
// When the budget is spent (many large bodies being read at once) the
// request goes on with what was read so far in front of the rest of its
// body, still under the read deadline: memory stays bounded, and such a
// request is at worst as costly as before, for at most the read timeout.
type bodyReader struct {
	timeout time.Duration
	max     int64 // larger bodies are not buffered
	budget  *semaphore.Weighted
	pool    sync.Pool // *bytes.Buffer

	cutOff atomic.Uint64 // requests answered 408
}

func newBodyReader(timeout time.Duration, maxRequestBytes int) *bodyReader {
	maxBody := int64(maxRequestBytes) + bodySlack
	return &bodyReader{
		timeout: timeout,
		max:     maxBody,
		budget:  semaphore.NewWeighted(bufferBudgetRequests * maxBody),
		pool:    sync.Pool{New: func() any { return new(bytes.Buffer) }},
	}
}

// errBudget stops buffering when the budget cannot cover another chunk.
var errBudget = errors.New("request buffer budget spent")

func (b *bodyReader) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		// An error means the connection takes no deadline (a test's
		// recorder); the read is then bounded by the client alone.
		_ = rc.SetReadDeadline(time.Now().Add(b.timeout))
		// Once the whole body is in, nothing more is read from the client
		// for this request, so the deadline goes: on HTTP/1.1 it would
		// otherwise cancel the context of a handler that outlives it.
		done := func() { _ = rc.SetReadDeadline(time.Time{}) }

		buf := b.pool.Get().(*bytes.Buffer)
		var held int64
		defer func() {
			if held > 0 {
				b.budget.Release(held)
			}
			if buf.Cap() <= 2*bodyChunk {
				buf.Reset()
				b.pool.Put(buf)
			}
		}()
		if r.ContentLength > b.max {
			// Too large to buffer: the handler refuses it (ResourceExhausted,
			// 413), reading no more than its own limit under the deadline.
			r.Body = &rest{Reader: r.Body, Closer: r.Body, done: done}
			next.ServeHTTP(w, r)
			return
		}
		err := b.read(r.Body, buf, r.ContentLength, &held)
		switch {
		case err == nil:
			done()
			r.Body = io.NopCloser(bytes.NewReader(buf.Bytes()))
		case errors.Is(err, errBudget), errors.Is(err, errTooLarge):
			r.Body = &rest{Reader: io.MultiReader(bytes.NewReader(buf.Bytes()), r.Body), Closer: r.Body, done: done}
		case errors.Is(err, os.ErrDeadlineExceeded):
			b.cutOff.Add(1)
			// HTTP/1.1: the connection closes. HTTP/2: the server sends
			// GOAWAY, so a connection that holds stalled streams takes no
			// new ones while those it has finish.
			w.Header().Set("Connection", "close")
			http.Error(w, "request body not received in time", http.StatusRequestTimeout)
			return
		default:
			// The client went away or sent a malformed body (chunked
			// encoding, an HTTP/2 stream reset): nobody reads an answer.
			if r.ProtoMajor == 1 {
				w.Header().Set("Connection", "close")
			}
			http.Error(w, "cannot read request body", http.StatusBadRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

var errTooLarge = errors.New("request body too large to buffer")

// read copies body into buf, taking each chunk's size from the budget
// before reading it; *held is what it took.
func (b *bodyReader) read(body io.Reader, buf *bytes.Buffer, length int64, held *int64) error {
	want := int64(bodyChunk)
	if length > 0 {
		// A declared length is taken at once (a short body releases the
		// rest with the buffer); one more byte sees the end.
		want = length + 1
	}
	for {
		if int64(buf.Len()) >= b.max {
			return errTooLarge
		}
		if int64(buf.Len())+bodyChunk > *held {
			if !b.budget.TryAcquire(want) {
				return errBudget
			}
			*held += want
			buf.Grow(int(want))
			want = bodyChunk
		}
		free := buf.Available()
		if room := b.max - int64(buf.Len()); int64(free) > room {
			free = int(room)
		}
		n, err := body.Read(buf.AvailableBuffer()[:free])
		buf.Write(buf.AvailableBuffer()[:n])
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// rest is a body read by the handler itself, under the read deadline: the
// buffered start (if any) and the rest. At its end the deadline goes.
type rest struct {
	io.Reader
	io.Closer
	done func()
}

func (r *rest) Read(p []byte) (int, error) {
	n, err := r.Reader.Read(p)
	if err == io.EOF && r.done != nil {
		r.done()
		r.done = nil
	}
	return n, err
}
