package logging

import (
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/rustbill/paymentd/internal/config"
)

// New returns a logger writing to w as [log] says. "auto" picks text when w
// is a terminal and JSON otherwise. Lines logged with a request's context
// carry its request id, what the layers added to its Scope, and the trace
// and span ids (see ContextHandler).
func New(cfg config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	switch strings.ToLower(cfg.Level) {
	case "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	default:
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	format := cfg.Format
	if format == "auto" || format == "" {
		format = "json"
		if isTerminal(w) {
			format = "text"
		}
	}
	if format == "text" {
		return slog.New(WithContext(slog.NewTextHandler(w, opts)))
	}
	return slog.New(WithContext(slog.NewJSONHandler(w, opts)))
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
