package metrics

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// scrapeCache is what every collector that reads the database at scrape
// time shares: the answer is read at most once per MaxAge, within Timeout,
// and a failing read is logged once per outage, not once per scrape.
type scrapeCache struct {
	// what names the figures in the log lines ("the queue statistics").
	what string
	opts QueueOptions

	mu      sync.Mutex
	at      time.Time
	ok      bool
	failing bool // the last read failed (logged once per outage)
}

func newScrapeCache(what string, o QueueOptions) scrapeCache {
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	if o.MaxAge <= 0 {
		o.MaxAge = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return scrapeCache{what: what, opts: o}
}

// collect calls read when the last answer is older than MaxAge, then emit
// with whether the answer read is usable, both under the cache's lock, so
// that read may store what emit writes out.
func (c *scrapeCache) collect(read func(context.Context) error, emit func(ok bool)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() || time.Since(c.at) >= c.opts.MaxAge {
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
		c.at = time.Now()
		err := read(ctx)
		cancel()
		switch {
		case err != nil && !c.failing:
			c.opts.Logger.Warn("metrics: cannot read "+c.what, "err", err)
		case err == nil && c.failing:
			c.opts.Logger.Info("metrics: " + c.what + " readable again")
		}
		c.ok, c.failing = err == nil, err != nil
	}
	emit(c.ok)
}
