package architecture_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every ErrorInfo reason and every violation rule id the code answers with
// is in docs/api.md's table of error details, so a client's author finds
// each one there ("Error details").
func TestEveryErrorDetailTheCodeSendsIsInTheAPIDoc(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(doc), "### Error details")
	if start < 0 {
		t.Fatal(`docs/api.md has no "### Error details" section`)
	}
	table := string(doc[start:])
	if end := strings.Index(table[len("###"):], "\n### "); end >= 0 {
		table = table[:end+len("###")]
	}
	// Reason constants (ReasonTOTPLocked = "totp_locked") and rule ids
	// (RuleTimeRange = "paymentd.time_range"), wherever they are declared.
	decl := regexp.MustCompile(`(?m)^\s*(?:const\s+)?(?:Reason|Rule)[A-Za-z0-9]*\s*=\s*"([a-z0-9_.]+)"`)
	found := map[string]string{}
	err = filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "gen" || strings.HasPrefix(d.Name(), ".")) && path != "../.." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(src), -1) {
			found[m[1]] = path
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) < 7 {
		t.Fatalf("found only %d reasons and rule ids (%v): the pattern no longer matches how they are declared", len(found), found)
	}
	for value, path := range found {
		if !strings.Contains(table, "`"+value+"`") {
			t.Errorf("%s answers the error detail %q, which docs/api.md's \"Error details\" table does not list", path, value)
		}
	}
}
