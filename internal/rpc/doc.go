// Package rpc is the transport edge shared by every Connect handler: the one
// place where domain and store errors become Connect codes
// (NewErrorInterceptor), plus the conversions every handler repeats — ids
// and times on the wire (ParseID, OptionalID, Time, TimePtr, and ParseTime,
// which reads a request's time and checks it against internal/timerange),
// the PaymentRecord built from a payments row, and a list's page
// (internal/paging) as PageMeta. It holds no business rule. It is
// transport, not a leaf: it imports connect, the generated messages and
// the store's errors, so the domain never imports it (internal/architecture
// holds that).
package rpc
