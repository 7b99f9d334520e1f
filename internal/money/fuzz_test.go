package money

import (
	"errors"
	"regexp"
	"testing"

	"github.com/cockroachdb/apd/v3"
)

var formatted = regexp.MustCompile(`^-?\d+\.\d{2}$`)

// FuzzParse checks that whatever Parse accepts formats as ^-?\d+\.\d{2}$, parses
// back to the same amount, agrees with apd's reading of the input, and that
// whatever it rejects is rejected with one of the documented sentinels.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"0", "-0", "-0.00", "0.01", "-0.01", "1", "1.5", "12.30", "100",
		"9999999999.99", "-9999999999.99", "10000000000.00", "9999999999.999",
		"", "-", " 1", "1 ", "+1", ".5", "1.", "1e3", "NaN", "Inf", "1,00",
		"1.234", "0x10", "01.50", "\u0661", "1.2.3", "--1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrTooManyDecimals) && !errors.Is(err, ErrOutOfRange) {
				t.Fatalf("Parse(%q): unexpected error kind: %v", s, err)
			}
			if a != (Amount{}) {
				t.Fatalf("Parse(%q) failed but returned %v", s, a)
			}
			return
		}

		out := a.String()
		if !formatted.MatchString(out) {
			t.Fatalf("Parse(%q).String() = %q, not ^-?\\d+\\.\\d{2}$", s, out)
		}
		if out == "-0.00" {
			t.Fatalf("Parse(%q).String() = -0.00", s)
		}
		b, err := Parse(out)
		if err != nil {
			t.Fatalf("Parse(%q) = %q, which does not parse again: %v", s, out, err)
		}
		if b != a || b.String() != out {
			t.Fatalf("Parse(%q) = %q, Parse(%q) = %q", s, out, out, b)
		}

		// Cross-check with an independent decimal reader.
		d, _, err := apd.NewFromString(s)
		if err != nil {
			t.Fatalf("Parse accepted %q, apd did not: %v", s, err)
		}
		want := a.Decimal()
		if d.Cmp(&want) != 0 {
			t.Fatalf("Parse(%q) = %s, apd reads %s", s, out, d)
		}
	})
}

// FuzzStringParsesBack checks the other direction: every in-range number of
// cents formats to text that Parse turns back into the same amount, and Add and
// Sub agree with integer arithmetic wherever the result is in range.
func FuzzStringParsesBack(f *testing.F) {
	f.Add(int64(0), int64(1))
	f.Add(int64(-1), int64(1))
	f.Add(int64(999_999_999_999), int64(1))
	f.Add(int64(-999_999_999_999), int64(-999_999_999_999))
	f.Add(int64(1230), int64(-500))
	f.Fuzz(func(t *testing.T, x, y int64) {
		a, errA := FromCents(x)
		b, errB := FromCents(y)
		if errA != nil || errB != nil {
			return
		}
		out := a.String()
		if !formatted.MatchString(out) {
			t.Fatalf("FromCents(%d).String() = %q", x, out)
		}
		back, err := Parse(out)
		if err != nil || back != a {
			t.Fatalf("Parse(%q) = %v, %v; want %v", out, back, err, a)
		}

		sum, err := a.Add(b)
		if want := x + y; want > maxCents || want < -maxCents {
			if !errors.Is(err, ErrOutOfRange) {
				t.Fatalf("%d + %d: want ErrOutOfRange, got %v, %v", x, y, sum, err)
			}
		} else if err != nil || sum.Cents() != want {
			t.Fatalf("%d + %d = %v, %v", x, y, sum, err)
		}
		diff, err := a.Sub(b)
		if want := x - y; want > maxCents || want < -maxCents {
			if !errors.Is(err, ErrOutOfRange) {
				t.Fatalf("%d - %d: want ErrOutOfRange, got %v, %v", x, y, diff, err)
			}
		} else if err != nil || diff.Cents() != want {
			t.Fatalf("%d - %d = %v, %v", x, y, diff, err)
		}
	})
}
