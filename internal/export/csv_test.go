package export

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCellQuotesWhatASpreadsheetWouldRun(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"=1+1":       "'=1+1",
		"+1":         "'+1",
		"-1":         "'-1",
		"@SUM(A1)":   "'@SUM(A1)",
		"\t=1":       "'\t=1",
		"\r=1":       "'\r=1",
		"":           "",
		"12.30":      "12.30",
		"a=1":        "a=1",
		"'quoted":    "'quoted",
		"2026-05-01": "2026-05-01",
	} {
		require.Equal(t, want, Cell(in), "%q", in)
	}
}
