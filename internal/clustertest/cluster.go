package clustertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rustbill/paymentd/internal/localport"
)

// Passwords and secrets of a test cluster (never production values).
const (
	AdminPassword = "clustertest-admin-password"
	JWTSecret     = "clustertest-jwt-secret-0123456789abcdef"
	// SecretsKey encrypts the gateway interfaces' secrets, given to every
	// node through the environment (one variable per key, as an operator's
	// secret store would).
	SecretsKey = "Y2x1c3RlcnRlc3Qtc2VjcmV0cy1rZXktMzJieXRlcyE=" // "clustertest-secrets-key-32bytes!"
)

// Options describe a cluster to start.
type Options struct {
	// Binary is the paymentd to run (Build, BuildCommit).
	Binary string
	// Plugins is [plugins].dir (default the repository's plugins/; a
	// BuildCommit binary runs with its own commit's, Built.Plugins).
	Plugins string
	// Nodes is how many instances (default 3).
	Nodes int
	// DatabaseURL is the one database every node uses.
	DatabaseURL string
	// Dir holds the nodes' logs; it must exist.
	Dir string
	// LeaseTTL is [cluster].lease_ttl (default 3s); the renew interval is a
	// quarter of it, heartbeats every second.
	LeaseTTL time.Duration
	// Env adds PAYMENTD_* settings for every node (KEY=VALUE), after the
	// harness's own, so they win.
	Env []string
	// Logf receives the harness's log lines (nil: discarded).
	Logf func(format string, args ...any)
}

// Cluster is a set of paymentd processes on one database.
type Cluster struct {
	Nodes []*Node
	// Pool is the harness's own connection to the database (for checks).
	Pool *pgxpool.Pool
	opts Options
}

// Env is the configuration every node gets, short intervals so that a test
// sees takeovers, reclaims and reconciliation within seconds.
func (o Options) env(port int) []string {
	ttl := o.LeaseTTL
	renew := ttl / 4
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.Getenv("HOME"),
		"PAYMENTD_DB__URL=" + o.DatabaseURL,
		"PAYMENTD_DB__MAX_CONNECTIONS=8",
		"PAYMENTD_DB__MIN_CONNECTIONS=1",
		"PAYMENTD_DB__ACQUIRE_TIMEOUT_SECS=3",
		fmt.Sprintf("PAYMENTD_SERVER__PORT=%d", port),
		fmt.Sprintf("PAYMENTD_SERVER__PUBLIC_URL=http://127.0.0.1:%d", port),
		"PAYMENTD_SERVER__SHUTDOWN_TIMEOUT=5s",
		"PAYMENTD_JWT__SECRET=" + JWTSecret,
		"PAYMENTD_SECRETS__CURRENT=cluster",
		"PAYMENTD_SECRETS__KEYS__CLUSTER=" + SecretsKey,
		"PAYMENTD_BOOTSTRAP__ADMIN_PASSWORD=" + AdminPassword,
		"PAYMENTD_RATE_LIMIT__ENABLED=false",
		"PAYMENTD_PLUGINS__DIR=" + o.Plugins,
		"PAYMENTD_LOG__FORMAT=json",
		"PAYMENTD_METRICS__PORT=0",
		"PAYMENTD_CLUSTER__LEASE_TTL=" + ttl.String(),
		"PAYMENTD_CLUSTER__LEASE_RENEW=" + renew.String(),
		"PAYMENTD_CLUSTER__HEARTBEAT_INTERVAL=1s",
		"PAYMENTD_CLUSTER__NODE_LOST_AFTER=3s",
		"PAYMENTD_CLUSTER__MIGRATION_WAIT=60s",
		"PAYMENTD_EVENTS__POLL_INTERVAL=500ms",
		"PAYMENTD_EVENTS__HANDLER_TIMEOUT=4s",
		"PAYMENTD_EVENTS__LOCK_GRACE=1s",
		"PAYMENTD_EVENTS__RETRY_BASE=200ms",
		"PAYMENTD_EVENTS__RETRY_MAX=2s",
		"PAYMENTD_EVENTS__DRAIN_TIMEOUT=3s",
		"PAYMENTD_NOTIFY__POLL_INTERVAL=500ms",
		"PAYMENTD_BILLING__RECONCILE_AFTER=2s",
		"PAYMENTD_OUTBOUND__COOLDOWN=2s",
		"PAYMENTD_OUTBOUND__TIMEOUT=1500ms",
	}
	return append(env, o.Env...)
}

