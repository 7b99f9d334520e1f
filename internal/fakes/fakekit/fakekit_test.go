package fakekit_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/fakes/fakekit"
	"github.com/rustbill/paymentd/internal/testkit"
)

var errClosed = errors.New("test fake: closed")

// merchant receives notifies: it keeps each request's method, headers and
// parameters and answers what answer says for the n-th one (1-based).
type merchant struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []received
	answer func(n int) string
}

type received struct {
	method, contentType, userAgent string
	query, form                    url.Values
}

func newMerchant(t *testing.T, answer func(n int) string) *merchant {
	t.Helper()
	m := &merchant{answer: answer}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); !assert.NoError(t, err) { // not require: this is the server's goroutine
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		m.mu.Lock()
		m.got = append(m.got, received{r.Method, r.Header.Get("Content-Type"), r.UserAgent(), r.URL.Query(), r.PostForm})
		n := len(m.got)
		m.mu.Unlock()
		_, _ = io.WriteString(w, m.answer(n))
	}))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *merchant) received() []received {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]received(nil), m.got...)
}

// setup is a host (not listening: a notifier needs none) and its notifier.
func setup(t *testing.T, opts fakekit.NotifyOptions) (*fakekit.Host, *fakekit.Notifier) {
	t.Helper()
	h := fakekit.NewHost("test", "", errClosed, nil)
	t.Cleanup(h.Close)
	return h, fakekit.NewNotifier(h, opts)
}

func notification(url string) func() fakekit.Notification {
	return func() fakekit.Notification {
		return fakekit.Notification{TradeNo: "T1", OutTradeNo: "O1", URL: url, Params: url2("a", "1", "b", "x y")}
	}
}

