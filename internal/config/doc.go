// Package config loads paymentd's configuration: defaults in code, then a TOML
// file, then environment variables PAYMENTD_<SECTION>__<KEY> (for example
// PAYMENTD_DB__URL or PAYMENTD_SERVER__PORT). Validate reports every problem
// with the key that causes it, so an operator can fix the file in one pass.
package config
