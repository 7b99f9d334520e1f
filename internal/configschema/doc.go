// Package configschema compiles a plugin's config_schema() (JSON Schema) and
// applies it to configs: validation problems that name the key, and the
// write-only secrets ("x-secret": true) masked on every read and kept when
// the mask is sent back — unless the same update changes an endpoint
// ("x-endpoint": true, a URL the plugin sends the secrets to): then the
// secrets must be sent again, or an admin could redirect them to a listener
// of their own without ever knowing them. Gateway interfaces and providers'
// product configs both use it.
package configschema