func url2(kv ...string) url.Values {
	v := url.Values{}
	for i := 0; i < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

func waitRound(t *testing.T, n *fakekit.Notifier, attempts int) []fakekit.Notification {
	t.Helper()
	require.Eventually(t, func() bool { return n.Count() == attempts }, 5*time.Second, time.Millisecond)
	// The round has ended when no further attempt comes.
	require.Never(t, func() bool { return n.Count() > attempts }, 30*time.Millisecond, 5*time.Millisecond)
	return n.Notifications()
}

func TestNotifyRoundRetriesUntilTheAckAndStops(t *testing.T) {
	t.Parallel()
	m := newMerchant(t, func(n int) string {
		if n < 3 {
			return "fail"
		}
		return " success\n"
	})
	_, n := setup(t, fakekit.NotifyOptions{
		Schedule:    []time.Duration{0, time.Second, time.Second, time.Second, time.Second},
		Scale:       0.001,
		ContentType: "application/x-www-form-urlencoded; charset=utf-8",
		UserAgent:   "test-notify/1",
		Ack:         "success",
	})
	require.NoError(t, n.Start("T1", notification(m.srv.URL+"/cb")))

	ns := waitRound(t, n, 3)
	for i, nf := range ns {
		require.Equal(t, i+1, nf.Attempt)
		require.Equal(t, http.MethodPost, nf.Method, "POST is the default")
		require.Equal(t, m.srv.URL+"/cb", nf.URL)
		require.Equal(t, http.StatusOK, nf.Status)
		require.Equal(t, i == 2, nf.Acked, "only the answer that is the ack, spaces trimmed, acknowledges")
	}
	require.Equal(t, "fail", ns[0].Body)
	got := m.received()
	require.Len(t, got, 3)
	require.Equal(t, http.MethodPost, got[0].method)
	require.Equal(t, "application/x-www-form-urlencoded; charset=utf-8", got[0].contentType)
	require.Equal(t, "test-notify/1", got[0].userAgent)
	require.Equal(t, url2("a", "1", "b", "x y"), got[0].form)
	require.Empty(t, got[0].query)
}

func TestNotifyByGETPutsTheParametersInTheQuery(t *testing.T) {
	t.Parallel()
	m := newMerchant(t, func(int) string { return "ok" })
	_, n := setup(t, fakekit.NotifyOptions{Schedule: []time.Duration{0}, Method: http.MethodGet, Ack: "ok"})
	require.NoError(t, n.Start("T1", notification(m.srv.URL+"/cb?id=7")))

	ns := waitRound(t, n, 1)
	require.True(t, ns[0].Acked)
	require.Equal(t, http.MethodGet, ns[0].Method)
	require.Equal(t, m.srv.URL+"/cb?id=7&a=1&b=x+y", ns[0].URL, "appended after the notify_url's own query")
	got := m.received()
	require.Len(t, got, 1)
	require.Equal(t, url2("id", "7", "a", "1", "b", "x y"), got[0].query)
	require.Empty(t, got[0].contentType, "no body, no Content-Type")
}

func TestNotifyScheduleEndsWithoutAckAfterItsLastAttempt(t *testing.T) {
	t.Parallel()
	m := newMerchant(t, func(int) string { return "fail" })
	_, n := setup(t, fakekit.NotifyOptions{Schedule: []time.Duration{0, 0}, Ack: "success"})
	require.NoError(t, n.Start("T1", notification(m.srv.URL)))

	ns := waitRound(t, n, 2)
	require.False(t, ns[0].Acked)
	require.False(t, ns[1].Acked)
	require.Len(t, m.received(), 2)
}

func TestDroppedNotifiesAreRecordedButNeverSent(t *testing.T) {
	t.Parallel()
	m := newMerchant(t, func(int) string { return "success" })
	_, n := setup(t, fakekit.NotifyOptions{Schedule: []time.Duration{0, 0}, Ack: "success"})
	n.Drop(true)
	require.NoError(t, n.Start("T1", notification(m.srv.URL)))

	ns := waitRound(t, n, 2)
	for _, nf := range ns {
		require.True(t, nf.Dropped)
		require.Zero(t, nf.Status)
	}
	require.Empty(t, m.received())

	n.Drop(false)
	require.NoError(t, n.Start("T1", notification(m.srv.URL)))
	ns = waitRound(t, n, 3)
	require.True(t, ns[2].Acked)
	require.Equal(t, 1, ns[2].Attempt, "a new round counts from 1")
}

func TestNotifyThatCannotBePreparedIsRecordedAndRetried(t *testing.T) {
	t.Parallel()
	m := newMerchant(t, func(int) string { return "success" })
	_, n := setup(t, fakekit.NotifyOptions{Schedule: []time.Duration{0, 0}, Ack: "success"})
	calls := 0
	require.NoError(t, n.Start("T1", func() fakekit.Notification {
		calls++
		if calls == 1 {
			return fakekit.Notification{TradeNo: "T1", URL: m.srv.URL, Err: "sign: no key"}
		}
		return notification(m.srv.URL)()
	}))

	ns := waitRound(t, n, 2)
	require.Equal(t, "sign: no key", ns[0].Err)
	require.True(t, ns[1].Acked)
	require.Len(t, m.received(), 1)
}

func TestNotifyWithoutURLEndsTheRoundUnrecorded(t *testing.T) {
	t.Parallel()
	_, n := setup(t, fakekit.NotifyOptions{Schedule: []time.Duration{0, 0}, Ack: "success"})
	done := make(chan struct{})
	require.NoError(t, n.Start("T1", func() fakekit.Notification {
		defer close(done) // a second call would panic: the round asks once
		return fakekit.Notification{TradeNo: "T1"}
	}))
	<-done
	require.Never(t, func() bool { return n.Count() > 0 }, 30*time.Millisecond, 5*time.Millisecond)
}

func TestTransportErrorIsRecordedAndRetried(t *testing.T) {
	t.Parallel()
	m := newMerchant(t, func(int) string { return "success" })
	dead := m.srv.URL
	m.srv.Close() // nothing listens there any more
	_, n := setup(t, fakekit.NotifyOptions{Schedule: []time.Duration{0, 0}, Ack: "success"})
	require.NoError(t, n.Start("T1", notification(dead)))

	ns := waitRound(t, n, 2)
	require.NotEmpty(t, ns[0].Err)
	require.Zero(t, ns[0].Status)
	require.False(t, ns[1].Acked)
}

func TestCloseEndsAWaitingRoundAndRefusesNewOnes(t *testing.T) {
	t.Parallel()
	m := newMerchant(t, func(int) string { return "fail" })
	h, n := setup(t, fakekit.NotifyOptions{Schedule: []time.Duration{0, time.Hour}, Ack: "success"})
	require.NoError(t, n.Start("T1", notification(m.srv.URL)))
	require.Eventually(t, func() bool { return n.Count() == 1 }, 5*time.Second, time.Millisecond)

	closed := make(chan struct{})
	go func() { h.Close(); close(closed) }()
	testkit.WaitOrTimeout(t, closed, "Close to end the round waiting an hour")
	require.Equal(t, 1, n.Count())
	require.ErrorIs(t, n.Start("T1", notification(m.srv.URL)), errClosed)
}

func TestNotificationsAreCopies(t *testing.T) {
	t.Parallel()
	m := newMerchant(t, func(int) string { return "success" })
	_, n := setup(t, fakekit.NotifyOptions{Schedule: []time.Duration{0}, Ack: "success"})
	require.NoError(t, n.Start("T1", notification(m.srv.URL)))
	ns := waitRound(t, n, 1)
	ns[0].Params.Set("a", "changed")
	require.Equal(t, "1", n.Notifications()[0].Params.Get("a"))
}

func TestHostServesGuardedUntilClosed(t *testing.T) {
	t.Parallel()
	h := fakekit.NewHost("test", "", errClosed, nil)
	require.Empty(t, h.URL(), "no URL before Start without a public one")
	release := make(chan struct{})
	entered := make(chan struct{})
	handler := h.Guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(entered)
			<-release
		}
		_, _ = io.WriteString(w, "hi")
	}))
	require.NoError(t, h.Start("", handler))
	require.Regexp(t, `^http://127\.0\.0\.1:\d+$`, h.URL())
	require.ErrorContains(t, h.Start("", handler), "test fake: already started")

	resp, err := http.Get(h.URL() + "/")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, "hi", string(body))

	// Close waits for a handler in progress.
	go func() { _, _ = http.Get(h.URL() + "/slow") }()
	<-entered
	closed := make(chan struct{})
	go func() { h.Close(); close(closed) }()
	require.Never(t, func() bool {
		select {
		case <-closed:
			return true
		default:
			return false
		}
	}, 50*time.Millisecond, 5*time.Millisecond, "Close returned while a handler ran")
	close(release)
	<-closed
	http.DefaultClient.CloseIdleConnections()

	// Closed: the guard refuses, Start and Go refuse, Close is idempotent.
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.ErrorIs(t, h.Start("", handler), errClosed)
	require.ErrorIs(t, h.Go(func() {}), errClosed)
	h.Close()
}

