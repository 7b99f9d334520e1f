package replica_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rustbill/paymentd/internal/replica"
	"github.com/rustbill/paymentd/internal/testdb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testdb.Main(m)) }

// syncBuffer is a log destination the watcher's goroutine and the test
// share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A replica URL that names a primary (the tests' server is one) is never
// used: the reads stay on the primary, and the log says why once, not
// every round.
func TestAPrimaryNamedAsTheReplicaIsNotUsedAndSaidOnce(t *testing.T) {
	t.Parallel()
	pool := testdb.SharedPool(t)
	// A connection made first: the check's limit (two Intervals) is for
	// the check, and a first connection to a database just cloned from
	// the template can take longer. The check's own timeout cannot be tied
	// to an event, so it has room: at 20 ms Intervals a busy machine made
	// a check miss its 40 ms, and the log rightly said a second reason
	// ("the lag check failed").
	require.NoError(t, pool.Ping(context.Background()))
	var logs syncBuffer
	w := replica.New(pool, pool, pool, replica.Options{Interval: 250 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, w.Start(context.Background()))
	defer w.Stop()
	require.Eventually(t, func() bool { return w.Rounds() >= 5 }, 10*time.Second, 5*time.Millisecond)
	require.False(t, w.InUse())
	_, known := w.Lag()
	require.False(t, known)
	require.Equal(t, 1, strings.Count(logs.String(), "read replica not used"), logs.String())
	require.Contains(t, logs.String(), "not a standby")
}
