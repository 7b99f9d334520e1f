// Package configschema compiles a plugin's config_schema() (JSON Schema) and
// applies it to configs: validation problems that name the key, and the
// write-only secrets ("x-secret": true) masked on every read and kept when
// the mask is sent back. Gateway interfaces and providers' product configs
// both use it.
package configschema
