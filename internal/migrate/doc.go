// Package migrate applies the embedded goose migrations under the
// `migration` leader role.
//
// The role has two parts, because the lease table is itself created by a
// migration (00008):
//
//  1. Mutual exclusion: a PostgreSQL session advisory lock (LockID) on a
//     connection of the run's own, held for the whole run. It works on an
//     empty database, and PostgreSQL drops it with the session, so a killed
//     migrator never leaves it behind. An instance that finds it taken
//     retries every 250 ms, up to Options.Wait ([cluster].migration_wait,
//     60 s), and then, usually, finds nothing left to apply.
//  2. The lease: while there is something to apply and leader_leases exists
//     — from the start, or from the migration that creates it on — the
//     lock's holder also holds the `migration` row of leader_leases, through
//     a cluster.Elector on the lock's connection, exactly like `billing` and
//     `event_worker`: holder, term and expiry on the database clock, renewed
//     every [cluster].lease_renew, resigned when the run ends. The run is
//     therefore visible in EventAdminService.ListLeaders, and a migrator
//     killed mid-run (its lock gone with its session, its lease row not) is
//     taken over as other roles are: the next instance, holding the lock,
//     waits until that lease expires — its holder may still be alive behind
//     a broken connection, and stops before its next migration once it
//     cannot renew — and then migrates. Lock and lease share one session, so
//     a migrator whose session dies loses both.
//
// A run:
//
//	take the lock (≤ Wait) ─▶ anything pending? ─no─▶ resign, unlock
//	                               ▲      │yes
//	                               │      ▼
//	                               │   lease table? ─no──────────┐
//	                               │      │yes                   │
//	                               │      ▼                      │
//	                               │   hold the lease (a dead    │
//	                               │   one's expiry awaited,     │
//	                               │   ≤ Wait); still leader?    │
//	                               │      │yes (no: stop, error) │
//	                               │      ▼                      ▼
//	                               └── apply the next migration (its own
//	                                   transaction, another connection)
//
// Down and DownTo (an operator's commands; rolling back 00008 drops the
// lease table) hold the advisory lock only.
package migrate
