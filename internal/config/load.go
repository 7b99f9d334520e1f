package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/parsers/toml/v2"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/providers/structs"
	"github.com/knadh/koanf/v2"
)

// Load reads defaults, then path (when not empty; a missing explicit file is
// an error), then the environment given as KEY=VALUE strings (os.Environ()).
// It does not validate: call Validate.
func Load(path string, environ []string) (Config, error) {
	var paths []string
	if path != "" {
		paths = append(paths, path)
	}
	return LoadFiles(paths, environ)
}

// LoadFiles is Load with several files, each overriding the ones before it.
// A relative [plugins].dir is made absolute as docs/operations.md says
// (PluginDirBase): against the directory of the file that set it, against
// the working directory when PAYMENTD_PLUGINS__DIR set it, and the default
// against the last file's directory, else the binary's.
func LoadFiles(paths []string, environ []string) (Config, error) {
	return LoadFilesFrom(paths, environ, "")
}

// LoadFilesFrom is LoadFiles with defaultBase, when not empty, as the
// directory the default [plugins].dir is resolved against: paymentd dev
// passes the working directory (the checkout it runs in).
func LoadFilesFrom(paths []string, environ []string, defaultBase string) (Config, error) {
	k := koanf.New(".")
	if err := k.Load(structs.Provider(Default(), "koanf"), nil); err != nil {
		return Config{}, fmt.Errorf("config defaults: %w", err)
	}
	// pluginBase is the directory a relative [plugins].dir is read
	// against: the default's first, then each source that sets it.
	pluginBase, setByFile := defaultBase, false
	for _, path := range paths {
		fk := koanf.New(".")
		if err := fk.Load(file.Provider(path), toml.Parser()); err != nil {
			return Config{}, fmt.Errorf("config file %s: %w", path, err)
		}
		if fk.Exists("plugins.dir") || (!setByFile && defaultBase == "") {
			pluginBase = fileDir(path)
			setByFile = setByFile || fk.Exists("plugins.dir")
		}
		if err := k.Merge(fk); err != nil {
			return Config{}, fmt.Errorf("config file %s: %w", path, err)
		}
	}
	if pluginBase == "" {
		pluginBase = binaryDir()
	}
	for _, kv := range environ {
		if name, _, _ := strings.Cut(kv, "="); IsConfigEnv(name) {
			if key, _ := envKey(name, ""); key == "plugins.dir" {
				pluginBase = "." // a shell's relative path: the working directory
			}
		}
	}
	envProvider := env.Provider(".", env.Opt{
		Prefix:        EnvPrefix,
		TransformFunc: envKey,
		EnvironFunc:   func() []string { return environ },
	})
	if err := k.Load(envProvider, nil); err != nil {
		return Config{}, fmt.Errorf("config environment: %w", err)
	}
	var c Config
	dc := &mapstructure.DecoderConfig{
		TagName:          "koanf",
		Result:           &c,
		WeaklyTypedInput: true,
		ErrorUnused:      true,
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			mapstructure.StringToTimeDurationHookFunc(),
			mapstructure.StringToSliceHookFunc(","),
		),
	}
	if err := k.UnmarshalWithConf("", &c, koanf.UnmarshalConf{DecoderConfig: dc}); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	if c.Plugins.Dir != "" && !filepath.IsAbs(c.Plugins.Dir) {
		c.Plugins.Dir = filepath.Join(pluginBase, c.Plugins.Dir)
	}
	if abs, err := filepath.Abs(c.Plugins.Dir); err == nil && c.Plugins.Dir != "" {
		c.Plugins.Dir = abs
	}
	return c, nil
}

// fileDir is the absolute directory of the file at path.
func fileDir(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return filepath.Dir(abs)
	}
	return filepath.Dir(path)
}

// binaryDir is the directory of the running binary (symbolic links
// followed), the working directory when it cannot be known.
func binaryDir() string {
	exe, err := os.Executable()
	if err != nil {
		return "."
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	return filepath.Dir(exe)
}

// envKey maps PAYMENTD_DB__URL to "db.url": a double underscore separates the
// section from the key, since keys themselves contain single underscores.
// A PAYMENTD_ variable without a double underscore (PAYMENTD_TEST_DATABASE_URL,
// PAYMENTD_BENCH_DATABASE_URL: the tests' and tools' own settings) is not
// configuration and is left out; a misspelt key within a section is still
// refused as unknown.
func envKey(k, v string) (string, any) {
	if !IsConfigEnv(k) {
		return "", nil
	}
	k = strings.ToLower(strings.TrimPrefix(k, EnvPrefix))
	return strings.ReplaceAll(k, "__", "."), v
}

// IsConfigEnv reports whether an environment variable's name is a
// configuration key: PAYMENTD_<SECTION>__<KEY>.
func IsConfigEnv(name string) bool {
	rest, ok := strings.CutPrefix(name, EnvPrefix)
	return ok && strings.Contains(rest, "__")
}

// ResolvePath picks the file to load: the flag when given, else DefaultFile
// when it exists, else none.
func ResolvePath(flag string) string {
	if flag != "" {
		return flag
	}
	if _, err := os.Stat(DefaultFile); err == nil {
		return DefaultFile
	}
	return ""
}
