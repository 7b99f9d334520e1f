package harness

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"

	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
)

// trivialServerEnv makes the test binary a trivial h2c gRPC server (see
// TestMain): the load generator's benchmark measures its own process's
// CPU, so the server it talks to must run in another one.
const trivialServerEnv = "PAYMENTD_HARNESS_TRIVIAL_H2C_SERVER"

// serveTrivialH2C answers every request like a gRPC server answering a
// unary call (a small message, grpc-status 0 in the trailers), prints its
// address and serves until its standard input closes.
func serveTrivialH2C() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	answer := GRPCFrame(&paymentpb.GetPaymentResponse{Payment: &paymentpb.PaymentRecord{Id: "20000000-0000-4000-8000-000000000001", Amount: "12.30", Currency: "CNY"}})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Trailer", "Grpc-Status")
		_, _ = w.Write(answer)
		w.Header().Set("Grpc-Status", "0")
	})
	srv := &http.Server{Handler: h2c.NewHandler(h, &http2.Server{})}
	go func() { _ = srv.Serve(ln) }()
	fmt.Println(ln.Addr().String())
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// startTrivialServer runs serveTrivialH2C in a child process and returns
// its address.
func startTrivialServer(tb testing.TB) string {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), trivialServerEnv+"=1", "GOMAXPROCS=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		tb.Fatal(err)
	}
	return strings.TrimSpace(line)
}

// BenchmarkLoaderCPUPerRequest is the load generator's own CPU per
// request (loadgen-µs/req: this process's user and system time over the
// requests; the server is another process) at 8 in flight over two
// connections, with 1,000 distinct bearer tokens of a JWT's size, as the
// GetPayment workload sends. Run it as the harness runs, on one thread:
//
//	go test -run '^$' -bench LoaderCPUPerRequest -cpu 1 -count 5 ./bench/harness
//
// Compare two versions back to back on the same machine: the figure is
// CPU time, less sensitive to other load than wall time, but a busy
// machine still inflates it (caches, frequency).
func BenchmarkLoaderCPUPerRequest(b *testing.B) {
	addr := startTrivialServer(b)
	defer debug.SetGCPercent(debug.SetGCPercent(400)) // as paymentd-bench runs
	l, err := NewLoader("http://"+addr, 2)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	if err := l.Warm(b.Context()); err != nil {
		b.Fatal(err)
	}
	const tokens = 1000
	headers := make([]Call, tokens)
	for i := range headers {
		headers[i].Header = GRPCHeader(fmt.Sprintf("Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.%0200d.%043d", i, i))
	}
	calls := make([]Call, b.N)
	for i := range calls {
		calls[i] = Call{Path: "/billing.payment.PaymentService/GetPayment", Header: headers[i%tokens].Header,
			Body: GRPCFrame(&paymentpb.GetPaymentRequest{Id: BenchID(kindPayment, int64(i)).String()})}
	}
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := SelfCPU()
	res := l.Run(calls, 8, time.Hour)
	cpu = SelfCPU() - cpu
	b.StopTimer()
	if res.Errors > 0 || res.Requests != b.N {
		b.Fatalf("%d requests of %d, %d errors: %v", res.Requests, b.N, res.Errors, res.ErrorSamples)
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "loadgen-µs/req")
}
