package logging

import (
	"io"
	"log/slog"
	"os"
	"strings"
)

// Options is how lines are written ([log] in the configuration). Zero
// values take the defaults below.
type Options struct {
	// Level is debug, info, warn or error, in any case.
	Level string
	// Format is json, text, or auto: text when the output is a terminal
	// and JSON otherwise.
	Format string
}

// The defaults of Options.
const (
	DefaultLevel  = "info"
	DefaultFormat = "auto"
)

// levels are the names Options.Level takes, in lower case.
var levels = map[string]slog.Level{
	"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError,
}

// ValidLevel reports whether s names a level New knows (any case); New
// takes an unknown one as DefaultLevel, so the configuration refuses it.
func ValidLevel(s string) bool {
	_, ok := levels[strings.ToLower(s)]
	return ok
}

// ValidFormat reports whether s is a format New knows.
func ValidFormat(s string) bool {
	return s == "auto" || s == "json" || s == "text"
}

// New returns a logger writing to w as o says. "auto" picks text when w
// is a terminal and JSON otherwise. Lines logged with a request's context
// carry its request id, what the layers added to its Scope, and the trace
// and span ids (see ContextHandler).
func New(o Options, w io.Writer) *slog.Logger {
	level, ok := levels[strings.ToLower(o.Level)]
	if !ok {
		level = levels[DefaultLevel]
	}
	opts := &slog.HandlerOptions{Level: level}
	format := o.Format
	if format == "" {
		format = DefaultFormat
	}
	if format == "auto" {
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
