package main

import (
	"context"
	"io"
	"log/slog"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/config"
)

// The start collects often and gives the collector's target back after,
// whether the start succeeds or not: a service that kept 10 % would spend
// its life collecting.
func TestTheStartsCollectorTargetComesBackAfterIt(t *testing.T) {
	cfg := config.Default()
	cfg.DB.URL = "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=1"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, before := range []int{100, 250, 5, -1} {
		prev := debug.SetGCPercent(before)
		_, err := newAppPacked(ctx, cfg, log)
		require.Error(t, err, "no database answers on port 1")
		require.Equal(t, before, debug.SetGCPercent(prev), "GOGC=%d comes back", before)
	}
}

// Allocations are sampled for a heap profile only where one can be read.
func TestAllocationsAreSampledOnlyWhenPprofIsOn(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	require.False(t, cfg.Metrics.Pprof, "off by default")
	require.Zero(t, memProfileRate(cfg, 512*1024))
	cfg.Metrics.Pprof = true
	require.Equal(t, 512*1024, memProfileRate(cfg, 512*1024))
}
