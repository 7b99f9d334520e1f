package app

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// outsideDocuments are names of documents that live outside the repository.
// The project stands on its own: docs/api.md is its contract and
// docs/decisions.md its decisions, so no file may cite these. They are built
// from parts so that this file does not name them itself.
var outsideDocuments = []string{
	"DESIGN" + ".md",
	"STYLE" + ".md",
	"shared" + "/spec",
	"payment-service" + "-spec",
}

// skippedDirs are never the project's own text: dependencies, builds and
// local state.
var skippedDirs = map[string]bool{
	".git": true, "node_modules": true, ".data": true, "dist": true, "third_party": true,
}

// No tracked file of the repository cites a document that is not in it.
func TestNoFileOfTheProjectCitesADocumentOutsideIt(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	files := projectFiles(t, root)
	require.NotEmpty(t, files)

	var found []string
	for _, rel := range files {
		raw, err := os.ReadFile(filepath.Join(root, rel))
		if os.IsNotExist(err) {
			continue // deleted in the work tree, not yet in the index
		}
		require.NoError(t, err)
		if bytes.IndexByte(raw, 0) >= 0 {
			continue // binary
		}
		for i, line := range strings.Split(string(raw), "\n") {
			for _, needle := range outsideDocuments {
				if strings.Contains(strings.ToLower(line), strings.ToLower(needle)) {
					found = append(found, rel+":"+strconv.Itoa(i+1)+": "+needle)
				}
			}
		}
	}
	require.Empty(t, found, "files cite documents outside the repository; cite docs/api.md (the API contract) or docs/decisions.md instead")
}

// projectFiles lists the repository's tracked files (git ls-files), or, when
// git cannot say (an exported tree), every file under root but skippedDirs.
func projectFiles(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	if out, err := cmd.Output(); err == nil {
		var files []string
		for _, f := range strings.Split(string(out), "\x00") {
			if f != "" && !underSkipped(f) {
				files = append(files, f)
			}
		}
		return files
	}
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && skippedDirs[d.Name()] {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	require.NoError(t, err)
	return files
}

func underSkipped(rel string) bool {
	for _, part := range strings.Split(rel, "/") {
		if skippedDirs[part] {
			return true
		}
	}
	return false
}
