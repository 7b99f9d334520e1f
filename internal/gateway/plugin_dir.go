package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/rustbill/paymentd/internal/plugin"
)

// ErrPluginDir is wrapped by a scan that could not read the plugin
// directory itself. Such a scan changes nothing: a directory that is not
// mounted must not mark every plugin missing.
var ErrPluginDir = errors.New("plugin directory cannot be read")

// pluginFile is one <folder>/<name>.lua of the plugin directory.
type pluginFile struct {
	name   string
	folder string
	rel    string // folder/name.lua, with forward slashes
	source []byte
	sha256 string
	// problem is why the file cannot be loaded before it is even compiled
	// (unreadable, too large, a name used by two folders).
	problem string
}

// readPluginDir reads every <folder>/<name>.lua below dir whose folder is a
// plugin type. Other files and folders are ignored; so are deeper levels.
func readPluginDir(dir string) (map[string]*pluginFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrPluginDir, dir, err)
	}
	files := map[string]*pluginFile{}
	for _, folder := range entries {
		if _, ok := FolderType(folder.Name()); !ok {
			continue
		}
		sub := filepath.Join(dir, folder.Name())
		if st, err := os.Stat(sub); err != nil || !st.IsDir() {
			continue
		}
		scripts, err := os.ReadDir(sub)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrPluginDir, sub, err)
		}
		for _, e := range scripts {
			name, ok := strings.CutSuffix(e.Name(), ".lua")
			if !ok || strings.HasPrefix(e.Name(), ".") {
				continue
			}
			full := filepath.Join(sub, e.Name())
			st, err := os.Stat(full) // follows a symlink to the script
			if err != nil || !st.Mode().IsRegular() {
				continue
			}
			f := &pluginFile{name: name, folder: folder.Name(), rel: path.Join(folder.Name(), e.Name())}
			f.source, f.problem = readSource(full)
			sum := sha256.Sum256(f.source)
			f.sha256 = hex.EncodeToString(sum[:])
			if prev, dup := files[name]; dup {
				// ReadDir sorts, and folders are visited in order: prev
				// keeps the first folder's file, both are refused.
				prev.problem = fmt.Sprintf("plugin name %q is used by both %s and %s; names must be unique across folders", name, prev.rel, f.rel)
				continue
			}
			files[name] = f
		}
	}
	return files, nil
}

func readSource(path string) ([]byte, string) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "cannot read the file: " + withoutPath(err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, plugin.MaxSourceBytes+1))
	if err != nil {
		return nil, "cannot read the file: " + withoutPath(err)
	}
	if len(b) > plugin.MaxSourceBytes {
		return nil, fmt.Sprintf("the file is larger than %d bytes", plugin.MaxSourceBytes)
	}
	// The plugins table keeps the source as text.
	if !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0 {
		return b, "the file must be UTF-8 text without NUL bytes"
	}
	return b, ""
}

// withoutPath drops the absolute path an *fs.PathError carries: the
// message is shown to admins, who know the file by its relative path.
func withoutPath(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// sortedNames is the union of the keys of a and b, sorted.
func sortedNames[A, B any](a map[string]A, b map[string]B) []string {
	out := make([]string, 0, len(a)+len(b))
	for k := range a {
		out = append(out, k)
	}
	for k := range b {
		out = append(out, k)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
