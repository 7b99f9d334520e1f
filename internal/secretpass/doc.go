// Package secretpass runs the passes over every stored config that holds
// plugin secrets (internal/secrets): a gateway interface's config, a
// product's provider settings (products.provider_config) and the copy of
// them an order froze (orders.item's provider_config), each bound to its
// own row. The passes are the one every instance runs at start (values
// still in clear are encrypted: a database from before encryption, a value
// written directly, a property an upgraded schema made secret), `paymentd
// secrets rotate` (everything re-encrypted under the current key), and the
// check that a service without keys has nothing to decrypt.
//
//	for each table, for each row (pages by id):
//	    decide on the row as read ──▶ nothing to write: counted
//	    │ something to write
//	    └─▶ one short transaction: lock the row, decide again, write,
//	        one audit row (<kind>.seal_secrets | <kind>.rotate_secrets)
//
// A row is rewritten in a transaction of its own, under its row lock (FOR
// NO KEY UPDATE: payments and orders referring to it are not held up), and
// decided again there: instances starting together take turns on each
// row, and the later ones find nothing left to do. Holding one row at a
// time cannot deadlock with a plugin upgrade updating several. A pass cut
// short leaves every row either done or as it was, and the next pass
// finishes the rest. Each audit row names the row's secrets and the key
// each is under, before and after — never a value.
//
// Sealed values are opened to check them (a value that does not open is
// reported, never rewritten), except the orders' copies at start: they may
// be many, and nothing but these passes reads them, so the start seals
// their clear values and counts the rest by key id; rotation opens them.
package secretpass
