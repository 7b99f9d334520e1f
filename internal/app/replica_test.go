package app_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/export"
	"github.com/rustbill/paymentd/internal/pgcluster"
	"github.com/rustbill/paymentd/internal/testdb"
)

// replicaSet is a private primary and a streaming (asynchronous) standby
// of it, made for one test.
type replicaSet struct {
	primaryURL, standbyURL string
	primaryDir, standbyDir string
	primary, standby       *pgx.Conn
}

// startReplicaSet starts a private cluster and a standby of it
// (pg_basebackup -R), streaming before it returns. The database paymentd
// is empty: the service migrates it on the primary, the standby follows.
func startReplicaSet(t *testing.T) *replicaSet {
	t.Helper()
	s := &replicaSet{}
	s.primaryURL, s.primaryDir = testdb.PrivateServer(t, "paymentd")
	s.standbyDir = filepath.Join(filepath.Dir(s.primaryDir), "standby")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, pgcluster.Stop(ctx, s.standbyDir))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	standby, err := pgcluster.StartStandby(ctx, s.primaryDir, s.standbyDir, "replica1", t.Logf)
	require.NoError(t, err)
	s.standbyURL = standby.URL("paymentd")
	// The superuser's connections that steer the test: the primary's
	// postgres database for the probe writes, the standby's to pause and
	// resume its replay.
	s.primary, err = pgx.Connect(ctx, replaceDB(t, s.primaryURL, "postgres"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.primary.Close(context.Background()) })
	s.standby, err = pgx.Connect(ctx, standby.URL("postgres"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.standby.Close(context.Background()) })
	_, err = s.primary.Exec(ctx, "CREATE TABLE replica_probe (at timestamptz NOT NULL)")
	require.NoError(t, err)
	return s
}

// replaceDB is dbURL naming database name instead.
func replaceDB(t *testing.T, dbURL, name string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	u.Path = "/" + name
	return u.String()
}

// caughtUp commits on the primary and waits until the standby has replayed
// it: the standby's last replayed transaction is then a moment old, which
// is what its lag is counted from once its replay stops.
func (s *replicaSet) caughtUp(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	var lsn string
	require.NoError(t, s.primary.QueryRow(ctx, "INSERT INTO replica_probe VALUES (now()) RETURNING pg_current_wal_lsn()::text").Scan(&lsn))
	require.Eventually(t, func() bool {
		var done bool
		err := s.standby.QueryRow(ctx, "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", lsn).Scan(&done)
		return err == nil && done
	}, 30*time.Second, 10*time.Millisecond, "the standby replays the probe")
}

func (s *replicaSet) pauseReplay(t *testing.T) {
	t.Helper()
	_, err := s.standby.Exec(context.Background(), "SELECT pg_wal_replay_pause()")
	require.NoError(t, err)
}

func (s *replicaSet) resumeReplay(t *testing.T) {
	t.Helper()
	_, err := s.standby.Exec(context.Background(), "SELECT pg_wal_replay_resume()")
	require.NoError(t, err)
}

// heavyReads is what each heavy read says of one payment: whether an
// admin's ListPayments and the CSV export hold it, and the payments
// GetPaymentStats and GetPaymentTrends count since the test began.
type heavyReads struct {
	listed, exported    bool
	stats, trendCreated uint64
}

// readHeavy asks every heavy read about payment id of order, as an admin.
func readHeavy(t *testing.T, e *payBundle, began time.Time, order, id string) heavyReads {
	t.Helper()
	ctx := context.Background()
	var h heavyReads
	list, err := e.payments.ListPayments(ctx, with(&paymentpb.ListPaymentsRequest{Pagination: &paymentpb.PageRequest{}, OrderId: &order}, e.c.admin))
	require.NoError(t, err)
	for _, p := range list.Msg.GetPayments() {
		h.listed = h.listed || p.GetId() == id
	}

	params := url.Values{"from": {began.Add(-time.Hour).UTC().Format(time.RFC3339)},
		"to": {began.Add(time.Hour).UTC().Format(time.RFC3339)}, "order_id": {order}}
	req, err := http.NewRequest(http.MethodGet, e.r.baseURL+export.PaymentsPath+"?"+params.Encode(), nil)
	require.NoError(t, err)
	e.c.admin(req.Header)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body := readAll(t, res)
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	_, rows := records(t, body)
	for _, r := range rows {
		h.exported = h.exported || r["id"] == id
	}

	admin := paymentpbconnect.NewPaymentAdminServiceClient(http.DefaultClient, e.r.baseURL)
	stats, err := admin.GetPaymentStats(ctx, with(&paymentpb.GetPaymentStatsRequest{Since: began.Add(-time.Minute).UTC().Format(time.RFC3339)}, e.c.admin))
	require.NoError(t, err)
	h.stats = stats.Msg.GetTotal()
	// From the day before the test began to today: the range holds every
	// payment of the test even across a midnight.
	trends, err := admin.GetPaymentTrends(ctx, with(&paymentpb.GetPaymentTrendsRequest{From: began.UTC().AddDate(0, 0, -1).Format(time.DateOnly)}, e.c.admin))
	require.NoError(t, err)
	for _, c := range trends.Msg.GetCurrencies() {
		for _, d := range c.GetDays() {
			h.trendCreated += d.GetCreated()
		}
	}
	return h
}