func TestHostReportsItsPublicURL(t *testing.T) {
	t.Parallel()
	h := fakekit.NewHost("test", "https://pay.example/", errClosed, nil)
	defer h.Close()
	require.Equal(t, "https://pay.example", h.URL())
	require.NoError(t, h.Start("", http.NotFoundHandler()))
	require.Equal(t, "https://pay.example", h.URL(), "the public URL wins over the listener's")
}

func TestHostSleepEndsOnContextOrClose(t *testing.T) {
	t.Parallel()
	h := fakekit.NewHost("test", "", errClosed, nil)
	require.True(t, h.Sleep(context.Background(), time.Millisecond))
	require.True(t, h.Sleep(context.Background(), 0))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.False(t, h.Sleep(ctx, time.Hour))
	require.False(t, h.Sleep(ctx, 0))

	h.Close()
	require.False(t, h.Sleep(context.Background(), time.Hour))
	require.False(t, h.Sleep(context.Background(), 0))
}

func TestParseCentsIsExact(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]int64{
		"1": 100, "1.5": 150, "1.05": 105, "0.01": 1, "0": 0, "01.10": 110,
		"999999999": 99999999900, "999999999.99": 99999999999,
	} {
		got, ok := fakekit.ParseCents(s, 9)
		require.True(t, ok, s)
		require.Equal(t, want, got, s)
	}
	for _, s := range []string{
		"", "1.", ".5", "1.234", "-1", "+1", "1e2", " 1", "1 ", "1,00", "١", "1000000000", "0x10", "1.-5",
	} {
		_, ok := fakekit.ParseCents(s, 9)
		require.False(t, ok, "%q", s)
	}
	got, ok := fakekit.ParseCents("1000000000.00", 10)
	require.True(t, ok, "the integer digits are the caller's")
	require.Equal(t, int64(100000000000), got)
}

func TestSortedFormSortsOmitsAndKeepsValuesRaw(t *testing.T) {
	t.Parallel()
	p := url.Values{
		"b":         {"2"},
		"a":         {"x y&z=1"},
		"A":         {"upper"},
		"empty":     {""},
		"sign":      {"S"},
		"sign_type": {"MD5"},
		"m":         {"first", "second"},
	}
	require.Equal(t, "A=upper&a=x y&z=1&b=2&m=first", fakekit.SortedForm(p, "sign", "sign_type"))
	require.Equal(t, "A=upper&a=x y&z=1&b=2&m=first&sign_type=MD5", fakekit.SortedForm(p, "sign"))
	require.Empty(t, fakekit.SortedForm(url.Values{}))
}

func TestAppendQueryKeepsAnExistingQuery(t *testing.T) {
	t.Parallel()
	require.Equal(t, "http://m/cb?a=1", fakekit.AppendQuery("http://m/cb", "a=1"))
	require.Equal(t, "http://m/cb?id=7&a=1", fakekit.AppendQuery("http://m/cb?id=7", "a=1"))
}

func TestCloneValuesIsDeep(t *testing.T) {
	t.Parallel()
	require.Nil(t, fakekit.CloneValues(nil))
	v := url.Values{"a": {"1", "2"}}
	c := fakekit.CloneValues(v)
	c["a"][0] = "changed"
	c.Set("b", "new")
	require.Equal(t, url.Values{"a": {"1", "2"}}, v)
}
