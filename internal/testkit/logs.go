package testkit

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
)

// Logs collects log output written from many goroutines (the service's
// requests and workers) and is safe to read while they go on writing.
type Logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p; it is the io.Writer a slog handler writes to.
func (l *Logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// String is everything written so far.
func (l *Logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Text is a logger that writes slog's text format to l at debug level.
func (l *Logs) Text() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// JSON is a logger that writes one JSON object per line to l at debug level.
func (l *Logs) JSON() *slog.Logger {
	return slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Count is the number of text-format lines at level that contain msg.
func (l *Logs) Count(level slog.Level, msg string) int {
	n := 0
	for line := range strings.Lines(l.String()) {
		if strings.Contains(line, "level="+level.String()) && strings.Contains(line, msg) {
			n++
		}
	}
	return n
}

// Lines decodes every JSON line written so far; a line that is not JSON
// fails the check (t may be an EventuallyWithT condition's collector).
func (l *Logs) Lines(t T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(l.String()) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("log line is not JSON: %v: %q", err, line)
			t.FailNow()
		}
		out = append(out, m)
	}
	return out
}

// RaceReports is every report of Go's race detector in a process's output
// (each from its "WARNING: DATA RACE" to the line of = that ends it), ""
// when there is none. A failure message that shows only the output's last
// lines would lose the report: the process writes it when the race happens
// and only "Found N data race(s)" when it exits.
func RaceReports(output string) string {
	var b strings.Builder
	in := false
	for line := range strings.Lines(output) {
		switch {
		case strings.HasPrefix(line, "WARNING: DATA RACE"):
			in = true
			b.WriteString("==================\n")
		case in && strings.HasPrefix(line, "=================="):
			in = false
			b.WriteString(line)
			continue
		}
		if in {
			b.WriteString(line)
		}
	}
	return b.String()
}
