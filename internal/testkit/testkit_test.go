package testkit

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestClockMovesOnlyWhenTold(t *testing.T) {
	c := NewClock()
	require.Equal(t, Epoch, c.Now())
	require.Equal(t, Epoch.Add(time.Hour), c.Advance(time.Hour))
	at := time.Date(2027, 3, 31, 0, 0, 0, 0, time.UTC)
	c.Set(at)
	require.Equal(t, at, c.Now())
}

func TestLogsCountAndDecode(t *testing.T) {
	var l Logs
	l.Text().Warn("redis unavailable", "n", 1)
	l.Text().Info("redis unavailable")
	require.Equal(t, 1, l.Count(slog.LevelWarn, "redis unavailable"))
	require.Equal(t, 0, l.Count(slog.LevelError, "redis unavailable"))

	var j Logs
	j.JSON().Info("rpc", "code", "ok")
	lines := j.Lines(t)
	require.Len(t, lines, 1)
	require.Equal(t, "ok", lines[0]["code"])
}

func TestRaceReportsAreCutFromTheOutputWhole(t *testing.T) {
	report := "==================\nWARNING: DATA RACE\nWrite at 0x00c000 by goroutine 7:\n  main.f()\n==================\n"
	out := "{\"msg\":\"started\"}\n" + report + "{\"msg\":\"stopped\"}\nFound 1 data race(s)\n"
	require.Equal(t, report, RaceReports(out))
	require.Empty(t, RaceReports("{\"msg\":\"stopped\"}\n"))
}

func TestWaitOrTimeoutReturnsWhatArrives(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	require.Equal(t, 7, WaitOrTimeout(t, ch, "a seven"))
}

// failRecorder is a testing.TB whose Fatalf records instead of ending the
// test, so that the timeout path can be watched.
type failRecorder struct {
	testing.TB
	failed string
}

func (f *failRecorder) Helper() {}

func (f *failRecorder) Fatalf(format string, args ...any) { f.failed = fmt.Sprintf(format, args...) }

func TestWaitOrTimeoutFailsSayingWhatItWaitedFor(t *testing.T) {
	rec := &failRecorder{TB: t}
	got := WaitOrTimeoutFor(rec, make(chan int), 10*time.Millisecond, "the worker to stop")
	require.Zero(t, got)
	require.Equal(t, "waited 10ms for the worker to stop", rec.failed)
}

// ExpiresOn's deadline passes at the event, and what is derived from it
// (as net/http and the retry policies derive) sees a passed deadline too.
func TestExpiresOnPassesItsDeadlineAtTheEvent(t *testing.T) {
	event := make(chan struct{})
	ctx := ExpiresOn(event)
	child, cancel := context.WithCancel(ctx)
	defer cancel()
	require.NoError(t, ctx.Err())
	require.NoError(t, child.Err())
	event <- struct{}{}
	<-child.Done()
	require.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
	require.ErrorIs(t, child.Err(), context.DeadlineExceeded)
	require.ErrorIs(t, context.Cause(ctx), context.DeadlineExceeded)
	require.ErrorIs(t, context.Cause(child), context.DeadlineExceeded)
}
