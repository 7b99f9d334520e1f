// Package rpc is the transport edge shared by every Connect handler: the one
// place where domain and store errors become Connect codes
// (NewErrorInterceptor), plus the conversions every handler repeats — ids
// and times on the wire (ParseID, OptionalID, Time, TimePtr), the one range
// of times a request may send (ParseTime, CheckDate, CheckAhead), the
// PaymentRecord built from a payments row, and a list's page
// (internal/paging) as PageMeta. It holds no business rule.
package rpc
