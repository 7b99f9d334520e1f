// Package eventrpc is the transport of the event queue's admin view: the
// Connect handler of billing.event.EventAdminService (decode, call
// event.Admin, encode) and its permission table Policy. The rules live in
// internal/event.
package eventrpc