func readAll(t *testing.T, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return string(b)
}

// replicaGauges reads paymentd_db_replica_in_use and _lag_seconds from the
// registry; lag is -1 when it has no series.
func replicaGauges(t *testing.T, e *payBundle) (inUse, lag float64) {
	t.Helper()
	families, err := e.r.app.Metrics().Registry().Gather()
	require.NoError(t, err)
	inUse, lag = -1, -1
	for _, f := range families {
		var v *dto.Metric
		if len(f.GetMetric()) > 0 {
			v = f.GetMetric()[0]
		}
		switch f.GetName() {
		case "paymentd_db_replica_in_use":
			inUse = v.GetGauge().GetValue()
		case "paymentd_db_replica_lag_seconds":
			lag = v.GetGauge().GetValue()
		}
	}
	return inUse, lag
}

// The heavy reads (an admin's ListPayments, the CSV export, GetPaymentStats,
// GetPaymentTrends) are answered by the replica while it is within
// [db].replica_max_lag: a payment made on the primary while the standby's
// replay is paused is missing from all four, while a customer's own list,
// which always reads the primary, shows it. Once the lag passes the
// maximum the four fall back to the primary and show it; the replica is
// used again once its replay resumes; and a replica that is killed is
// skipped while every read still answers.
func TestHeavyReadsGoToAReplicaWithinTheMaximumLag(t *testing.T) {
	t.Parallel()
	set := startReplicaSet(t)
	const maxLag = 3 * time.Second
	e := startPayments(t, func(c *config.Config) {
		c.DB.URL, c.DB.ReplicaURL, c.DB.ReplicaMaxLag = set.primaryURL, set.standbyURL, maxLag
	})
	ctx := context.Background()
	began := time.Now()
	inUse := func() bool { return e.r.app.ReplicaInUse() }
	require.Eventually(t, inUse, 30*time.Second, 10*time.Millisecond, "a caught-up standby is used")
	g, lag := replicaGauges(t, e)
	require.Equal(t, 1.0, g)
	require.GreaterOrEqual(t, lag, 0.0)
	require.Less(t, lag, maxLag.Seconds())

	// (a) Answered by the replica. The standby's replay stops just after
	// it caught up, so its lag grows from about zero and the reads have
	// the maximum's 3 s to run before the watcher gives up on it. On a
	// machine too busy for that (the replica is not in use any more once
	// they answered, so which database answered is unknown) the round is
	// repeated.
	var order, id string
	for attempt := 1; ; attempt++ {
		set.caughtUp(t)
		set.pauseReplay(t)
		order = e.order(t)
		id = e.createPayment(t, order).GetPayment().GetId()
		got := readHeavy(t, e, began, order, id)
		if !inUse() {
			require.Less(t, attempt, 3, "the reads never ran within the maximum lag")
			set.resumeReplay(t)
			require.Eventually(t, inUse, 30*time.Second, 10*time.Millisecond)
			continue
		}
		onPrimary := e.count(t, "SELECT count(*) FROM payments")
		require.False(t, got.listed, "an admin's list comes from the replica, which has not replayed the payment")
		require.False(t, got.exported, "the export comes from the replica")
		require.EqualValues(t, onPrimary-1, got.stats, "the stats come from the replica")
		require.EqualValues(t, onPrimary-1, got.trendCreated, "the trends come from the replica")
		break
	}
	mine, err := e.payments.ListPayments(ctx, with(&paymentpb.ListPaymentsRequest{Pagination: &paymentpb.PageRequest{}, OrderId: &order}, e.c.customer))
	require.NoError(t, err)
	require.Len(t, mine.Msg.GetPayments(), 1, "a customer's list reads the primary: the payment just made is there")

	// (b) Past the maximum: the primary answers.
	require.Eventually(t, func() bool { return !inUse() }, 30*time.Second, 10*time.Millisecond, "the paused replica falls past the maximum")
	g, lag = replicaGauges(t, e)
	require.Equal(t, 0.0, g)
	require.Greater(t, lag, maxLag.Seconds())
	onPrimary := e.count(t, "SELECT count(*) FROM payments")
	got := readHeavy(t, e, began, order, id)
	require.Equal(t, heavyReads{listed: true, exported: true, stats: uint64(onPrimary), trendCreated: uint64(onPrimary)}, got,
		"the heavy reads fall back to the primary")

	// Replay resumed: the replica is used again, and has the payment now.
	set.resumeReplay(t)
	require.Eventually(t, inUse, 30*time.Second, 10*time.Millisecond, "a replica that caught up is used again")
	g, _ = replicaGauges(t, e)
	require.Equal(t, 1.0, g)
	got = readHeavy(t, e, began, order, id)
	require.True(t, got.listed && got.exported)

	// (c) A replica that is down is skipped; every read still answers.
	require.NoError(t, pgcluster.Kill(set.standbyDir))
	require.Eventually(t, func() bool { return !inUse() }, 30*time.Second, 10*time.Millisecond, "a dead replica is not used")
	g, lag = replicaGauges(t, e)
	require.Equal(t, 0.0, g)
	require.Equal(t, -1.0, lag, "no lag series while the replica cannot be asked")
	got = readHeavy(t, e, began, order, id)
	require.Equal(t, heavyReads{listed: true, exported: true, stats: uint64(onPrimary), trendCreated: uint64(onPrimary)}, got)
}
