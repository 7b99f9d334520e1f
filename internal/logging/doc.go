// Package logging builds the service's slog logger: JSON lines for machines,
// text on a terminal, one event per line, each line of a request carrying
// the request's id, procedure, principal and the payment or order it is
// about, and the trace id when tracing is on.
package logging
