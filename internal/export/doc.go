// Package export writes the accountant's files: every payment or refund
// or invoice (with its lines, one row each, on lines=1) created in a date
// range, with the console list's filters, as CSV.
//
//	GET /export/payments.csv?from=2026-05-01&to=2026-05-31&tz=Europe/Berlin&status=success
//	GET /export/refunds.csv?from=2026-05-01&to=2026-05-31
//	GET /export/invoices.csv?from=2026-05-01&to=2026-05-31&lines=1
//
// Who: an admin, by session cookie or by an admin API key (x-api-key) of
// scope read or wider — the credential layers and the checks of Connect
// procedures (auth.CheckRoute). No credential is 401, a customer or a key
// without the scope 403.
//
// The file is streamed, read from the database in keyset pages
// (store.EachExportPayment): 1000 rows in (created_at, id) order after the
// last row of the page before, each page one short statement on a pooled
// connection that goes back to the pool before a row is written to the
// client. A client's pace therefore never holds a connection: a slow or
// stalled reader costs the pool nothing between pages, and the money path
// (payments, callbacks, the leader leases, /ready) keeps its connections.
// Memory holds one page and some buffers, not the file. Paging was chosen
// over a separate small pool for exports: a pool would still be held for
// as long as the slowest client reads and would need sizing of its own,
// while a page costs a connection for milliseconds whatever the client
// does. The price: each page is its own snapshot, so an export whose range
// reaches the present may include a row created while it runs, and a row
// is written as it was when its page was read (the same data gives the
// same bytes as before).
//
//	GET ─▶ credential ─▶ parameters (400) ─▶ slot? ──no──▶ 429, Retry-After
//	                                            │ yes
//	                                            ▼
//	              ┌──▶ read a page (connection held) ──▶ write its rows ──┐
//	              │      each chunk under [export].write_timeout          │
//	              └──────────────── full page ◀───────────────────────────┘
//	                   short page ─▶ audit row ─▶ last bytes ─▶ release slot
//
// Slots: at most [export].max_concurrent (default 2) exports stream at once
// on an instance; one more is answered 429 with Retry-After and a
// plain-text message at once, holding nothing. An export runs behind the
// concurrency limit ([server].max_concurrency) like every request, so it
// holds one of its slots while it streams: the cap is what keeps twenty
// slow readers from taking twenty of them (at most max_concurrent do; keep
// it well below max_concurrency).
//
// A client that does not take a chunk of the file (about 4 KiB) within
// [export].write_timeout (default 30 s) is cut off: every write to the
// connection gets that deadline (http.ResponseController), and the one
// that misses it fails the export. Parameters are checked first; a bad one
// is 400 with a message that names it and nothing is streamed. A failure
// half way (the client too slow or gone, the database away) cannot change
// the status any more: the response is cut off without its final chunk,
// which every HTTP client reports as an error, so a truncated file is
// never mistaken for a complete one.
//
// Every export leaves an audit row (internal/audit): action export.payments,
// export.refunds or export.invoices, entity ("export", "payments", "refunds"
// or "invoices"), actor the admin or the admin API key, and after = the parameters as given, the rows
// read and the outcome. A complete export's row is written before the
// file's last bytes (no row, no complete file); a cut-off one's after the
// cut. The "export streamed" log line names the principal, the kind of
// credential and the API key's id, as RPC lines do.
//
// The format (RFC 4180): one header row, then one row per record, oldest
// first; CRLF line ends; UTF-8 without a byte order mark. Amounts are exact
// decimals with two fractional digits ("12.30"), never floats; currency is
// its own column. Times are RFC 3339 to the second in the chosen IANA time
// zone (tz, default UTC), e.g. 2026-05-01T09:30:00+02:00; an empty cell is
// a time not set.
//
// Formula injection: a spreadsheet runs a cell that starts with =, +, -, @
// (or tab or carriage return, which some strip first) as a formula; some
// also drop leading spaces and invisible characters first, and read the
// fullwidth ＝＋－＠ an input method types as the ASCII ones. Any cell that
// starts with a tab or carriage return, or whose first visible character
// (past white space of every kind, controls, zero-width and format
// characters such as U+200B and the byte order mark, and other
// default-ignorable characters) is one of =+-@＝＋－＠ or their small forms,
// is written with a single quote in front (' =HYPERLINK(…)), which
// spreadsheets show as text; the quote is the only change. Only free text
// (a failure reason, a gateway's reference, a refund's reason) can start
// so: amounts are never negative here, and ids and times never start with
// those characters.
package export
