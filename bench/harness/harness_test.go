package harness

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
)

// The load generator's client against Go's own HTTP/2 server, answering
// like a gRPC server: a message and grpc-status 0 in trailers, or a
// trailers-only error.
func TestLoaderCountsGRPCSuccessesAndErrors(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var bodies []string
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			return
		}
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/grpc")
		if r.Header.Get("Authorization") != "Bearer ok" {
			w.Header().Set("Grpc-Status", "16")
			w.Header().Set("Grpc-Message", "no%20credential")
			w.WriteHeader(http.StatusOK)
			return
		}
		w.Header().Set("Trailer", "Grpc-Status")
		_, _ = w.Write(GRPCFrame(&paymentpb.GetPaymentResponse{Payment: &paymentpb.PaymentRecord{Id: "x"}}))
		w.Header().Set("Grpc-Status", "0")
	})
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: h, Protocols: &p}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	l, err := NewLoader("http://"+ln.Addr().String(), 2)
	require.NoError(t, err)
	defer l.Close()
	require.NoError(t, l.Warm(t.Context()))
	var calls []Call
	for i := range 500 {
		auth := "Bearer ok"
		if i%5 == 0 {
			auth = "Bearer bad"
		}
		calls = append(calls, Call{Path: "/billing.payment.PaymentService/GetPayment", Header: GRPCHeader(auth),
			Body: GRPCFrame(&paymentpb.GetPaymentRequest{Id: strings.Repeat("a", i%40)})})
	}
	res := l.Run(calls, 8, time.Minute)
	require.Equal(t, 500, res.Requests)
	require.Equal(t, 100, res.Errors)
	require.Equal(t, map[string]int{"grpc 16: no credential": 100}, res.ErrorSamples)
	require.Equal(t, 400, countOK(res.OK))
	require.Len(t, bodies, 500)
	require.Len(t, res.Latencies, 500)
}

func TestPercentileIsNearestRank(t *testing.T) {
	t.Parallel()
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	require.Equal(t, 50*time.Millisecond, Percentile(d, 50))
	require.Equal(t, 99*time.Millisecond, Percentile(d, 99))
	require.Equal(t, 100*time.Millisecond, Percentile(d, 100))
	require.Zero(t, Percentile(nil, 99))
	require.Equal(t, 2.5, median([]float64{4, 1, 2, 3}))
}

func TestPgbenchLogLatencies(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "log.1")
	require.NoError(t, os.WriteFile(f, []byte("0 1 5123 0 1700000000 123456\n1 1 877 0 1700000000 123999\n2 1 failed 0 1700000000 1\n"), 0o644))
	lat, err := readPgbenchLog(f)
	require.NoError(t, err)
	require.Equal(t, []time.Duration{5123 * time.Microsecond, 877 * time.Microsecond}, lat)
}

func TestProcStatOfThisProcess(t *testing.T) {
	t.Parallel()
	st, err := readStat(os.Getpid())
	require.NoError(t, err)
	require.Equal(t, os.Getppid(), st.ppid)
	require.Greater(t, ProcRSS(os.Getpid()), int64(0))
	require.Greater(t, MachineBusy(), time.Duration(0))
}

func TestBenchIDsAreTheSameInGoAndSQL(t *testing.T) {
	t.Parallel()
	require.Equal(t, "20000000-0000-4000-8000-0000000000ff", BenchID(kindPayment, 255).String())
	require.Equal(t, "('20000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid", sqlID(kindPayment, "g"))
}
