// Package cache is the optional shared Redis ([redis] in the configuration):
// session state and rate-limit counters that every instance sees. It is a
// thin wrapper over go-redis that adds the two things the service needs on
// top of a client: keys under one prefix ([redis].key_prefix, default
// "paymentd"), and outage tracking.
//
// Redis is never the system of record. When it is down the service degrades
// (sessions from the database, rate counters in memory, advisory locks in the
// database) instead of failing, so a dead Redis must cost a request nothing:
//
//   - timeouts are short (dial, read and write 300 ms; no command retries),
//     so the one request that finds Redis gone learns it quickly;
//   - after a failure the cache is marked unavailable and callers skip Redis
//     entirely for a back-off (1 s by default), then one caller probes it;
//   - one warning is logged when an outage starts and one info line when it
//     ends, not one line per request.
//
// Callers follow one pattern:
//
//	if c.Available() {
//		v, err := use(c.Client())
//		if err == nil { c.ReportOK(); return v }
//		c.ReportError(err)
//	}
//	return fallback()
//
// The outage state machine (clock injected):
//
//	         ReportError (logs one warning)
//	up ───────────────────────────────────────▶ down
//	▲  Available()=true                          │ Available()=false until
//	│                                            │ the back-off has passed
//	│ ReportOK (logs one info)                   ▼
//	└──────────────────────────────────────── probing: Available()=true for
//	                 ReportError: back to down,   exactly one caller
//	                 new back-off, no log line    (another after a back-off,
//	                                              if that one never reports)
//
// A disabled cache ([redis].enabled = false) is a Cache whose Available is
// always false, so callers need no separate nil check.
package cache
