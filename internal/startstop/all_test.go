package startstop_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/startstop"
)

// service records its starts and stops in a shared log; fail makes its
// Start fail.
type service struct {
	name string
	log  *[]string
	fail error
}

func (s *service) Start(context.Context) error {
	*s.log = append(*s.log, "start "+s.name)
	return s.fail
}

func (s *service) Stop() { *s.log = append(*s.log, "stop "+s.name) }

func services(log *[]string, names ...string) []startstop.Service {
	out := make([]startstop.Service, len(names))
	for i, n := range names {
		out[i] = &service{name: n, log: log}
	}
	return out
}

func TestStartAllStartsInOrderAndStopAllStopsInReverse(t *testing.T) {
	t.Parallel()
	var log []string
	all := services(&log, "listener", "lease", "worker")
	require.NoError(t, startstop.StartAll(t.Context(), all...))
	startstop.StopAll(all...)
	require.Equal(t, []string{"start listener", "start lease", "start worker", "stop worker", "stop lease", "stop listener"}, log)
}

// A service that cannot start stops those started before it, last first,
// and the ones after it never start.
func TestStartAllStopsWhatStartedWhenOneFails(t *testing.T) {
	t.Parallel()
	var log []string
	all := services(&log, "listener", "lease", "worker", "sender")
	refused := errors.New("worker: no node id")
	all[2].(*service).fail = refused
	require.ErrorIs(t, startstop.StartAll(t.Context(), all...), refused)
	require.Equal(t, []string{"start listener", "start lease", "start worker", "stop lease", "stop listener"}, log)
}
