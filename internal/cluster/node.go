package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
)

// Leader roles on the lease table (leader_leases_role_check). The migration
// role is held by internal/migrate for the length of a migration run: an
// advisory lock (the lease table is created by a migration) and, once the
// table exists, an Elector of this role like the others.
const (
	RoleMigration   = "migration"
	RoleBilling     = "billing"
	RoleEventWorker = "event_worker"
)

// Notification channels (LISTEN/NOTIFY).
const (
	// ChannelEvents: the events insert trigger, at commit (payload: order id).
	ChannelEvents = "paymentd_events"
	// ChannelLeadership: a leader resigned (payload: the role).
	ChannelLeadership = "paymentd_leadership"
	// ChannelNotifications: notifications were queued.
	ChannelNotifications = "paymentd_notifications"
)

// Channels is every channel a paymentd instance listens on.
var Channels = []string{ChannelEvents, ChannelLeadership, ChannelNotifications}

// NodeInfo describes this instance in the nodes table.
type NodeInfo struct {
	// ID is unique per process (NewNodeID); it is the lease holder and the
	// events.locked_by of this instance.
	ID       string
	Hostname string
	Version  string
}

// NewNodeID returns a node id unique to this process: the host name and a
// random suffix ("web-1-3f9a0c2e"). A restarted process is a new node, so a
// lease or an event claim of its previous life is never mistaken for its own.
func NewNodeID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "paymentd"
	}
	host = strings.ReplaceAll(host, " ", "_")
	if len(host) > 40 {
		host = host[:40]
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return host + "-" + hex.EncodeToString(b[:])
}

// Hostname is os.Hostname, empty when unknown.
func Hostname() string {
	h, _ := os.Hostname()
	return h
}
