package export

import (
	"encoding/csv"
	"io"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Cell is s made safe against formula injection: a single quote in front of
// a cell a spreadsheet would run as a formula (see the package comment).
func Cell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// rowWriter writes CSV records of cells, every cell through Cell.
type rowWriter struct {
	w   *csv.Writer
	loc *time.Location
	buf []string
	// records is the number written, the header row included.
	records int64
}

func newRowWriter(w io.Writer, loc *time.Location) *rowWriter {
	cw := csv.NewWriter(w)
	cw.UseCRLF = true
	return &rowWriter{w: cw, loc: loc}
}

// write writes one record; the slice is reused for the next.
func (r *rowWriter) write(cells ...string) error {
	r.buf = r.buf[:0]
	for _, c := range cells {
		r.buf = append(r.buf, Cell(c))
	}
	r.records++
	return r.w.Write(r.buf)
}

func (r *rowWriter) flush() error {
	r.w.Flush()
	return r.w.Error()
}

// time is t in the export's zone, RFC 3339 to the second.
func (r *rowWriter) time(t time.Time) string {
	return t.In(r.loc).Format(time.RFC3339)
}

// optTime is time for a time that may be unset: empty when nil.
func (r *rowWriter) optTime(t *time.Time) string {
	if t == nil {
		return ""
	}
	return r.time(*t)
}

// optID is an optional id: empty when nil.
func optID(id *uuid.UUID) string {
	if id == nil {
		return ""
	}
	return id.String()
}
