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

// Whatever path a body takes through the reader (one chunk or several,
// with or without a declared length, the budget spent or not), the handler
// reads exactly the bytes the client sent, and the budget is whole again
// afterwards.
func TestBodyReaderHandsOnEveryBodyByteForByte(t *testing.T) {
	t.Parallel()
	small := strings.Repeat("a", 100)
	multi := strings.Repeat("0123456789", 5000) // several chunks
	largest := strings.Repeat("z", 2048+bodySlack)
	cases := []struct {
		name   string
		budget int64
		body   string
		length int64 // -1: chunked, no declared length
	}{
		{"small, declared", 0, small, int64(len(small))},
		{"small, chunked", 0, small, -1},
		{"one full chunk, chunked", 0, strings.Repeat("c", bodyChunk), -1},
		{"one full chunk, declared", 0, strings.Repeat("c", bodyChunk), bodyChunk},
		{"several chunks, chunked", 0, multi, -1},
		{"several chunks, declared", 0, multi, int64(len(multi))},
		{"the largest, chunked", 0, largest, -1},
		{"the largest, declared", 0, largest, int64(len(largest))},
		// A body of one chunk takes nothing from the budget.
		{"budget spent, small", 1024, small, -1},
		{"budget spent, one full chunk, chunked", 1024, strings.Repeat("c", bodyChunk), -1},
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

// A body over the limit (the largest one read, plus one byte) is refused
// with 413 whether its length is declared or not, without the handler.
func TestBodyReaderRefusesABodyOverTheLimit(t *testing.T) {
	t.Parallel()
	over := strings.Repeat("z", 2048+bodySlack+1)
	for name, length := range map[string]int64{"declared": int64(len(over)), "chunked": -1} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := newBodyReader(time.Second, 2048)
			srv := httptest.NewServer(b.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("the handler ran") })))
			t.Cleanup(srv.Close)
			var body io.Reader = strings.NewReader(over)
			if length < 0 {
				body = io.MultiReader(body)
			}
			status, got := post(t, srv.URL, body, length)
			require.Equal(t, http.StatusRequestEntityTooLarge, status)
			require.Contains(t, got, "too large")
			require.EqualValues(t, 1, b.tooLarge.Load())
			require.True(t, b.budget.TryAcquire(bufferBudgetRequests*b.max), "the budget is whole again")
		})
	}
}

// A body of several chunks waits for the budget when it is spent: it is
// read once the budget frees, and answered 503 with Retry-After if it does
// not free before the read deadline — never handed on unread.
func TestBodyReaderWaitsForTheBudgetThenRefusesWithRetryAfter(t *testing.T) {
	t.Parallel()
	multi := strings.Repeat("0123456789", 5000)

	t.Run("freed in time", func(t *testing.T) {
		t.Parallel()
		b := newBodyReader(20*time.Second, 2048)
		all := bufferBudgetRequests * b.max
		require.True(t, b.budget.TryAcquire(all))
		srv := httptest.NewServer(b.wrap(echo()))
		t.Cleanup(srv.Close)
		go func() {
			time.Sleep(200 * time.Millisecond)
			b.budget.Release(all)
		}()
		status, got := post(t, srv.URL, strings.NewReader(multi), int64(len(multi)))
		require.Equal(t, http.StatusOK, status)
		require.Equal(t, multi, got)
	})
	t.Run("still spent at the deadline", func(t *testing.T) {
		t.Parallel()
		b := newBodyReader(300*time.Millisecond, 2048)
		b.budget = semaphore.NewWeighted(1024) // never covers a chunk
		srv := httptest.NewServer(b.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("the handler ran") })))
		t.Cleanup(srv.Close)
		req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(multi))
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		require.Equal(t, "1", resp.Header.Get("Retry-After"))
		require.True(t, resp.Close, "the rest of the body is unread: the connection closes")
		require.EqualValues(t, 1, b.budgetBusy.Load())
		require.Zero(t, b.cutOff.Load())
	})
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
	require.Contains(t, body, "not received")
	require.GreaterOrEqual(t, time.Since(began), 300*time.Millisecond)
	require.EqualValues(t, 1, b.cutOff.Load())
	require.Empty(t, reached, "the handler never ran")
}
