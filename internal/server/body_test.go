package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/semaphore"
)

// echo answers the body it read, as a handler behind the body reader sees
// it.
func echo() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_, _ = w.Write(body)
	})
}

func post(t *testing.T, url string, body io.Reader, length int64) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, body)
	require.NoError(t, err)
	req.ContentLength = length
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(got)
}

// Whatever path a body takes through the reader (buffered whole with or
// without a declared length, handed on because it is too large to buffer,
// or because the budget is spent), the handler reads exactly the bytes the
// client sent, and the budget is whole again afterwards.
func TestBodyReaderHandsOnEveryBodyByteForByte(t *testing.T) {
	t.Parallel()
	small := strings.Repeat("a", 100)
	multi := strings.Repeat("0123456789", 5000) // several chunks
	cases := []struct {
		name   string
		budget int64
		body   string
		length int64 // -1: chunked, no declared length
	}{
		{"small, declared", 0, small, int64(len(small))},
		{"small, chunked", 0, small, -1},
		{"several chunks, chunked", 0, multi, -1},
		{"several chunks, declared", 0, multi, int64(len(multi))},
		{"budget spent", 1024, multi, -1},
		{"budget spent, declared", 1024, multi, int64(len(multi))},
		{"too large to buffer, declared", 0, strings.Repeat("z", 2048+bodySlack+1), 2048 + bodySlack + 1},
		{"too large to buffer, chunked", 0, strings.Repeat("z", 2048+bodySlack+5000), -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newBodyReader(time.Second, 2048)
			total := bufferBudgetRequests * b.max
			if tc.budget > 0 {
				total = tc.budget
				b.budget = semaphore.NewWeighted(total)
			}
			srv := httptest.NewServer(b.wrap(echo()))
			t.Cleanup(srv.Close)
			var body io.Reader = strings.NewReader(tc.body)
			if tc.length < 0 {
				body = io.MultiReader(body) // hides the length: chunked
			}
			status, got := post(t, srv.URL, body, tc.length)
			require.Equal(t, http.StatusOK, status)
			require.Equal(t, tc.body, got)
			require.True(t, b.budget.TryAcquire(total), "the budget is whole again")
			require.Zero(t, b.cutOff.Load())
		})
	}
}

// A body that stops arriving is answered 408 after the timeout, on a
// connection that then closes, and counted.
func TestBodyReaderCutsOffABodyThatStopsArriving(t *testing.T) {
	t.Parallel()
	b := newBodyReader(300*time.Millisecond, 2048)
	reached := make(chan struct{}, 1)
	srv := httptest.NewServer(b.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached <- struct{}{} })))
	t.Cleanup(srv.Close)
	pr, pw := io.Pipe()
	t.Cleanup(func() { _ = pw.Close() })
	go func() { _, _ = pw.Write([]byte("{")) }()
	began := time.Now()
	status, body := post(t, srv.URL, pr, 1000)
	require.Equal(t, http.StatusRequestTimeout, status)
	require.Contains(t, body, "not received in time")
	require.GreaterOrEqual(t, time.Since(began), 300*time.Millisecond)
	require.EqualValues(t, 1, b.cutOff.Load())
	require.Empty(t, reached, "the handler never ran")
}
