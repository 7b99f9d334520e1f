package harness

import (
	"bytes"
	"context"
	"encoding/binary"
	"net/url"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"
)

// Call is one request of a workload, encoded before the clock starts: a
// gRPC unary call (length-prefixed protobuf) with its headers. Calls are
// used once each.
type Call struct {
	// Path is the procedure's HTTP path, /package.Service/Method.
	Path string
	// Header is the call's headers but the pseudo-headers (GRPCHeader);
	// shared between calls.
	Header Header
	Body   []byte
}

// GRPCFrame is msg as a gRPC message: a zero compression flag, the length
// as four big-endian bytes, and the protobuf encoding.
func GRPCFrame(msg proto.Message) []byte {
	b, err := proto.Marshal(msg)
	if err != nil {
		panic(err) // generated messages always marshal
	}
	out := make([]byte, 5+len(b))
	binary.BigEndian.PutUint32(out[1:5], uint32(len(b)))
	copy(out[5:], b)
	return out
}

// Header is a call's headers but the pseudo-headers. Fields are encoded
// as the request leaves, by the connection's encoder (its dynamic table
// indexes them: they repeat). Literal is fields encoded once, beforehand,
// as never-indexed literals (RFC 7541, 6.2.3): such a literal neither reads
// nor changes the dynamic table, so its bytes are the same in any block.
type Header struct {
	Fields  []hpack.HeaderField
	Literal []byte
}

// GRPCHeader is the headers of a gRPC call: content-type, te and, unless
// empty, authorization. The credential is never indexed (RFC 7541, 7.1.3):
// it is a secret, and every customer's differs, so in the dynamic table it
// would only push out the fields that repeat; encoded before the clock
// starts, its Huffman coding costs the load generator nothing per request.
func GRPCHeader(authorization string) Header {
	h := Header{Fields: []hpack.HeaderField{{Name: "content-type", Value: "application/grpc+proto"}, {Name: "te", Value: "trailers"}}}
	if authorization != "" {
		var b bytes.Buffer
		_ = hpack.NewEncoder(&b).WriteField(hpack.HeaderField{Name: "authorization", Value: authorization, Sensitive: true})
		h.Literal = b.Bytes()
	}
	return h
}

// Loader sends calls over cleartext HTTP/2 (prior knowledge), the way a gRPC
// client does: a few long-lived connections with many streams each
// (h2c.go).
type Loader struct {
	addr  string
	conns []*h2conn
}

// NewLoader returns a loader for the server at baseURL (http://host:port)
// with conns connections.
func NewLoader(baseURL string, conns int) (*Loader, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, err
	}
	if conns < 1 {
		conns = 1
	}
	l := &Loader{addr: u.Host}
	for range conns {
		c, err := dialH2C(u.Host)
		if err != nil {
			l.Close()
			return nil, err
		}
		l.conns = append(l.conns, c)
	}
	return l, nil
}

// Warm checks that every connection answers (GET /health).
func (l *Loader) Warm(context.Context) error {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for _, c := range l.conns {
		if err := c.get("/health", timer); err != nil {
			return err
		}
	}
	return nil
}

// Close drops the connections.
func (l *Loader) Close() {
	for _, c := range l.conns {
		c.close()
	}
}

// LoadResult is what one run of a workload measured.
type LoadResult struct {
	Requests int
	Errors   int
	// ErrorSamples counts errors by kind ("grpc 6 already_exists: …").
	ErrorSamples map[string]int
	Start, End   time.Time
	// Latencies of every request, sorted (errors included).
	Latencies []time.Duration
	// Exhausted: the calls ran out before the duration did.
	Exhausted bool
	// OK lists, for every call index sent, whether it succeeded.
	OK []bool
}

// Elapsed is the wall time of the run.
func (r LoadResult) Elapsed() time.Duration { return r.End.Sub(r.Start) }

// Throughput is requests per second.
func (r LoadResult) Throughput() float64 {
	if r.Elapsed() <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed().Seconds()
}

// Run sends calls with inFlight requests outstanding at all times (a
// closed loop) until duration has passed or the calls run out.
func (l *Loader) Run(calls []Call, inFlight int, duration time.Duration) LoadResult {
	var next atomic.Int64
	res := LoadResult{ErrorSamples: map[string]int{}, OK: make([]bool, len(calls))}
	var mu sync.Mutex
	lat := make([][]time.Duration, inFlight)
	var wg sync.WaitGroup
	res.Start = time.Now()
	deadline := res.Start.Add(duration)
	var exhausted atomic.Bool
	for w := range inFlight {
		c := l.conns[w%len(l.conns)]
		lat[w] = make([]time.Duration, 0, len(calls)/inFlight+1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			timer := time.NewTimer(time.Hour)
			defer timer.Stop()
			for {
				if !time.Now().Before(deadline) {
					return
				}
				i := int(next.Add(1) - 1)
				if i >= len(calls) {
					exhausted.Store(true)
					return
				}
				start := time.Now()
				errKind := c.roundTrip(calls[i].Path, calls[i].Header, calls[i].Body, timer, callTimeout)
				lat[w] = append(lat[w], time.Since(start))
				if errKind == "" {
					res.OK[i] = true
					continue
				}
				mu.Lock()
				res.Errors++
				res.ErrorSamples[errKind]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.End = time.Now()
	res.Exhausted = exhausted.Load()
	for _, l := range lat {
		res.Latencies = append(res.Latencies, l...)
	}
	res.Requests = len(res.Latencies)
	slices.Sort(res.Latencies)
	return res
}

// RunPaced sends calls at rate per second (an open loop: a slow answer does
// not delay the next request) for duration, or until the calls run out.
func (l *Loader) RunPaced(calls []Call, rate float64, duration time.Duration) LoadResult {
	res := LoadResult{ErrorSamples: map[string]int{}, OK: make([]bool, len(calls))}
	var mu sync.Mutex
	var wg sync.WaitGroup
	interval := time.Duration(float64(time.Second) / rate)
	res.Start = time.Now()
	n := int(duration.Seconds() * rate)
	if n > len(calls) {
		n = len(calls)
		res.Exhausted = true
	}
	for i := range n {
		if d := time.Until(res.Start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		c := l.conns[i%len(l.conns)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			timer := time.NewTimer(time.Hour)
			defer timer.Stop()
			start := time.Now()
			errKind := c.roundTrip(calls[i].Path, calls[i].Header, calls[i].Body, timer, callTimeout)
			took := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			res.Latencies = append(res.Latencies, took)
			if errKind == "" {
				res.OK[i] = true
				return
			}
			res.Errors++
			res.ErrorSamples[errKind]++
		}()
	}
	wg.Wait()
	res.End = time.Now()
	res.Requests = len(res.Latencies)
	slices.Sort(res.Latencies)
	return res
}

// callTimeout bounds one call.
const callTimeout = 60 * time.Second

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Percentile is the p-th percentile (0 < p ≤ 100) of sorted durations,
// nearest rank.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(p/100*float64(len(sorted))+0.999999) - 1
	rank = max(0, min(rank, len(sorted)-1))
	return sorted[rank]
}

// median of a few numbers.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
