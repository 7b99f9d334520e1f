package money

import "testing"

func BenchmarkParseString(b *testing.B) {
	for b.Loop() {
		a, err := Parse("-1234567.89")
		if err != nil {
			b.Fatal(err)
		}
		if a.String() != "-1234567.89" {
			b.Fatal(a.String())
		}
	}
}

func BenchmarkAdd(b *testing.B) {
	x, y := MustParse("1234567.89"), MustParse("-0.01")
	for b.Loop() {
		var err error
		if x, err = x.Add(y); err != nil {
			b.Fatal(err)
		}
		if x.Sign() < 0 {
			x = MustParse("1234567.89")
		}
	}
}