// Start starts every node at once (they race for the migration role, as
// instances deployed together do) and waits until each answers /ready.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if o.Nodes <= 0 {
		o.Nodes = 3
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 3 * time.Second
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.Plugins == "" {
		o.Plugins = PluginsDir()
	}
	c := &Cluster{opts: o}
	for i := range o.Nodes {
		n, err := c.newNode(i + 1)
		if err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, n)
	}
	for _, n := range c.Nodes {
		if err := n.Start(); err != nil {
			c.Close()
			return nil, err
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(c.Nodes))
	for i, n := range c.Nodes {
		wg.Go(func() { errs[i] = n.WaitReady(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.Close()
		return nil, err
	}
	pool, err := pgxpool.New(ctx, o.DatabaseURL)
	if err != nil {
		c.Close()
		return nil, err
	}
	c.Pool = pool
	o.Logf("clustertest: %d nodes ready: %s", len(c.Nodes), c)
	return c, nil
}

func (c *Cluster) newNode(i int) (*Node, error) {
	// A node keeps its port across Kill and Start: one from the kernel's
	// ephemeral range could be lent to another connection meanwhile.
	port, err := localport.Free()
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("node-%d", i)
	return &Node{
		Name: name, Port: port, URL: fmt.Sprintf("http://127.0.0.1:%d", port),
		bin: c.opts.Binary, env: c.opts.env(port), logPath: filepath.Join(c.opts.Dir, name+".log"), logf: c.opts.Logf,
	}, nil
}

func (c *Cluster) String() string {
	var parts []string
	for _, n := range c.Nodes {
		state := "down"
		if n.Alive() {
			state = "up"
		}
		parts = append(parts, fmt.Sprintf("%s %s %s %s", n.Name, n.URL, n.ID(), state))
	}
	return strings.Join(parts, "; ")
}

// Close stops every node gracefully and closes the pool. Errors of the stop
// are returned (a node that did not stop cleanly).
func (c *Cluster) Close() error {
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Go(func() {
			if err := n.Stop(15 * time.Second); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if c.Pool != nil {
		c.Pool.Close()
	}
	return errors.Join(errs...)
}

// Alive is the nodes whose process runs.
func (c *Cluster) Alive() []*Node {
	var out []*Node
	for _, n := range c.Nodes {
		if n.Alive() {
			out = append(out, n)
		}
	}
	return out
}

// NodeOf is the node whose process has (or had) cluster node id id.
func (c *Cluster) NodeOf(id string) *Node {
	for _, n := range c.Nodes {
		if n.HadID(id) {
			return n
		}
	}
	return nil
}

// Lease is a row of leader_leases as the database sees it now.
type Lease struct {
	Role, Holder string
	Valid        bool
	ExpiresIn    time.Duration
	// ElectedAt and ExpiresAt are the term's start and end, and Now the
	// database's clock when it was read.
	ElectedAt, ExpiresAt, Now time.Time
}

// Leases reads leader_leases on the database clock.
func (c *Cluster) Leases(ctx context.Context) (map[string]Lease, error) {
	rows, err := c.Pool.Query(ctx, `SELECT role, holder, expires_at > now(), extract(epoch FROM expires_at - now()),
		elected_at, expires_at, now()
		FROM leader_leases`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]Lease{}
	for rows.Next() {
		var l Lease
		var secs float64
		if err := rows.Scan(&l.Role, &l.Holder, &l.Valid, &secs, &l.ElectedAt, &l.ExpiresAt, &l.Now); err != nil {
			return nil, err
		}
		l.ExpiresIn = time.Duration(secs * float64(time.Second))
		out[l.Role] = l
	}
	return out, rows.Err()
}

// WaitLeader waits until role has a valid lease whose holder is a live node
// other than not (nil: any), and returns that node.
func (c *Cluster) WaitLeader(ctx context.Context, role string, not *Node) (*Node, error) {
	for {
		leases, err := c.Leases(ctx)
		if err == nil {
			if l, ok := leases[role]; ok && l.Valid {
				if n := c.NodeOf(l.Holder); n != nil && n != not && n.Alive() {
					return n, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("clustertest: no live %s leader: %w (leases %v)", role, ctx.Err(), leases)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// interval is one stretch during which a node acted as a role's leader.
type interval struct {
	node       string
	start, end time.Time
}

// CheckLeadership checks, from what the nodes logged, that no two
// processes acted as leader of a role at the same time. A process that was
// killed while leading led until the kill (it cannot say so itself); one
// that still leads, until now.
func (c *Cluster) CheckLeadership(role string) error {
	var spans []interval
	for _, n := range c.Nodes {
		open := map[string]*interval{} // by process life (node id)
		for _, ch := range n.Leadership() {
			if ch.Role != role {
				continue
			}
			switch o := open[ch.Node]; {
			case ch.Leading && o == nil:
				open[ch.Node] = &interval{node: n.Name + "/" + ch.Node, start: ch.At}
			case !ch.Leading && o != nil:
				o.end = ch.At
				spans = append(spans, *o)
				delete(open, ch.Node)
			}
		}
		for id, o := range open {
			o.end = n.endOf(id)
			if o.end.IsZero() {
				o.end = time.Now()
			}
			spans = append(spans, *o)
		}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
	for i := 1; i < len(spans); i++ {
		if spans[i].start.Before(spans[i-1].end) {
			return fmt.Errorf("clustertest: two %s leaders at once: %s led %s–%s, %s from %s",
				role, spans[i-1].node, spans[i-1].start.Format("15:04:05.000"), spans[i-1].end.Format("15:04:05.000"),
				spans[i].node, spans[i].start.Format("15:04:05.000"))
		}
	}
	if len(spans) == 0 {
		return fmt.Errorf("clustertest: nobody ever led %s", role)
	}
	return nil
}

// Tails is the end of every node's log, for a failure message.
func (c *Cluster) Tails(lines int) string {
	var b strings.Builder
	for _, n := range c.Nodes {
		b.WriteString(n.Tail(lines))
		b.WriteString("\n")
	}
	return b.String()
}
