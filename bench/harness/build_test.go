package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The release build keeps the linker's dead-code elimination of methods:
// no package of it that can reach a template's Execute at run time
// (golang.org/x/net/trace registers its pages in an init; our own
// packages would call it), so the binary holds only the methods something
// calls (docs/performance.md, "Idle RSS"). A cheap guard, by imports:
// go-mail, goose and cel-go import text/template without executing one on
// paymentd's paths.
func TestReleaseBuildLeavesOutTemplateExecution(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(root, "deploy", "build.sh"))
	if err != nil {
		t.Fatal(err)
	}
	tags := releaseTags
	if !strings.Contains(string(script), " -tags "+tags+" ") || !strings.Contains(string(script), "CGO_ENABLED=0") {
		t.Fatalf("deploy/build.sh no longer builds with CGO_ENABLED=0 and -tags %s", tags)
	}
	cmd := exec.Command("go", "list", "-deps", "-tags", tags,
		"-f", `{{.ImportPath}} {{join .Imports " "}}`, "./cmd/paymentd")
	cmd.Dir = root
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if f[0] == "golang.org/x/net/trace" {
			t.Errorf("the release build links golang.org/x/net/trace (the %s tag no longer leaves it out)", tags)
		}
		if !strings.HasPrefix(f[0], "github.com/rustbill/paymentd/") {
			continue
		}
		for _, imp := range f[1:] {
			if imp == "text/template" || imp == "html/template" {
				t.Errorf("%s imports %s: an Execute reachable from main keeps every exported method in the binary", f[0], imp)
			}
		}
	}
}
