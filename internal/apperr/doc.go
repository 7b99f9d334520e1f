// Package apperr is the domain's error vocabulary. Domain code returns an
// *Error with a Kind and a message meant for the caller; the transport edge
// (internal/rpc) turns the Kind into a Connect code. The domain never imports
// transport types, and a message given here is the only text a client sees.
package apperr
