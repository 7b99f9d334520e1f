package server_test

import (
	"fmt"
	"regexp/syntax"
	"slices"
	"strings"
	"testing"

	"buf.build/gen/go/bufbuild/protovalidate/protocolbuffers/go/buf/validate"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	_ "github.com/rustbill/paymentd/gen/billing/event"
	_ "github.com/rustbill/paymentd/gen/billing/gateway"
	_ "github.com/rustbill/paymentd/gen/billing/identity"
	_ "github.com/rustbill/paymentd/gen/billing/integration"
	_ "github.com/rustbill/paymentd/gen/billing/order"
	_ "github.com/rustbill/paymentd/gen/billing/payment"
)

// boundedString reports whether a string rule bounds the field's size:
// a maximum length, a UUID, a closed list (in / const), or a pattern that
// admits only strings of bounded length.
func boundedString(s *validate.StringRules) bool {
	if s == nil {
		return false
	}
	switch {
	case s.HasMaxLen(), s.HasMaxBytes(), s.HasLen(), s.HasLenBytes(), s.HasConst():
		return true
	case len(s.GetIn()) > 0:
		return true
	case s.GetUuid(), s.GetTuuid():
		return true
	case s.HasPattern():
		return boundedPattern(s.GetPattern())
	}
	return false
}

// boundedPattern reports whether a (RE2) pattern matches only strings of
// bounded length: anchored at both ends (^…$), with no *, + or {n,}.
func boundedPattern(p string) bool {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return false
	}
	re = re.Simplify()
	if re.Op != syntax.OpConcat || len(re.Sub) < 2 ||
		re.Sub[0].Op != syntax.OpBeginText || re.Sub[len(re.Sub)-1].Op != syntax.OpEndText {
		return false
	}
	var finite func(*syntax.Regexp) bool
	finite = func(r *syntax.Regexp) bool {
		switch r.Op {
		case syntax.OpStar, syntax.OpPlus:
			return false
		case syntax.OpRepeat:
			if r.Max < 0 {
				return false
			}
		}
		for _, sub := range r.Sub {
			if !finite(sub) {
				return false
			}
		}
		return true
	}
	return finite(re)
}

func fieldRules(fd protoreflect.FieldDescriptor) *validate.FieldRules {
	r, _ := proto.GetExtension(fd.Options(), validate.E_Field).(*validate.FieldRules)
	return r
}

// unbounded lists, as message.field, every string of a request that no rule
// bounds, walking nested messages, repeated fields and maps.
func unbounded(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) []string {
	if seen[md.FullName()] {
		return nil
	}
	seen[md.FullName()] = true
	var out []string
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		name := string(md.FullName()) + "." + string(fd.Name())
		r := fieldRules(fd)
		switch {
		case fd.IsMap():
			if fd.MapKey().Kind() == protoreflect.StringKind && !boundedString(r.GetMap().GetKeys().GetString()) {
				out = append(out, name+" (map keys)")
			}
			if fd.MapValue().Kind() == protoreflect.StringKind && !boundedString(r.GetMap().GetValues().GetString()) {
				out = append(out, name+" (map values)")
			}
			if !r.GetMap().HasMaxPairs() {
				out = append(out, name+" (map size)")
			}
			if fd.MapValue().Kind() == protoreflect.MessageKind {
				out = append(out, unbounded(fd.MapValue().Message(), seen)...)
			}
		case fd.IsList():
			if !r.GetRepeated().HasMaxItems() {
				out = append(out, name+" (repeated size)")
			}
			if fd.Kind() == protoreflect.StringKind && !boundedString(r.GetRepeated().GetItems().GetString()) {
				out = append(out, name+" (items)")
			}
			if fd.Kind() == protoreflect.MessageKind {
				out = append(out, unbounded(fd.Message(), seen)...)
			}
		case fd.Kind() == protoreflect.StringKind:
			if !boundedString(r.GetString()) {
				out = append(out, name)
			}
		case fd.Kind() == protoreflect.BytesKind:
			if !r.GetBytes().HasMaxLen() && !r.GetBytes().HasLen() {
				out = append(out, name)
			}
		case fd.Kind() == protoreflect.MessageKind:
			if strings.HasPrefix(string(fd.Message().FullName()), "google.protobuf.") {
				// Well-known types carry no rules of their own (a Struct of
				// a gateway config); the request size limit bounds them,
				// and the domain validates their contents.
				continue
			}
			out = append(out, unbounded(fd.Message(), seen)...)
		}
	}
	return out
}

// Every string a caller can send is bounded by a protovalidate rule, so a
// hostile client cannot make a handler, the database or a log line carry a
// megabyte-long id or name: the request size limit bounds the whole message,
// these rules each field. A new request field without a bound fails here.
func TestBoundedPatternTellsFiniteAnchoredPatterns(t *testing.T) {
	t.Parallel()
	for p, want := range map[string]bool{
		`^[A-Z]{3}$`:                      true,
		`^([0-9]{1,10}(\.[0-9]{1,2})?)?$`: true,
		`^[a-z]+$`:                        false,
		`^[a-z]{1,}$`:                     false,
		`[A-Z]{3}`:                        false,
		`^[A-Z]{3}`:                       false,
		`^a*$`:                            false,
		`(`:                               false,
	} {
		require.Equal(t, want, boundedPattern(p), p)
	}
}

func TestEveryRequestStringFieldIsBounded(t *testing.T) {
	t.Parallel()
	var services []protoreflect.ServiceDescriptor
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if strings.HasPrefix(string(fd.Package()), "billing.") {
			for i := range fd.Services().Len() {
				services = append(services, fd.Services().Get(i))
			}
		}
		return true
	})
	require.GreaterOrEqual(t, len(services), 6, "every service of proto/billing is linked in")
	var bad []string
	methods := 0
	for _, sd := range services {
		for i := range sd.Methods().Len() {
			m := sd.Methods().Get(i)
			methods++
			for _, f := range unbounded(m.Input(), map[protoreflect.FullName]bool{}) {
				bad = append(bad, fmt.Sprintf("%s (request of %s)", f, m.FullName()))
			}
		}
	}
	slices.Sort(bad)
	bad = slices.Compact(bad)
	t.Logf("walked %d methods of %d services", methods, len(services))
	require.Empty(t, bad, "request fields without a size bound: add a protovalidate rule (max_len, uuid, in, ...)")
}
