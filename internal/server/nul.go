package server

import (
	"strings"

	"buf.build/gen/go/bufbuild/protovalidate/protocolbuffers/go/buf/validate"
	"buf.build/go/protovalidate"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

// A NUL character (U+0000) is valid UTF-8 and so passes protobuf and
// protovalidate, but PostgreSQL's text and jsonb cannot hold it: a request
// that carried one as far as SQL failed there and answered Internal (a
// username, a product name, a config value). No field of any request has a
// use for it, so it is refused here, once, for every string a request
// holds — nested messages, repeated fields, map keys and values, the
// google.protobuf.Struct of a plugin's config — before any handler runs.
const (
	nulRuleID  = "paymentd.no_nul"
	nulMessage = "must not contain NUL characters"
)

// nulError is the validation error of the first string in m holding a NUL,
// nil when none does: one violation naming the field's path, in the shape
// protovalidate gives its own ("validation error: username: must not
// contain NUL characters").
//
// It runs on every request, so the walk allocates nothing unless it finds
// a NUL or meets a non-empty repeated or map field (the reflection of
// those allocates a small view; only admin requests with a Struct config
// have any). BenchmarkNULCheck has the figures.
func nulError(m protoreflect.Message) *protovalidate.ValidationError {
	hit, found := findNUL(m)
	if !found {
		return nil
	}
	// findNUL collects the path from the string up; the violation names it
	// from the request down.
	path := hit.path
	for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
		path[i], path[j] = path[j], path[i]
	}
	v := validate.Violation_builder{
		Field:   validate.FieldPath_builder{Elements: path}.Build(),
		RuleId:  new(nulRuleID),
		Message: new(nulMessage),
		ForKey:  new(hit.forKey),
	}.Build()
	return &protovalidate.ValidationError{Violations: []*protovalidate.Violation{{Proto: v}}}
}

// nulHit is where a NUL was found: the path to the string, innermost
// element first, and whether the string is a map key.
type nulHit struct {
	path   []*validate.FieldPathElement
	forKey bool
}

func (h nulHit) in(el *validate.FieldPathElement) nulHit {
	h.path = append(h.path, el)
	return h
}

// findNUL reports whether a string in m holds a NUL and, when one does,
// where.
func findNUL(m protoreflect.Message) (nulHit, bool) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if !mayHoldText(fd) || !m.Has(fd) {
			continue
		}
		switch {
		case fd.IsMap():
			if hit, found := findNULInMap(fd, m.Get(fd).Map()); found {
				return hit, true
			}
		case fd.IsList():
			l := m.Get(fd).List()
			for j := range l.Len() {
				if hit, found := findNULInValue(fd, l.Get(j)); found {
					el := pathElement(fd)
					el.SetIndex(uint64(j))
					return hit.in(el), true
				}
			}
		default:
			if hit, found := findNULInValue(fd, m.Get(fd)); found {
				return hit.in(pathElement(fd)), true
			}
		}
	}
	return nulHit{}, false
}

// findNULInValue looks at one value of fd (a singular field's, or an
// element of a list or map): a string, or a message to walk.
func findNULInValue(fd protoreflect.FieldDescriptor, v protoreflect.Value) (nulHit, bool) {
	switch fd.Kind() {
	case protoreflect.StringKind:
		if strings.IndexByte(v.String(), 0) >= 0 {
			return nulHit{path: make([]*validate.FieldPathElement, 0, 4)}, true
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return findNUL(v.Message())
	}
	return nulHit{}, false
}

func findNULInMap(fd protoreflect.FieldDescriptor, m protoreflect.Map) (nulHit, bool) {
	keyFD, valFD := fd.MapKey(), fd.MapValue()
	var (
		hit   nulHit
		found bool
	)
	m.Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
		if keyFD.Kind() == protoreflect.StringKind && strings.IndexByte(k.String(), 0) >= 0 {
			hit, found = nulHit{forKey: true}.in(setKey(pathElement(fd), keyFD, k)), true
			return false
		}
		if hit, found = findNULInValue(valFD, v); found {
			hit = hit.in(setKey(pathElement(fd), keyFD, k))
			return false
		}
		return true
	})
	return hit, found
}

// mayHoldText reports whether fd can hold a string: a string field, a
// message (which may have some), or a map with either as key or value.
func mayHoldText(fd protoreflect.FieldDescriptor) bool {
	if fd.IsMap() {
		return fd.MapKey().Kind() == protoreflect.StringKind || mayHoldText(fd.MapValue())
	}
	switch fd.Kind() {
	case protoreflect.StringKind, protoreflect.MessageKind, protoreflect.GroupKind:
		return true
	}
	return false
}

// pathElement describes fd as protovalidate does in a violation's path.
func pathElement(fd protoreflect.FieldDescriptor) *validate.FieldPathElement {
	el := validate.FieldPathElement_builder{
		FieldNumber: new(int32(fd.Number())),
		FieldName:   new(string(fd.Name())),
		FieldType:   new(descriptorpb.FieldDescriptorProto_Type(fd.Kind())),
	}.Build()
	if fd.IsMap() {
		el.SetKeyType(descriptorpb.FieldDescriptorProto_Type(fd.MapKey().Kind()))
		el.SetValueType(descriptorpb.FieldDescriptorProto_Type(fd.MapValue().Kind()))
	}
	return el
}

// setKey sets the map key k (of keyFD's kind) as el's subscript.
func setKey(el *validate.FieldPathElement, keyFD protoreflect.FieldDescriptor, k protoreflect.MapKey) *validate.FieldPathElement {
	switch keyFD.Kind() {
	case protoreflect.StringKind:
		el.SetStringKey(k.String())
	case protoreflect.BoolKind:
		el.SetBoolKey(k.Bool())
	case protoreflect.Int32Kind, protoreflect.Int64Kind, protoreflect.Sint32Kind, protoreflect.Sint64Kind,
		protoreflect.Sfixed32Kind, protoreflect.Sfixed64Kind:
		el.SetIntKey(k.Int())
	default:
		el.SetUintKey(k.Uint())
	}
	return el
}
