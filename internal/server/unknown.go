package server

import (
	"fmt"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// unknownProcedure answers a path that no service or route serves as an
// RPC error in the caller's protocol, not as a plain-text "404 page not
// found" a client generated from the API cannot parse. An RPC (a Connect,
// gRPC or gRPC-Web request by its method and content type) is
// Unimplemented, as gRPC answers an unknown method: Connect's JSON error
// with HTTP 501, gRPC's status 12 with HTTP 200. Anything else (a browser,
// a probe, a scanner) is NotFound as Connect JSON with HTTP 404, the status
// the web expects of a path that is not there.
func unknownProcedure() http.Handler {
	errs := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// connect-go takes every GET for a Connect GET call; one has the
		// encoding parameter.
		if errs.IsSupported(r) && (r.Method != http.MethodGet || r.URL.Query().Has("encoding")) {
			_ = errs.Write(w, r, connect.NewError(connect.CodeUnimplemented, fmt.Errorf("%s is not a procedure of this API", r.URL.Path)))
			return
		}
		_ = errs.Write(w, r, connect.NewError(connect.CodeNotFound, fmt.Errorf("%s is not served here", r.URL.Path)))
	})
}

// knownMethods answers Unimplemented (unknownProcedure) for a method the
// service svc does not have; the generated handler would answer a plain
// 404. A service missing from the registry is served as it is.
func knownMethods(svc string, h http.Handler) http.Handler {
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if err != nil || !ok {
		return h
	}
	unknown := unknownProcedure()
	prefix := "/" + svc + "/"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method, _ := strings.CutPrefix(r.URL.Path, prefix)
		if sd.Methods().ByName(protoreflect.Name(method)) == nil {
			unknown.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// procedures are the procedures of the service svc (/svc/Method), none
// for a service missing from the registry.
func procedures(svc string) []string {
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if err != nil || !ok {
		return nil
	}
	var out []string
	for i := range sd.Methods().Len() {
		out = append(out, "/"+svc+"/"+string(sd.Methods().Get(i).Name()))
	}
	return out
}
