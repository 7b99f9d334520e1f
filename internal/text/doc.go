// Package text holds the one way the service bounds a text that came from
// outside (a plugin, a gateway, a client, an error) before it goes into an
// error message, a log line or a text column.
package text
