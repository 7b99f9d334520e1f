package concurrency

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// A handler that gives its slot back (Release) lets the next request in
// while it still runs; the slot is given back once, however often Release
// is called, so the limit is never exceeded afterwards.
func TestReleaseLetsTheNextRequestInWhileTheHandlerStillRuns(t *testing.T) {
	t.Parallel()
	released := make(chan struct{})
	unblock := make(chan struct{})
	b := setup(t, 1, func(r *http.Request) {
		if r.URL.Query().Get("n") == "1" {
			Release(r.Context())
			Release(r.Context())
			close(released)
			<-unblock
		}
	})
	first := make(chan error, 1)
	go func() { first <- func() error { _, err := b.get(context.Background(), 1); return err }() }()
	<-released
	require.Equal(t, 0, b.limiter.InFlight(), "the released request is no longer counted")
	_, err := b.get(context.Background(), 2)
	require.NoError(t, err, "the second request is served while the first still runs")
	close(unblock)
	require.NoError(t, <-first)
	require.Equal(t, 0, b.limiter.InFlight())
	Release(context.Background()) // no slot: nothing happens
}
