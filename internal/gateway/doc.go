// Package gateway is the plugin registry and the gateway-interface domain:
// the scanner that keeps the plugins table and the loaded Lua plugins in
// line with [plugins].dir, the lookup the payment domain calls
// (payment.Gateways), the admin operations on plugins and gateway
// interfaces (billing.gateway.GatewayAdminService) and the customers' list
// of payment methods (billing.gateway.PaymentMethodService).
//
// # Scanning
//
// The directory holds <folder>/<name>.lua: the folder is the type
// (gateway/, notifier/, provider/ — a provider whose info().type says
// upstream_provider is one), the file name is the plugin's name. Registry
// scans it at Start, every [plugins].scan_interval, and when an admin asks
// (ReloadPlugins). Each file is compiled once (plugin.Compile, the contract
// checked), loaded into a pool of states (plugin.Runtime) and dry-run:
// info() and config_schema() must answer JSON objects and the schema must
// compile. Memory keeps the loaded plugins in one map that a scan replaces
// with a single atomic swap; a file whose bytes memory already runs is not
// compiled again.
//
// Each plugin is decided in its own transaction holding its row lock, so a
// broken or vanished file, or a database error about one plugin, touches
// that plugin alone. The plugin status is the scanner's view of the file
// ("fails": does not compile, breaks its type's contract, answers info or
// config_schema badly, or would change the plugin's kind):
//
//	from              event                   to        change reported
//	(no row)          file loads              loaded    added
//	(no row)          file fails              error     error (version "")
//	loaded            other bytes that load   loaded    upgraded | source_updated
//	loaded, missing   file fails              error     error
//	error, missing    file loads              loaded    upgraded | source_updated | recovered
//	loaded, error     file deleted            missing   missing
//
//	               ┌────────── file fails ──────────┐
//	  (new) ──▶ loaded                                 error ◀── (new)
//	               └◀───────── file loads ───────────┘
//	      file deleted │  ▲ file back               ▲ │ file deleted
//	                   ▼  │ and loads    file back  │ ▼
//	                   missing ───────── and fails ─┘
//
// Only loaded plugins are in memory; error and missing ones are disabled:
// Get hands out no plugin for them, and customers do not see their
// interfaces. last_error says why; for a loaded plugin it holds the last
// failed call (written at most every 10 s). A plugin first seen broken is
// stored with an empty version: it has no definition yet, and the first file
// of it that loads defines it whatever version it declares.
//
// # The version rule (docs/api.md, "Service and versioning")
//
// For a file that loads, compared with the stored version (semver
// precedence, plugin.CompareVersions):
//
//	greater         the definition is replaced: type, version, info,
//	                config_schema, source, sha256, path; and the new
//	                config_schema is pushed to every gateway interface of the
//	                plugin, in the same transaction. Interfaces whose config
//	                no longer satisfies it are reported as warnings (the
//	                reload's answer and the log); Enable refuses them until
//	                an admin updates the config.
//	equal or lower  only source, sha256 (and path, status loaded, last error
//	                cleared) are stored. version, info, config_schema and
//	                every interface's config_schema stay.
//
// In both cases memory runs the file's code. After an equal-or-lower scan
// the stored source is the file's, so memory, the stored source and the
// disk agree, and a restart would load the same bytes anyway; running the
// previous code instead would make an instance run code that exists nowhere
// but in its memory. What the rule protects is the definition: interface
// configs stay validated against the schema of the greatest version seen.
// GetPlugin shows both: version (the definition) and loaded_version (the
// code running on the answering instance).
//
// A plugin's kind never changes (gateway, notifier, provider): its
// interfaces or products would lose their plugin. A provider may become an
// upstream provider (or back) with a greater version only.
//
// With several instances, each scans its own directory; the row lock makes
// them decide one after the other. Instances whose directories differ (a
// rolling deploy) may move the stored source back and forth, but never the
// definition backwards.
//
// # A plugin an admin disabled
//
// plugins.enabled is an admin's choice (EnablePlugin, DisablePlugin), kept
// apart from the status, which is the scanner's view of the file: no
// scanner query writes enabled, so the choice survives rescans, upgrades,
// a broken or vanished file and restarts, and a plugin that recovers from
// an error stays disabled if an admin disabled it. Only gateway plugins
// can be disabled (a provider's products are disabled one by one, a
// notifier in [notify]); enabling works for any plugin.
//
// A disabled gateway plugin stays loaded. Its interfaces keep their own
// enabled flags, but customers no longer see them (ListPaymentMethods) and
// CreatePayment through them is refused like a disabled interface
// (Registry.Get hands them out with PluginDisabled); no interface of it can
// be created or enabled. Callbacks, status queries, the reconciler,
// bank-transfer confirmations and refunds of the payments already made
// through them keep working: that money has moved at the gateway and must
// still be settled or returned. Enabling the plugin again offers its
// enabled interfaces again. Both changes are audit-logged (plugin.enable,
// plugin.disable, entity plugin/<name>).
//
// # Gateway interfaces and secrets
//
// An interface's config is validated against its config_schema (JSON
// Schema, draft 2020-12 by default, no external references: nothing is
// ever loaded from a file or the network), with every problem named by its
// key ("config.pid: is required"). Properties marked "x-secret": true are
// write-only: every read shows "********" for a non-empty value, audit rows
// hold the masked form, and an update that omits the key or sends the mask
// keeps the stored value — unless the same update changes an endpoint
// (a property marked "x-endpoint": true, a URL the plugin sends the secrets
// to, such as epay's api_url): then it is refused (InvalidArgument naming
// the endpoint and the secrets to send again), since whoever may edit the
// config could otherwise have the stored secrets delivered to a listener of
// their own. An update's audit row names the endpoints it changed and the
// secrets it replaced. The unmasked config goes only to the plugin
// (Registry.Get); admin_page gets the masked one, as a read shows it. New
// interfaces start disabled; enabling one needs a loaded gateway plugin and
// a config that satisfies its schema.
//
// TestInterface sends the config wherever its endpoints say, so its answer
// never quotes what came back (plugin.Upstream cuts a message where it
// starts quoting an answer; the plugin's last_error is cut the same way),
// and each test is audit-logged (gateway_interface.test) with its outcome
// and the hosts the config went to.
//
// Secrets are stored encrypted (secret_config.go, over the config helpers
// of internal/secrets): each non-empty secret
// is sealed with AES-256-GCM under the current key of [secrets]
// (internal/secrets) and stored in its place as the string
// "enc:v1:<key id>:<base64url nonce|ciphertext|tag>", bound (as associated
// data) to the interface id and the property's path, which is why an
// interface's id is chosen before its insert. The API takes clear values
// only: a value that looks sealed is refused. The opened config exists only
// on its way into a plugin call (Registry.Get) and, for validation, inside
// the admin operations; reads are masked as before. A
// sealed value that does not open (its key is not configured, it was moved
// from another interface, altered) makes its interface unusable —
// FailedPrecondition, logged once a minute, the plugin never called —
// until the key is configured or an admin sends the value again; everything
// else keeps working. Without a key no secret can be stored
// (FailedPrecondition naming [secrets]).
//
//	value in the database   with the key             key missing / value moved
//	(absent or "")          nothing to protect       —
//	clear (old database)    sealed at the next start refused to start (no key at all)
//	enc:v1:<current>:…      opened for the plugin    interface unusable
//	enc:v1:<older>:…        opened; rotate re-seals  interface unusable
//
// The passes over every stored secret — interfaces', products' provider
// settings and orders' copies of them — are internal/secretpass: at start
// (clear values sealed; without a key, a database holding secrets stops
// the start), after a plugin upgrade (what its new schema calls secret;
// the registry runs it), and `paymentd secrets rotate` (everything under
// the current key).
//
// # Currencies
//
// A gateway books the figure it is sent in its own currency (epay's
// protocol has none: everything is yuan), so a gateway plugin declares
// what it takes in info().currencies, checked at load (currencies.go):
//
//	["CNY"]  fixed codes    an interface takes them, or fewer if its config's
//	                        "currencies" names fewer (more is refused on save)
//	["*"]    the account    an interface takes exactly what its config's
//	                        "currencies" names; nothing when it names none
//	absent   nothing        loads (old payments settle and refund) but no
//	                        interface of it takes a new payment
//
// Registry.Get hands the result to the payment domain as
// payment.Gateway.Currencies, which CreatePayment, the settlement and
// refunds check; PaymentMethods lists and filters by the same function.
package gateway
