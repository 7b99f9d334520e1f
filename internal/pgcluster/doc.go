// Package pgcluster runs a private PostgreSQL cluster for a machine that has no
// database configured: `paymentd serve` without [db].url, and tests when no
// server answers on 127.0.0.1:5432.
//
// Why a private cluster and not the system one: we cannot assume a role, a
// password or a free database on someone else's server, and we must never stop
// or reconfigure it. A cluster of our own, in a directory we own (by default
// .data/postgres in the repository), on a port of its own, with trust
// authentication on loopback only, works on a bare machine with nothing but the
// server binaries, and leaves nothing behind outside that directory.
//
// Ensure walks the cluster through these states, with one log line per arrow:
//
//	FindBinaries ──missing──▶ root and apt-get? ──no──▶ one-line error, nothing else done
//	     │                          │ yes
//	     │◀──── apt-get install ────┘
//	     ▼
//	(no cluster) ──initdb──▶ stopped ──pg_ctl start -w──▶ running ──▶ database created if missing
//	                          ▲  ▲                          │  ▲
//	                          │  └─ Stop: pg_ctl stop ◀─────┘  └── already running: reused
//	                          │       -m fast
//	  stale postmaster.pid ───┘
//	  (its pid is dead or not postgres) removed
//
// The first initdb happens in a temporary sibling directory that is renamed
// into place only once it is complete, so a crash never leaves a half cluster
// behind. The port is chosen once, outside the kernel's ephemeral range, and
// remembered in paymentd.port inside the directory, so the URL is the same on
// every run. Settings we depend on (port, listen address, socket directory)
// live in paymentd.conf, rewritten before every start and included at the end
// of postgresql.conf; the unix socket sits inside the data directory, so the
// cluster never competes with the system one for /var/run/postgresql.
//
// PostgreSQL refuses to run as root. When we are root, initdb and pg_ctl run
// as the owner of an existing data directory, or else as the `postgres` system
// user (created with useradd when Debian's package has not created it yet).
//
// Tests that need many private clusters copy one stopped cluster (Copy,
// StartCopy) instead of running initdb for each; a service never does.
//
// Every call takes an exclusive flock on a lock file beside the data directory,
// so parallel test processes and a running service can call Ensure and Stop at
// the same time.
package pgcluster
