package cluster

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/rustbill/paymentd/internal/startstop"
	"github.com/rustbill/paymentd/internal/store"
)

// The defaults of HeartbeatOptions (docs/api.md, "Limits"), and of
// [cluster].heartbeat_interval and node_lost_after.
const (
	DefaultHeartbeatInterval = 10 * time.Second
	DefaultNodeLostAfter     = 30 * time.Second
)

// HeartbeatOptions configure a Heartbeat. Zero durations take the defaults
// above.
type HeartbeatOptions struct {
	Node NodeInfo
	// Interval between heartbeats ([cluster].heartbeat_interval).
	Interval time.Duration
	// LostAfter: a node whose last heartbeat is older is lost
	// ([cluster].node_lost_after).
	LostAfter time.Duration
	// ForgetAfter: nodes silent this long are deleted (default 7 days).
	ForgetAfter time.Duration
	Logger      *slog.Logger
}

// Heartbeat keeps this node's row in nodes fresh and watches the others.
type Heartbeat struct {
	db   store.DB
	opts HeartbeatOptions
	log  *slog.Logger

	mu   sync.Mutex
	lost map[string]bool

	loop startstop.Loop
}

// NewHeartbeat returns the heartbeat of opts.Node over db.
func NewHeartbeat(db store.DB, opts HeartbeatOptions) (*Heartbeat, error) {
	if opts.Node.ID == "" {
		return nil, errors.New("cluster: heartbeat needs a node id")
	}
	opts.Interval = cmp.Or(max(opts.Interval, 0), DefaultHeartbeatInterval)
	opts.LostAfter = cmp.Or(max(opts.LostAfter, 0), DefaultNodeLostAfter)
	if opts.LostAfter <= opts.Interval {
		return nil, errors.New("cluster: node_lost_after must be longer than the heartbeat interval")
	}
	if opts.ForgetAfter <= 0 {
		opts.ForgetAfter = 7 * 24 * time.Hour
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Heartbeat{db: db, opts: opts, log: log.With("node", opts.Node.ID), lost: map[string]bool{}}, nil
}

// Start beats at once and then every Interval until ctx is cancelled or
// Stop is called.
func (h *Heartbeat) Start(ctx context.Context) error {
	return h.loop.Start(ctx, func(ctx context.Context, _ <-chan struct{}) { h.run(ctx) })
}

// Stop ends the heartbeat and removes this node's row: a node that leaves
// cleanly is gone, not lost.
func (h *Heartbeat) Stop() {
	if !h.loop.Stop() {
		return
	}
	ctx, cancelDelete := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelDelete()
	if err := store.DeleteNode(ctx, h.db, h.opts.Node.ID); err != nil {
		h.log.Warn("could not remove the node row; it will show as lost", "err", err)
		return
	}
	h.log.Info("node left the cluster")
}

// Lost returns the ids of the nodes this heartbeat last saw lost.
func (h *Heartbeat) Lost() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for id, lost := range h.lost {
		if lost {
			out = append(out, id)
		}
	}
	return out
}

func (h *Heartbeat) run(ctx context.Context) {
	t := time.NewTicker(h.opts.Interval)
	defer t.Stop()
	failing := false
	for {
		err := h.beat(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !failing:
			failing = true
			h.log.Warn("heartbeat failed; other nodes will see this one as lost if it lasts", "err", err)
		case err == nil && failing:
			failing = false
			h.log.Info("heartbeat restored")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (h *Heartbeat) beat(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, h.opts.Interval)
	defer cancel()
	n := h.opts.Node
	if _, err := store.Q(h.db).UpsertNodeHeartbeat(ctx, store.UpsertNodeHeartbeatParams{
		ID: n.ID, Hostname: n.Hostname, Version: n.Version,
	}); err != nil {
		return err
	}
	nodes, err := store.Q(h.db).ListNodesWithAge(ctx, h.opts.LostAfter)
	if err != nil {
		return err
	}
	h.watch(nodes)
	_, err = store.Q(h.db).DeleteNodesSilentFor(ctx, h.opts.ForgetAfter)
	return err
}

// watch logs every node that turned lost or came back since the last beat.
func (h *Heartbeat) watch(nodes []store.NodeState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		seen[n.ID] = true
		was, known := h.lost[n.ID]
		switch {
		case n.Lost && !was:
			h.log.Warn("node lost", "lost_node", n.ID, "hostname", n.Hostname,
				"heartbeat_age", n.HeartbeatAge.Round(time.Second).String())
		case !n.Lost && was:
			h.log.Info("node is back", "back_node", n.ID, "hostname", n.Hostname)
		case !known && n.ID != h.opts.Node.ID:
			h.log.Info("node seen", "other_node", n.ID, "hostname", n.Hostname, "version", n.Version)
		}
		h.lost[n.ID] = n.Lost
	}
	for id := range h.lost {
		if !seen[id] {
			delete(h.lost, id)
		}
	}
}
