package plugin

import "context"

// Caller runs one contract function of a loaded plugin: fn(configJSON,
// inputJSON) → a JSON string. *Plugin satisfies it; the domain packages
// that call plugins (fulfilment, notifications) depend on this interface,
// not on the runtime, so tests can stand in for a script.
type Caller interface {
	Call(ctx context.Context, fn, configJSON, inputJSON string) (string, error)
}

var _ Caller = (*Plugin)(nil)

// Plugins hands out loaded plugins by name (the plugin registry implements
// it). configJSON is the plugin's own configuration, secrets included, and
// goes to the plugin and nowhere else; "" when the registry keeps none. ok
// is false when no usable plugin of that name is loaded (unknown, disabled
// or failed to compile).
type Plugins interface {
	Get(name string) (c Caller, configJSON string, ok bool)
}

// PluginsFunc adapts a function to Plugins.
type PluginsFunc func(name string) (Caller, string, bool)

// Get calls f.
func (f PluginsFunc) Get(name string) (Caller, string, bool) { return f(name) }
