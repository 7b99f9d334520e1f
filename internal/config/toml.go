package config

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// TOML renders c as a TOML document in the layout of koanf.example.toml:
// sections and keys in the order of the struct, durations as Go durations
// ("5m"), so that Load reads back exactly c. Call it on Masked() before
// printing: it renders secrets as they are.
func (c Config) TOML() []byte {
	var b bytes.Buffer
	writeTable(&b, "", reflect.ValueOf(c))
	return bytes.TrimLeft(b.Bytes(), "\n")
}

var durationType = reflect.TypeFor[time.Duration]()

// writeTable writes the plain keys of the struct v, then its sub-tables
// ([name.sub]) and arrays of tables ([[name.sub]]), as TOML requires.
func writeTable(b *bytes.Buffer, name string, v reflect.Value) {
	t := v.Type()
	var tables, arrays []int
	headerDone := name == ""
	for i := range t.NumField() {
		f, fv := t.Field(i), v.Field(i)
		switch {
		case f.Type.Kind() == reflect.Struct:
			tables = append(tables, i)
			continue
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			arrays = append(arrays, i)
			if fv.Len() > 0 {
				continue
			}
		}
		if !headerDone {
			fmt.Fprintf(b, "\n[%s]\n", name)
			headerDone = true
		}
		fmt.Fprintf(b, "%s = %s\n", key(f), value(fv))
	}
	for _, i := range tables {
		writeTable(b, join(name, key(t.Field(i))), v.Field(i))
	}
	for _, i := range arrays {
		fv := v.Field(i)
		full := join(name, key(t.Field(i)))
		for j := range fv.Len() {
			fmt.Fprintf(b, "\n[[%s]]\n", full)
			el := fv.Index(j)
			for k := range el.NumField() {
				fmt.Fprintf(b, "%s = %s\n", key(el.Type().Field(k)), value(el.Field(k)))
			}
		}
	}
}

func key(f reflect.StructField) string { return f.Tag.Get("koanf") }

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

func value(v reflect.Value) string {
	if v.Type() == durationType {
		return quote(formatDuration(time.Duration(v.Int())))
	}
	switch v.Kind() {
	case reflect.String:
		return quote(v.String())
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Float32, reflect.Float64:
		s := strconv.FormatFloat(v.Float(), 'f', -1, 64)
		if !strings.ContainsAny(s, ".eE") {
			s += ".0" // a TOML float needs a fraction
		}
		return s
	case reflect.Slice:
		parts := make([]string, v.Len())
		for i := range v.Len() {
			parts[i] = value(v.Index(i))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case reflect.Map:
		keys := make([]string, 0, v.Len())
		for _, k := range v.MapKeys() {
			keys = append(keys, k.String())
		}
		slices.Sort(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = quote(k) + " = " + value(v.MapIndex(reflect.ValueOf(k)))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	panic(fmt.Sprintf("config: no TOML form for %s", v.Type()))
}

// quote writes a TOML basic string: TOML knows \uXXXX but not Go's \x
// escapes, so everything outside printable ASCII-safe text is written as
// \u escapes or kept as UTF-8.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\u%04X", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// formatDuration is d as the example file writes it: "5m" rather than
// Go's "5m0s", "24h" rather than "24h0m0s".
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
