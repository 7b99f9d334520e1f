// Package export writes the accountant's files: every payment or refund
// created in a date range, with the console list's filters, as CSV.
//
//	GET /export/payments.csv?from=2026-05-01&to=2026-05-31&tz=Europe/Berlin&status=success
//	GET /export/refunds.csv?from=2026-05-01&to=2026-05-31
//
// Who: an admin, by session cookie or by an admin API key (x-api-key) of
// scope read or wider — the credential layers and the checks of Connect
// procedures (auth.CheckRoute). No credential is 401, a customer or a key
// without the scope 403.
//
// The file is streamed: rows are read one at a time from the database
// (store.EachExportPayment) and written as they come, so an export of a
// million rows costs the server a row of memory and some buffers, not the
// file. Parameters are checked first; a bad one is 400 with a message that
// names it and nothing is streamed. A failure half way (the database goes
// away) cannot change the status any more: the response is cut off without
// its final chunk, which every HTTP client reports as an error, so a
// truncated file is never mistaken for a complete one.
//
// The format (RFC 4180): one header row, then one row per record, oldest
// first; CRLF line ends; UTF-8 without a byte order mark. Amounts are exact
// decimals with two fractional digits ("12.30"), never floats; currency is
// its own column. Times are RFC 3339 to the second in the chosen IANA time
// zone (tz, default UTC), e.g. 2026-05-01T09:30:00+02:00; an empty cell is
// a time not set.
//
// Formula injection: a spreadsheet runs a cell that starts with =, +, -, @
// (or tab or carriage return, which some strip first) as a formula. Any
// cell that starts with one of them is written with a single quote in
// front ('=HYPERLINK(…)), which spreadsheets show as text; the quote is the
// only change. Only free text (a failure reason, a gateway's reference, a
// refund's reason) can start so: amounts are never negative here, and ids
// and times never start with those characters.
package export
